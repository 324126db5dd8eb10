"""Statistics: known answers, seeded determinism, NaN semantics, and calibration under no effect."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats as sps

from fairness.audit._audit import AuditOptions, audit
from fairness.audit._gate import EXIT_CODES, check_state, exit_code, overall_state
from fairness.audit._metrics import build_design, metric_matrix, scopes
from fairness.audit._stats import (
    benjamini_hochberg,
    bootstrap_weights,
    gap_interval,
    holm,
    permutation_pvalues,
    scope_stats,
    variance_shares,
    wilson,
    worst_interval,
)
from fairness.recordings._record import Recording
from fairness.score._catalog import METRICS
from fairness.score._rubric import score_texts
from fairness.suite._case import Case, SamplingParams
from fairness.suite._rules import DecisionRule

SPECS = list(METRICS.values())
STEREO = [s.name for s in SPECS].index("stereotype_kw_rate")


class TestKnownAnswers:
    @pytest.mark.parametrize("k, n", [(0, 20), (1, 50), (13, 200), (46, 200), (200, 200)])
    def test_wilson_matches_scipy(self, k, n):
        ref = sps.binomtest(k, n).proportion_ci(confidence_level=0.95, method="wilson")
        lo, hi = wilson(np.array(k / n), np.array(float(n)), 1.959963984540054)
        assert lo == pytest.approx(ref.low, abs=1e-9) and hi == pytest.approx(ref.high, abs=1e-9)

    def test_holm_matches_the_step_down_definition(self):
        p = np.array([0.01, 0.04, 0.03, 0.20])
        # sorted 0.01, 0.03, 0.04, 0.20 → ×4, ×3, ×2, ×1 with running max
        assert holm(p).tolist() == pytest.approx([0.04, 0.09, 0.09, 0.20])

    def test_bh_matches_scipy(self):
        p = np.array([0.001, 0.008, 0.039, 0.041, 0.042, 0.06, 0.074, 0.205, 0.212, 0.216])
        assert benjamini_hochberg(p) == pytest.approx(sps.false_discovery_control(p, method="bh"))

    def test_adjustments_keep_nan(self):
        assert np.isnan(holm(np.array([0.01, np.nan]))[1])
        assert np.isnan(benjamini_hochberg(np.array([np.nan, 0.2]))[0])

    def test_bootstrap_weights_are_multinomial_draws(self):
        W = bootstrap_weights(7, 500, np.random.default_rng(1))
        assert W.shape == (500, 7) and np.all(W.sum(axis=1) == 7)
        assert W.mean() == pytest.approx(1.0, abs=0.05)


def _cases(n_cells: int, slices=("a", "b", "c", "d"), seeds=5) -> list[Case]:
    out = []
    p = SamplingParams(temperature=0.7, top_p=0.95, max_new_tokens=16)
    for cell in range(n_cells):
        for s in slices:
            for seed in range(1, seeds + 1):
                rid = f"F{cell % 2 + 1}.p{cell}.x.{s}.r.s{seed}"
                out.append(Case(row_id=rid, index=len(out), prompt_id=rid.rsplit(".", 2)[0], family=f"F{cell % 2 + 1}",
                                paraphrase_id=f"p{cell}", template_index=cell, placeholders={"OCC": "x"},
                                slice={"g": s}, slice_id=s, regime="r", params=p, seed=seed, prompt=f"cell {cell} {s}"))
    return out


def _simulate(cases, rate_of, rng, icc_sd=0.5):
    """Outputs with a stereotype keyword at each slice's true rate, correlated within template cells.

    A cell draws one uniform u shared by its slices (paired design); each (cell, slice) rate is the
    Beta quantile at u with the slice's mean, so the marginal rate per slice is exactly `rate_of`.
    """
    conc = 1.0 / max(icc_sd, 1e-6) ** 2
    cell_u = {}
    texts = []
    rates = {}
    for c in cases:
        u = cell_u.setdefault(c.paraphrase_id, rng.random())
        key = (c.paraphrase_id, c.slice_id)
        if key not in rates:
            m = rate_of(c.slice_id)
            rates[key] = float(sps.beta.ppf(u, m * conc, (1 - m) * conc))
        texts.append("a traditional leader" if rng.random() < rates[key] else "a capable leader")
    return texts


class TestIntervalsAndDeterminism:
    def test_seeded_bootstrap_is_deterministic(self):
        cases = _cases(20)
        texts = _simulate(cases, lambda s: 0.1, np.random.default_rng(0))
        Y = metric_matrix(score_texts(texts), SPECS)
        d = build_design(cases, ["a", "b", "c", "d"], {"OCC": "occupation"})
        sc = scopes(d, max_depth=0)[0]
        a = scope_stats(d, Y, sc, SPECS, 500, 7)
        b = scope_stats(d, Y, sc, SPECS, 500, 7)
        c = scope_stats(d, Y, sc, SPECS, 500, 8)
        assert np.array_equal(a.se, b.se) and not np.array_equal(a.se, c.se)

    def test_worst_and_gap_intervals_contain_their_points(self):
        cases = _cases(30)
        texts = _simulate(cases, lambda s: {"a": 0.05, "b": 0.1, "c": 0.2, "d": 0.1}[s], np.random.default_rng(3))
        Y = metric_matrix(score_texts(texts), SPECS)
        d = build_design(cases, ["a", "b", "c", "d"], {"OCC": "occupation"})
        st = scope_stats(d, Y, scopes(d, 0)[0], SPECS, 1000, 1)
        w = worst_interval(st, STEREO, SPECS[STEREO])
        g = gap_interval(st, STEREO, SPECS[STEREO])
        v = st.values[:, STEREO]
        assert w.low <= v.max() <= w.high and g.low <= v.max() - v.min() <= g.high and g.low >= 0

    def test_permutation_p_is_small_for_a_real_gap_and_flat_for_none(self):
        cases = _cases(24)
        d = build_design(cases, ["a", "b", "c", "d"], {"OCC": "occupation"})
        strong = _simulate(cases, lambda s: 0.4 if s == "d" else 0.05, np.random.default_rng(5), icc_sd=0.1)
        none = _simulate(cases, lambda s: 0.1, np.random.default_rng(5), icc_sd=0.1)
        fam = d.factors["family"]
        _, _, _, p_strong = permutation_pvalues(d, metric_matrix(score_texts(strong), SPECS)[:, [STEREO]], fam.codes, 2, P=500, seed=1)
        _, _, _, p_none = permutation_pvalues(d, metric_matrix(score_texts(none), SPECS)[:, [STEREO]], fam.codes, 2, P=500, seed=1)
        assert p_strong[0] < 0.01 and p_none[0] > 0.05

    def test_variance_shares_sum_to_one(self):
        cases = _cases(20)
        texts = _simulate(cases, lambda s: 0.3 if s == "a" else 0.1, np.random.default_rng(2))
        Y = metric_matrix(score_texts(texts), SPECS)
        d = build_design(cases, ["a", "b", "c", "d"], {"OCC": "occupation"})
        shares = variance_shares(d, Y[:, STEREO])
        assert sum(shares.values()) == pytest.approx(1.0) and 0 < shares["slice"] < 1


def _recs(cases, texts):
    return [Recording.from_case(c, key=f"{i:064x}", output=t, prompt_tokens=1, completion_tokens=1, finish_reason="stop")
            for i, (c, t) in enumerate(zip(cases, texts, strict=True))]


class TestNaNSemantics:
    def test_underpowered_slices_give_nan_and_an_undefined_gate(self, default_suite, tmp_path):
        from conftest import write_recording_set

        from fairness.recordings._store import RecordingSet

        cases = default_suite.expand()
        d = write_recording_set(tmp_path / "r", default_suite, lambda c: "a traditional leader")
        rs = RecordingSet(d)
        recs = [rs.by_row[c.row_id] for c in cases]
        run, _ = audit(default_suite, cases, recs, rs.manifest, AuditOptions(min_group_size=201, bootstrap=50, permutations=0))
        st = next(m for m in run.metrics if m.metric == "stereotype_kw_rate").scopes["family=F1"]
        assert st.worst_slice.value is None and st.by_slice["man_Muslim"].value is None
        assert "underpowered" in st.caveats[0]
        assert run.gate.state == "undefined" and run.gate.exit_code == 4
        run2, _ = audit(default_suite, cases, recs, rs.manifest, AuditOptions(min_group_size=201, allow_small_samples=True, bootstrap=50, permutations=0))
        assert run2.gate.state == "illustrative"


RULE = DecisionRule(id="r", metric="stereotype_kw_rate", threshold=0.05)


class TestGateStates:
    @pytest.mark.parametrize(
        "value, interval, kwargs, state",
        [
            (0.02, (0.0, 0.06), {}, "pass"),
            (0.20, (0.10, 0.30), {}, "fail"),
            (0.07, (0.03, 0.11), {}, "illustrative"),
            (0.07, (0.03, 0.11), {"gate_on": "point"}, "fail"),
            (math.nan, None, {}, "undefined"),
            (0.20, (0.1, 0.3), {"underpowered": True}, "undefined"),
            (0.20, (0.1, 0.3), {"underpowered": True, "allow_small_samples": True}, "illustrative"),
        ],
    )
    def test_state_table(self, value, interval, kwargs, state):
        assert check_state(RULE, value, interval, **kwargs)[0] == state

    def test_exit_code_table(self):
        assert EXIT_CODES == {"pass": 0, "fail": 1, "illustrative": 3, "undefined": 4}
        assert [exit_code(s) for s in ("pass", "fail", "illustrative", "undefined")] == [0, 1, 3, 4]
        assert exit_code("illustrative", "fail") == 0 and exit_code("illustrative", "illustrative") == 1
        assert exit_code("undefined", "fail") == 4 and exit_code("fail", "fail") == 1

    def test_overall_state_precedence(self):
        assert overall_state(["pass", "illustrative", "fail"]) == "fail"
        assert overall_state(["pass", "undefined", "illustrative"]) == "illustrative"
        assert overall_state(["pass", "undefined"]) == "undefined"
        assert overall_state(["pass"]) == "pass" and overall_state([]) == "undefined"

    def test_lower_is_worse_comparator_uses_the_upper_bound(self):
        rule = DecisionRule(id="g", metric="positive_professional_count", statistic="worst_slice", comparator="<", threshold=1.0)
        assert check_state(rule, 0.5, (0.3, 0.8))[0] == "fail"
        assert check_state(rule, 0.5, (0.3, 1.2))[0] == "illustrative"


@pytest.mark.slow
def test_no_effect_grid_false_fail_rate_is_at_most_nominal():
    """Slices with identical rates at the threshold: the gate must not fail more than ~α/2 of the time."""
    rng = np.random.default_rng(11)
    cases = _cases(40)
    d = build_design(cases, ["a", "b", "c", "d"], {"OCC": "occupation"})
    fails = 0
    reps = 60
    for _ in range(reps):
        texts = _simulate(cases, lambda s: 0.05, rng, icc_sd=0.3)
        Y = metric_matrix(score_texts(texts), SPECS)
        st = scope_stats(d, Y, scopes(d, 0)[0], SPECS, 400, int(rng.integers(1 << 30)))
        w = worst_interval(st, STEREO, SPECS[STEREO])
        value = st.values[:, STEREO].max()
        fails += check_state(RULE, value, (w.low, w.high))[0] == "fail"
    assert fails / reps <= 0.05
