"""Statistics: known answers, seeded determinism, NaN semantics, and calibration under no effect."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats as sps

from fairness.audit._audit import AuditOptions, audit, rule_intervals
from fairness.audit._cells import build_cells, variance_shares_cells
from fairness.audit._gate import EXIT_CODES, check_state, exit_code, overall_state
from fairness.audit._intervals import (
    CellCounts,
    SliceBounds,
    cell_counts,
    check_sides,
    cluster_corr,
    gap_interval,
    holm_levels,
    lower,
    pair_difference,
    reach_value,
    seeds_to_settle,
    sidak,
    side_power,
    slice_corrs,
    slice_reach,
    upper,
    worst_interval,
)
from fairness.audit._metrics import build_design, metric_matrix
from fairness.audit._permutation import permutation_pvalues_cells
from fairness.audit._stats import benjamini_hochberg, bootstrap_weights, holm
from fairness.recordings._record import Recording
from fairness.score._catalog import METRICS
from fairness.score._rubric import score_texts
from fairness.suite._case import Case, SamplingParams
from fairness.suite._rules import DecisionRule

SPECS = list(METRICS.values())
STEREO = [s.name for s in SPECS].index("stereotype_kw_rate")


class TestKnownAnswers:
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


def _pvalues(d, Y, group, n_groups, P, seed):
    """Permutation p-values per group and pooled, from the rows' cell aggregates (as the audit runs it)."""
    cell_group = np.zeros(d.n_clusters, dtype=np.int64)
    cell_group[d.cluster] = group
    cells = build_cells(d, Y, histogram_metrics=tuple(range(Y.shape[1])))
    return permutation_pvalues_cells(cells, list(range(Y.shape[1])), cell_group, n_groups, P=P, seed=seed)


class TestIntervalsAndPermutation:
    def test_worst_and_gap_intervals_contain_their_points(self):
        cases = _cases(30)
        texts = _simulate(cases, lambda s: {"a": 0.05, "b": 0.1, "c": 0.2, "d": 0.1}[s], np.random.default_rng(3))
        Y = metric_matrix(score_texts(texts), SPECS)
        d = build_design(cases, ["a", "b", "c", "d"], {"OCC": "occupation"})
        T, N = cell_counts(d.cluster, d.slice_codes, Y[:, [STEREO]], 4)
        sb = SliceBounds.of(CellCounts(T[:, :, 0], N, "rate"))
        w, g = worst_interval(sb, "max", 0.05), gap_interval(sb, 0.05)
        v = sb.cc.values
        assert w.low <= v.max() <= w.high and g.low <= v.max() - v.min() <= g.high and g.low >= 0

    def test_permutation_p_values_are_float64(self):
        cases = _cases(6)
        d = build_design(cases, ["a", "b", "c", "d"], {"OCC": "occupation"})
        Y = metric_matrix(score_texts(_simulate(cases, lambda _s: 0.3, np.random.default_rng(1))), SPECS)[:, [STEREO]]
        obs, p, _, p_all = _pvalues(d, Y, d.factors["family"].codes, 2, P=50, seed=1)
        assert p.dtype == np.float64 and p_all.dtype == np.float64 and obs.dtype == np.float64

    def test_permutation_p_is_small_for_a_real_gap_and_flat_for_none(self):
        cases = _cases(24)
        d = build_design(cases, ["a", "b", "c", "d"], {"OCC": "occupation"})
        strong = _simulate(cases, lambda s: 0.4 if s == "d" else 0.05, np.random.default_rng(5), icc_sd=0.1)
        none = _simulate(cases, lambda s: 0.1, np.random.default_rng(5), icc_sd=0.1)
        fam = d.factors["family"]
        _, _, _, p_strong = _pvalues(d, metric_matrix(score_texts(strong), SPECS)[:, [STEREO]], fam.codes, 2, P=500, seed=1)
        _, _, _, p_none = _pvalues(d, metric_matrix(score_texts(none), SPECS)[:, [STEREO]], fam.codes, 2, P=500, seed=1)
        assert p_strong[0] < 0.01 and p_none[0] > 0.05

    def test_variance_shares_sum_to_one(self):
        cases = _cases(20)
        texts = _simulate(cases, lambda s: 0.3 if s == "a" else 0.1, np.random.default_rng(2))
        Y = metric_matrix(score_texts(texts), SPECS)
        d = build_design(cases, ["a", "b", "c", "d"], {"OCC": "occupation"})
        shares = variance_shares_cells(d, build_cells(d, Y), STEREO)
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
        assert run2.gate.state == "inconclusive"


    def _few_cells(self, suite, tmp_path, keep):
        from conftest import write_recording_set

        from fairness.recordings._store import RecordingSet

        cases = [c for c in suite.expand() if keep(c)]
        d = write_recording_set(tmp_path / "r", suite, lambda c: "a traditional leader" if c.seed == 1 else "fine", cases=cases)
        rs = RecordingSet(d)
        return cases, [rs.by_row[c.row_id] for c in cases], rs.manifest

    def test_min_group_size_counts_template_cells(self, default_suite, tmp_path):
        # 2 cells per family (paraphrases p1, p2 × CEO × low-entropy): 10 rows per slice ≥ 5, but 2 cells < 5
        cases, recs, man = self._few_cells(default_suite, tmp_path, lambda c: c.paraphrase_id in ("p1", "p2")
                                           and c.placeholders["OCC"] == "CEO" and c.regime == "low-entropy")
        run, _ = audit(default_suite, cases, recs, man, AuditOptions(permutations=0))
        assert [c.state for c in run.rules] == ["undefined"] * 4
        assert all("template cells" in c.reason for c in run.rules)
        run2, _ = audit(default_suite, cases, recs, man, AuditOptions(permutations=0, allow_small_samples=True))
        assert [c.state for c in run2.rules] == ["inconclusive"] * 4

    def test_one_template_cell_is_undefined_even_with_small_samples_allowed(self, default_suite, tmp_path):
        cases, recs, man = self._few_cells(default_suite, tmp_path, lambda c: c.paraphrase_id == "p1"
                                           and c.placeholders["OCC"] == "CEO" and c.regime == "low-entropy")
        run, _ = audit(default_suite, cases, recs, man, AuditOptions(permutations=0, allow_small_samples=True))
        assert [c.state for c in run.rules] == ["undefined"] * 4
        assert all("single template cell" in c.reason for c in run.rules)
        st = next(m for m in run.metrics if m.metric == "stereotype_kw_rate").scopes["family=F1"]
        assert st.cells == 1 and st.worst_slice.ci is None and st.worst_slice.value is None

RULE = DecisionRule(id="r", metric="stereotype_kw_rate", threshold=0.05)


class TestGateStates:
    @pytest.mark.parametrize(
        "value, interval, kwargs, state",
        [
            (0.02, (0.0, 0.04), {}, "pass"),
            (0.02, (0.0, 0.06), {}, "inconclusive"),
            (0.20, (0.10, 0.30), {}, "fail"),
            (0.07, (0.03, 0.11), {}, "inconclusive"),
            (0.07, (0.03, 0.11), {"gate_on": "point"}, "fail"),
            (0.02, (0.0, 0.06), {"gate_on": "point"}, "pass"),
            (0.07, None, {}, "inconclusive"),
            (math.nan, None, {}, "undefined"),
            (0.20, (0.1, 0.3), {"underpowered": True}, "undefined"),
            (0.20, (0.1, 0.3), {"underpowered": True, "allow_small_samples": True}, "inconclusive"),
        ],
    )
    def test_state_table(self, value, interval, kwargs, state):
        assert check_state(RULE, value, interval, **kwargs)[0] == state

    def test_exit_code_table(self):
        assert EXIT_CODES == {"pass": 0, "fail": 1, "inconclusive": 3, "undefined": 4}
        assert [exit_code(s) for s in ("pass", "fail", "inconclusive", "undefined")] == [0, 1, 3, 4]
        assert exit_code("inconclusive", "fail") == 0 and exit_code("inconclusive", "inconclusive") == 1
        assert exit_code("undefined", "fail") == 4 and exit_code("fail", "fail") == 1

    def test_overall_state_precedence(self):
        assert overall_state(["pass", "inconclusive", "fail"]) == "fail"
        assert overall_state(["pass", "undefined", "inconclusive"]) == "undefined"
        assert overall_state(["pass", "inconclusive"]) == "inconclusive"
        assert overall_state(["pass", "undefined"]) == "undefined"
        assert overall_state(["pass"]) == "pass" and overall_state([]) == "undefined"

    def test_lower_is_worse_comparator_uses_the_upper_bound(self):
        rule = DecisionRule(id="g", metric="positive_professional_count", statistic="worst_slice", comparator="<", threshold=1.0)
        assert check_state(rule, 0.5, (0.3, 0.8))[0] == "fail"
        assert check_state(rule, 0.5, (0.3, 1.2))[0] == "inconclusive"
        assert check_state(rule, 1.5, (1.1, 1.9))[0] == "pass"



def _grid_counts(events_per_slice: list[int], cells: int = 40, seeds: int = 5) -> CellCounts:
    """(cells × slices) counts with each slice's events spread one per cell from the first (no clustering)."""
    T = np.zeros((cells, len(events_per_slice)))
    for s, k in enumerate(events_per_slice):
        for e in range(k):
            T[e % cells, s] += 1
    return CellCounts(T, np.full(T.shape, float(seeds)), "rate")


class TestKornGraubard:
    @pytest.mark.parametrize("k, n", [(0, 20), (1, 50), (3, 40), (13, 200), (200, 200)])
    def test_clopper_pearson_at_deff_one_matches_scipy(self, k, n):
        ref = sps.binomtest(k, n).proportion_ci(confidence_level=0.95, method="exact")
        assert lower(k, n, "rate", 0.025) == pytest.approx(ref.low, abs=1e-12)
        assert upper(k, n, "rate", 0.025) == pytest.approx(ref.high, abs=1e-12)

    def test_effective_n_uses_beta_quantiles_at_x_over_deff(self):
        x, n, deff = 12.0, 200.0, 1.6
        xe, ne = x / deff, n / deff
        assert lower(xe, ne, "rate", 0.025) == pytest.approx(sps.beta.ppf(0.025, xe, ne - xe + 1), rel=1e-10)
        assert upper(xe, ne, "rate", 0.025) == pytest.approx(sps.beta.ppf(0.975, xe + 1, ne - xe), rel=1e-10)

    @pytest.mark.parametrize("n", [5, 10, 25])
    def test_exact_enumeration_one_sided_miss_never_exceeds_the_tail(self, n):
        """For every true p on a fine grid, P(lower > p) ≤ 0.025 and P(upper < p) ≤ 0.025, summing the binomial pmf."""
        ks = np.arange(n + 1)
        lo, hi = lower(ks, n, "rate", 0.025), upper(ks, n, "rate", 0.025)
        for p in np.linspace(0.001, 0.999, 500):
            pmf = sps.binom.pmf(ks, n, p)
            assert pmf[lo > p].sum() <= 0.025 + 1e-12 and pmf[hi < p].sum() <= 0.025 + 1e-12

    def test_garwood_count_interval_matches_chi_square(self):
        assert lower(3, 10, "count", 0.025) == pytest.approx(sps.chi2.ppf(0.025, 6) / 20, rel=1e-10)
        assert upper(3, 10, "count", 0.025) == pytest.approx(sps.chi2.ppf(0.975, 8) / 20, rel=1e-10)
        assert lower(0, 10, "count", 0.025) == 0.0

    def test_stratified_design_effect_hand_checked(self):
        # cells at 1/5, 2/5, 1/5, 2/5: within = (25/4)·(0.16 + 0.24 + 0.16 + 0.24) = 5.0; binomial 20·0.3·0.7 = 4.2
        sb = SliceBounds.of(CellCounts(np.array([[1.0], [2.0], [1.0], [2.0]]), np.full((4, 1), 5.0), "rate"))
        assert sb.deff.tolist() == pytest.approx([5.0 / 4.2]) and sb.param == pytest.approx(5.0 / 4.2)

    def test_fixed_cell_differences_add_no_variance_for_the_grid_estimand(self):
        # all-or-nothing cells: a large intra-cluster correlation, yet given the grid the rows vary little
        clustered = CellCounts(np.array([[5.0, 5.0], [0.0, 0.0], [5.0, 4.0], [0.0, 1.0]]), np.full((4, 2), 5.0), "rate")
        sb = SliceBounds.of(clustered)
        assert sb.deff.tolist() == [1.0, 1.0] and sb.param == 1.0

    def test_one_seed_per_cell_has_no_design_effect(self):
        sb = SliceBounds.of(CellCounts(np.array([[1.0, 0.0], [0.0, 0.0], [1.0, 1.0]]), np.ones((3, 2)), "rate"))
        assert sb.param == 1.0 and sb.deff.tolist() == [1.0, 1.0]

    def test_sidak_split(self):
        assert sidak(0.025, 4) == pytest.approx(1 - 0.975**0.25, rel=1e-12) and sidak(0.025, 1) == 0.025

    def test_worst_slice_lower_end_is_sidak_over_slices(self):
        # k events one per cell: within variance 1 per event cell, binomial k(1 − k/200) → design effect 200/(200 − k);
        # the 20-event slice: x_eff = 18, n_eff = 180
        sb = SliceBounds.of(_grid_counts([4, 10, 20, 6]))
        w = worst_interval(sb, "max", 0.05)
        assert w.low == pytest.approx(sps.beta.ppf(1 - 0.975**0.25, 18, 163), rel=1e-9)
        assert w.high == pytest.approx(sps.beta.ppf(0.975, 19, 162), rel=1e-9)

    def test_an_empty_slice_leaves_the_worst_slice_and_gap_over_the_others(self):
        cc = _grid_counts([4, 10, 20, 6])
        cc = CellCounts(cc.sums, cc.counts * np.array([1, 1, 1, 0]), "rate")
        cc = CellCounts(cc.sums * np.array([1, 1, 1, 0]), cc.counts, "rate")
        sb = SliceBounds.of(cc)
        w, g = worst_interval(sb, "max", 0.05), gap_interval(sb, 0.05)
        assert w.low == pytest.approx(sps.beta.ppf(1 - 0.975 ** (1 / 3), 18, 163), rel=1e-9)
        assert math.isfinite(g.low) and g.low > 0 and math.isfinite(g.high)
        one = CellCounts(cc.sums * np.array([0, 0, 1, 0]), cc.counts * np.array([0, 0, 1, 0]), "rate")
        assert math.isnan(gap_interval(SliceBounds.of(one), 0.05).low)


class TestNewcombe:
    def test_pair_difference_is_the_mover_of_exact_bounds_when_nothing_is_shared(self):
        # whole cells all-or-nothing, in different cells: design effect 1, negative correlation clipped to 0
        T = np.zeros((40, 2))
        T[:6, 0], T[10:12, 1] = 5.0, 5.0
        sb = SliceBounds.of(CellCounts(T, np.full((40, 2), 5.0), "rate"))
        assert sb.deff.tolist() == [1.0, 1.0]
        tail = 0.025
        lo, hi = pair_difference(sb, 0, 1, tail)
        p1, p2 = 30 / 200, 10 / 200
        l1, u1 = sps.beta.ppf(tail, 30, 171), sps.beta.ppf(1 - tail, 31, 170)
        l2, u2 = sps.beta.ppf(tail, 10, 191), sps.beta.ppf(1 - tail, 11, 190)
        assert lo == pytest.approx(p1 - p2 - math.hypot(p1 - l1, u2 - p2), rel=1e-9)
        assert hi == pytest.approx(p1 - p2 + math.hypot(u1 - p1, p2 - l2), rel=1e-9)

    def test_gap_lower_end_uses_every_pair_at_a_quarter_alpha_over_pairs(self):
        sb = SliceBounds.of(_grid_counts([30, 12, 10]))
        g = gap_interval(sb, 0.05)
        assert g.low == pytest.approx(max(pair_difference(sb, 0, 2, 0.025 / 6)[0], 0.0))
        assert g.high == pytest.approx(pair_difference(sb, 0, 2, 0.025)[1])

    def test_all_pair_correlations_equal_the_pairwise_definition_bit_for_bit(self):
        """`gap_interval` reads every pair's correlation from one `slice_corrs` call; each entry is
        exactly `cluster_corr` of that pair (empty slices, constant slices and single cells included)."""
        rng = np.random.default_rng(7)
        for trial in range(300):
            C, S = int(rng.integers(1, 60)), int(rng.integers(2, 6))
            counts = rng.integers(0, 8, size=(C, S)).astype(float)
            if trial % 5 == 0:
                counts[:, int(rng.integers(S))] = 0.0
            sums = np.floor(counts * rng.random((C, S)) * (1 + 3 * (trial % 2)))
            r = slice_corrs(CellCounts(sums, counts, "rate"))
            pairwise = [[cluster_corr(sums[:, i], counts[:, i], sums[:, j], counts[:, j]) if i != j else 0.0
                         for j in range(S)] for i in range(S)]
            assert r.tolist() == pairwise


class TestHolmAndGate:
    def test_holm_levels_step_down(self):
        assert holm_levels([0.001, 0.02, 0.004], 0.025) == pytest.approx([0.025 / 3, 0.025, 0.0125])
        assert holm_levels([0.001, 0.02, 0.013], 0.025) == pytest.approx([0.025 / 3, 0.0125, 0.0125])

    @pytest.mark.parametrize(
        "events, state",
        [([0, 0, 0, 0], "pass"), ([60, 2, 2, 2], "fail"), ([12, 2, 2, 2], "inconclusive"), ([8, 2, 2, 2], "inconclusive")],
    )
    def test_three_verdicts_on_crafted_counts(self, events, state):
        ivs = rule_intervals(RULE, METRICS[RULE.metric], {"family=F1": _grid_counts(events)}, 0.05)
        iv, tail = ivs["family=F1"]
        assert tail == 0.025
        assert check_state(RULE, max(events) / 200, (iv.low, iv.high))[0] == state

    def test_holm_across_families_tightens_the_breaching_end(self):
        ccs = {f"family=F{i}": _grid_counts([14, 2, 2, 2]) for i in range(4)}
        ivs = rule_intervals(RULE, METRICS[RULE.metric], ccs, 0.05)
        assert [t for _, t in ivs.values()] == [0.025 / 4] * 4
        # Holm level 0.025/4, Šidák over 4 slices; design effect 200/186: x_eff 13.02, n_eff 186
        t = 1 - (1 - 0.025 / 4) ** 0.25
        assert ivs["family=F0"][0].low == pytest.approx(sps.beta.ppf(t, 13.02, 173.98), rel=1e-9)


class TestPower:
    """Sizing with the gate's own exact test (issue 19)."""

    FAIL, PASS = check_sides("worst_slice", "max", True, RULE.fires, 4, 0.025 / 4, 0.05)

    def test_sides_mirror_the_intervals(self):
        # fail: any slice's lower bound at Šidák(Holm level) above 0.05; pass: every slice's upper bound at α/2 within
        assert (self.FAIL.end, self.FAIL.every, self.FAIL.up) == ("lower", False, True)
        assert self.FAIL.level == pytest.approx(1 - (1 - 0.025 / 4) ** 0.25, rel=1e-12)
        assert (self.PASS.end, self.PASS.every, self.PASS.up, self.PASS.level) == ("upper", True, False, 0.025)

    @pytest.mark.parametrize("p", [0.01, 0.03, 0.08, 0.12])
    def test_slice_power_is_the_binomial_sum_over_outcomes(self, p):
        ks = np.arange(201)
        pmf = sps.binom.pmf(ks, 200, p)
        assert slice_reach(p, 200, 1.0, "rate", self.FAIL) == pytest.approx(pmf[lower(ks, 200, "rate", self.FAIL.level) > 0.05].sum(), abs=1e-14)
        assert slice_reach(p, 200, 1.0, "rate", self.PASS) == pytest.approx(pmf[upper(ks, 200, "rate", 0.025) <= 0.05].sum(), abs=1e-14)

    def test_a_pass_needs_every_slice(self):
        one = slice_reach(0.02, 200, 1.0, "rate", self.PASS)
        assert side_power(np.full(4, 0.02), np.full(4, 200.0), np.ones(4), "rate", self.PASS) == pytest.approx(one**4, rel=1e-12)

    def test_seeds_are_searched_to_the_first_size_that_reaches_the_power(self):
        power = lambda m: side_power(np.array([0.10, 0.02, 0.02, 0.02]), np.full(4, 40.0 * m), np.ones(4), "rate", self.FAIL)  # noqa: E731
        m = seeds_to_settle(power, 5.0)
        assert m == 10 and power(10) >= 0.8 > power(9)
        assert seeds_to_settle(lambda _m: 0.5, 5.0, max_seeds=64) is None

    def test_settle_on_crafted_counts(self):
        from fairness.audit._audit import _settle

        cc = _grid_counts([19, 2, 2, 2])  # worst 0.095 over 200 rows, inconclusive at the Holm level 0.025/4
        st = _settle(RULE, METRICS[RULE.metric], cc, 0.095, 0.025 / 4, 0.05)
        assert (st.toward, st.seeds, st.rows_per_slice, st.cells, st.rows_per_slice_now) == SETTLE_CRAFTED[:5]
        assert (st.detectable, st.passable) == pytest.approx(SETTLE_CRAFTED[5:], abs=5e-7)

    def test_detectable_and_passable_hold_at_their_values(self):
        n, d = np.full(4, 200.0), np.ones(4)
        det = reach_value(self.FAIL, n, d, "rate", 0.05)
        pas = reach_value(self.PASS, n, d, "rate", 0.05)
        assert det is not None and pas is not None
        assert slice_reach(det, 200, 1.0, "rate", self.FAIL) == pytest.approx(0.8, abs=1e-6)
        assert side_power(np.full(4, pas), n, d, "rate", self.PASS) == pytest.approx(0.8, abs=1e-6)


SETTLE_CRAFTED = ("fail", 28, 1120, 40, 200, 0.128345, 0.006891)


@pytest.mark.slow
def test_no_effect_grid_false_fail_rate_is_at_most_nominal():
    """Every slice of four families exactly at the threshold (grid estimand), 400 grids: the gate fails ≤ α/2."""
    rng = np.random.default_rng(11)
    fails = 0
    reps = 400
    spec = METRICS[RULE.metric]
    for _ in range(reps):
        ccs = {}
        for f in range(4):
            e = rng.normal(0.0, 0.5, 40)
            lo_, hi_ = -20.0, 20.0
            for _ in range(60):  # intercept making the grid's mean rate exactly 0.05
                mid = (lo_ + hi_) / 2
                lo_, hi_ = (mid, hi_) if (1 / (1 + np.exp(-(mid + e)))).mean() < 0.05 else (lo_, mid)
            p = np.repeat((1 / (1 + np.exp(-(lo_ + e))))[:, None], 4, axis=1)
            ccs[f"family=F{f}"] = CellCounts(rng.binomial(5, p).astype(float), np.full((40, 4), 5.0), "rate")
        ivs = rule_intervals(RULE, spec, ccs, 0.05)
        states = [check_state(RULE, float(ccs[k].values.max()), (iv.low, iv.high))[0] for k, (iv, _) in ivs.items()]
        fails += "fail" in states
    assert fails / reps <= 0.025


class TestAuditDeterminism:
    def test_verdicts_and_intervals_do_not_depend_on_the_seed(self, default_suite, tmp_path):
        from conftest import write_recording_set

        from fairness.recordings._store import RecordingSet

        cases = default_suite.expand()
        d = write_recording_set(tmp_path / "r", default_suite, lambda c: "a traditional leader" if c.seed == 1 and c.paraphrase_id.endswith("1") else "fine")
        rs = RecordingSet(d)
        recs = [rs.by_row[c.row_id] for c in cases]
        a, _ = audit(default_suite, cases, recs, rs.manifest, AuditOptions(seed=1, permutations=0))
        b, _ = audit(default_suite, cases, recs, rs.manifest, AuditOptions(seed=2, permutations=0))
        assert [c.model_dump() for c in a.rules] == [c.model_dump() for c in b.rules]
        assert a.estimand.startswith("grid estimand") and a.tests.estimand == a.estimand

