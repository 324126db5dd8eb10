"""Per-cell aggregates and the permutation null drawn from them.

The null is checked against exact enumeration of within-cell permutations on small cells,
and against a row-level within-cell shuffle on the committed recordings.
"""

from __future__ import annotations

import itertools
import math
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from fairness.audit._cells import build_cells, scope_cells, slice_table_cells, variance_shares_cells
from fairness.audit._metrics import build_design, metric_matrix, scopes, slice_table
from fairness.audit._permutation import permutation_pvalues_cells, permuted_slice_sums
from fairness.recordings._store import RecordingSet, ReplayProvider
from fairness.score._catalog import METRICS
from fairness.score._rubric import score_texts
from fairness.suite._suite import load_suite

ROOT = Path(__file__).resolve().parents[1]
REC = ROOT / "recordings/fairness-cards/qwen-v0.1/SmolLM2-135M-Instruct-Q4_1"
SPECS = list(METRICS.values())
HARM = [m for m, s in enumerate(SPECS) if s.higher_is_worse is True]


def _counts(values_by_slice: list[list[float]]) -> tuple[np.ndarray, np.ndarray]:
    """(levels, counts 1 × S × V) of one cell given each slice's values."""
    levels = np.unique(np.concatenate([np.asarray(v, dtype=float) for v in values_by_slice]))
    counts = np.array([[[list(v).count(x) for x in levels] for v in values_by_slice]], dtype=np.int64)
    return levels, counts


def _exact_sums(values_by_slice: list[list[float]]) -> Counter:
    """Distribution of the slice totals over every relabelling of one cell's rows."""
    sizes = [len(v) for v in values_by_slice]
    pool = [x for v in values_by_slice for x in v]
    dist: Counter = Counter()
    for perm in itertools.permutations(pool):
        out, i = [], 0
        for k in sizes:
            out.append(sum(perm[i : i + k]))
            i += k
        dist[tuple(out)] += 1
    total = sum(dist.values())
    return Counter({k: v / total for k, v in dist.items()})


class TestNullMatchesEnumeration:
    @pytest.mark.parametrize(
        "cell",
        [
            [[1, 0], [0, 0], [1]],  # binary flag, unequal slices
            [[0, 2, 1], [3, 0], [0, 1]],  # small counts: a random table with fixed margins
            [[1, 1], [1, 1]],  # no variation: the null is a point
        ],
    )
    def test_slice_totals_follow_the_permutation_distribution(self, cell):
        exact = _exact_sums(cell)
        levels, counts = _counts(cell)
        P = 40_000
        draws = permuted_slice_sums(levels, counts, P, np.random.default_rng(11))[:, 0, :]
        seen = Counter(tuple(float(x) for x in row) for row in draws)
        assert set(seen) <= set(exact)
        for outcome, prob in exact.items():
            se = math.sqrt(prob * (1 - prob) / P)
            assert abs(seen[outcome] / P - prob) <= 5 * se + 1e-12, outcome

    def test_row_counts_are_preserved(self):
        levels, counts = _counts([[0, 2, 1], [3, 0], [0, 1]])
        draws = permuted_slice_sums(levels, counts, 500, np.random.default_rng(2))
        assert np.allclose(draws.sum(axis=2), 7.0)  # every relabelling keeps the cell's total

    def test_p_value_matches_enumeration_on_two_cells(self):
        cells = [[[1, 1, 0], [0, 0, 0]], [[1, 0, 0], [1, 0, 0]]]
        # exact p: all relabellings of both cells, statistic max−min of slice means (pooled)
        obs = (3 / 6) - (1 / 6)
        d0, d1 = _exact_sums(cells[0]), _exact_sums(cells[1])
        p_exact = sum(p0 * p1 for s0, p0 in d0.items() for s1, p1 in d1.items()
                      if abs((s0[0] + s1[0]) - (s0[1] + s1[1])) / 6 >= obs - 1e-12)
        from fairness.audit._cells import CellTable

        levels = np.array([0.0, 1.0])
        counts = np.concatenate([_counts(c)[1] for c in cells]).astype(np.int64)
        n = counts.sum(axis=2).astype(float)
        sums = (counts * levels).sum(axis=2)[:, :, None]
        table = CellTable(n_cells=2, n_slices=2, n_metrics=1, n=n, sums=sums, sumsq=sums.copy(), cell_codes={},
                          seed_n=np.zeros(1), seed_sums=np.zeros((1, 1)), histogram_metrics=(0,), hist={0: (levels, counts)})
        P = 20_000
        _, _, obs_p, p = permutation_pvalues_cells(table, [0], np.array([0, 0]), 1, P=P, seed=3)
        assert obs_p[0] == pytest.approx(obs)
        assert abs(p[0] - p_exact) <= 5 * math.sqrt(p_exact * (1 - p_exact) / P)


@pytest.fixture(scope="module")
def committed():
    suite = load_suite("fairness-cards/qwen-v0.1")
    cases = suite.expand()
    recs = ReplayProvider(RecordingSet(REC), suite.system_prompt).replay(cases)
    Y = metric_matrix(score_texts([r.output for r in recs]), SPECS)
    order = ["_".join(s[d] for d in suite.attributes) for s in suite.slice_list]
    design = build_design(cases, order, {ph: suite.column_for(ph) for ph in suite.placeholders})
    return design, Y


class TestAggregatesOnCommittedRecordings:
    def test_chunking_does_not_change_the_table(self, committed):
        design, Y = committed
        a = build_cells(design, Y, tuple(HARM), chunk=10_000)
        b = build_cells(design, Y, tuple(HARM), chunk=333)
        assert np.array_equal(a.n, b.n) and np.array_equal(a.sums, b.sums) and np.array_equal(a.sumsq, b.sumsq)
        for m in HARM:
            assert np.array_equal(a.hist[m][0], b.hist[m][0]) and np.array_equal(a.hist[m][1], b.hist[m][1])

    def test_slice_tables_and_variance_shares_equal_the_row_versions(self, committed):
        design, Y = committed
        cells = build_cells(design, Y)
        for scope in scopes(design, max_depth=2):
            in_scope = scope_cells(design, cells, scope)
            a, b = slice_table(design, Y, scope), slice_table_cells(cells, scope, in_scope)
            assert np.array_equal(a.n, b.n) and np.allclose(a.sums, b.sums, rtol=0, atol=1e-9)
        for m in range(len(SPECS)):
            va, vb = _row_variance_shares(design, Y[:, m]), variance_shares_cells(design, cells, m)
            assert va.keys() == vb.keys() and all(va[k] == pytest.approx(vb[k], abs=1e-9) for k in va)

    @pytest.mark.slow
    def test_p_values_agree_with_a_row_level_shuffle(self, committed):
        design, Y = committed
        P = 1000
        cells = build_cells(design, Y, tuple(HARM))
        fam = design.factors["family"]
        _, p_g, _, p_all = permutation_pvalues_cells(cells, HARM, cells.cell_codes["family"], len(fam.levels), P=P, seed=1)
        ref_g, ref_all = _row_shuffle_pvalues(design, Y[:, HARM], fam.codes, len(fam.levels), P, np.random.default_rng(2))
        for new, ref in ((p_g.ravel(), ref_g.ravel()), (p_all, ref_all)):
            ok = ~np.isnan(ref)
            assert np.array_equal(ok, ~np.isnan(new))
            se = np.sqrt(2 * np.maximum(ref[ok] * (1 - ref[ok]), 0.01) / P)
            assert np.all(np.abs(new[ok] - ref[ok]) <= 4.5 * se)


def _row_variance_shares(design, y):
    """Reference: main-effect sums of squares over the rows (paraphrase net of family), as shares of the total."""
    grand = y.mean()
    total = float(((y - grand) ** 2).sum())
    if total == 0:
        return {}

    def ss(codes):
        cnt = np.bincount(codes).astype(float)
        sums = np.bincount(codes, weights=y)
        ok = cnt > 0
        return float((cnt[ok] * (sums[ok] / cnt[ok] - grand) ** 2).sum())

    shares = {"slice": ss(design.slice_codes)} | {name: ss(f.codes) for name, f in design.factors.items()}
    if "paraphrase" in shares and "family" in shares:
        shares["paraphrase"] = max(shares["paraphrase"] - shares["family"], 0.0)
    shares["residual"] = max(total - sum(shares.values()), 0.0)
    return {k: v / total for k, v in shares.items()}


def _row_shuffle_pvalues(design, Y, group, G, P, rng):
    """Reference: shuffle each row's value within its template cell, recompute the slice means."""
    S = len(design.slices)
    order = np.argsort(design.cluster, kind="stable")

    def gaps(y):
        key = group * S + design.slice_codes
        n = np.bincount(key, minlength=G * S).reshape(G, S)
        out_g, out_p = [], []
        for m in range(y.shape[1]):
            s = np.bincount(key, weights=y[:, m], minlength=G * S).reshape(G, S)
            with np.errstate(invalid="ignore", divide="ignore"):
                mg = s / n
                mp = s.sum(axis=0) / n.sum(axis=0)
                out_g.append(np.nanmax(mg, axis=1) - np.nanmin(mg, axis=1))
            out_p.append(np.nanmax(mp) - np.nanmin(mp))
        return np.array(out_g).T, np.array(out_p)

    obs_g, obs_p = gaps(Y)
    ex_g, ex_p = np.zeros_like(obs_g), np.zeros_like(obs_p)
    strata = design.cluster[order]
    for _ in range(P):
        keys = rng.random(len(order)) + strata
        perm = np.empty(len(order), dtype=np.int64)
        perm[order] = order[np.argsort(keys)]
        g, p = gaps(Y[perm])
        ex_g += g >= obs_g - 1e-9
        ex_p += p >= obs_p - 1e-9
    return (np.where(np.isnan(obs_g), np.nan, (1 + ex_g) / (P + 1)), np.where(np.isnan(obs_p), np.nan, (1 + ex_p) / (P + 1)))
