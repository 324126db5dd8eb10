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
import scipy.stats

from fairness.audit import _permutation
from fairness.audit._cells import CellTable, build_cells, slice_table_cells, variance_shares_cells
from fairness.audit._metrics import Design, Scope, SliceTable, build_design, metric_matrix, scope_masks
from fairness.audit._permutation import _deal, _plan, _Streams, permutation_pvalues_cells
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


def permuted_slice_sums(levels: np.ndarray, counts: np.ndarray, P: int, rng: np.random.Generator) -> np.ndarray:
    """(P × C × S) slice totals of the metric after a random relabelling within each cell, each
    cell its own group: the audit's sampler, cell by cell.

    `levels` (V,) are the metric's distinct values, `counts` (C × S × V) how often each
    occurs per cell and slice.
    """
    C, S, V = counts.shape
    if C == 0 or S == 0 or V == 0:
        return np.zeros((P, C, S))
    if V == 1:
        return np.broadcast_to(levels[0] * counts[:, :, 0], (P, C, S)).astype(np.float64)
    plan = _plan(levels, counts, np.arange(C), C, P)
    return _deal(plan, _Streams([rng], [P]), P).transpose(2, 1, 0) + plan.last * plan.n


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


def _exact_table_sums(levels: np.ndarray, counts: np.ndarray) -> Counter:
    """Distribution of one cell's slice totals over every value × slice table with its margins
    (counts S × V): P(table a) = Π_s n_s! Π_v K_v! / (N! Π a_vs!), the share of relabellings giving it."""
    n, K = counts.sum(axis=1), counts.sum(axis=0)
    N = int(n.sum())

    def splits(k: int, room: tuple[int, ...]):
        if len(room) == 1:
            if k <= room[0]:
                yield (k,)
            return
        for a in range(min(k, room[0]) + 1):
            for rest in splits(k - a, room[1:]):
                yield (a, *rest)

    dist: Counter = Counter()

    def deal(v: int, room: tuple[int, ...], table: list[tuple[int, ...]]) -> None:
        if v == len(K):
            w = math.prod(math.factorial(int(x)) for x in n) * math.prod(math.factorial(int(x)) for x in K)
            w /= math.factorial(N) * math.prod(math.factorial(a) for col in table for a in col)
            totals = tuple(float(sum(levels[u] * table[u][s] for u in range(len(K)))) for s in range(len(n)))
            dist[totals] += w
            return
        for a in splits(int(K[v]), room):
            deal(v + 1, tuple(r - x for r, x in zip(room, a, strict=True)), [*table, a])

    deal(0, tuple(int(x) for x in n), [])
    assert math.isclose(sum(dist.values()), 1.0)
    return dist


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

    @pytest.mark.parametrize(
        "paths",
        [
            {},  # as the audit runs: the 10-row value by table, the rest row by row
            {"TABLE_MAX": 0},  # no joint tables: the first value slice by slice from hypergeometric tables
            {"TABLE_MAX": 0, "HYPER_BOX": 0},  # … or by numpy's hypergeometric draws
            {"ROWS_MEAN": -1},  # later values slice by slice from hypergeometric tables (room left varies)
            {"ROWS_MEAN": -1, "HYPER_BOX": 0},  # … or by numpy's hypergeometric draws
            {"ROWS_MEAN": 2},  # value 2 (3 rows a cell) slice by slice from tables, before value 5 row by row
            {"ROWS_MEAN": 100, "TABLE_MAX": 0},  # every value drawn, later ones row by row
        ],
    )
    def test_every_dealing_path_follows_the_exact_table_distribution(self, paths, monkeypatch):
        for name, value in paths.items():
            monkeypatch.setattr(_permutation, name, value)
        # two cells (different configurations), 0 most common, 1 with 10 rows, 2 and 5 rare
        cells = [[[0] * 6 + [1] * 4 + [2], [0] * 3 + [1] * 4 + [5, 2], [0] * 5 + [1] * 2 + [2]],
                 [[1, 0, 0], [0, 1, 2, 0], [2, 0]]]
        levels = np.array([0.0, 1.0, 2.0, 5.0])
        counts = np.array([[[list(v).count(x) for x in levels] for v in cell] for cell in cells], dtype=np.int64)
        P = 40_000
        draws = permuted_slice_sums(levels, counts, P, np.random.default_rng(5))
        assert draws.shape == (P, 2, 3)
        for c in range(2):
            exact = _exact_table_sums(levels, counts[c])
            seen = Counter(tuple(float(x) for x in row) for row in draws[:, c, :])
            assert set(seen) <= set(exact)
            # Pearson χ² over the outcomes expected ≥ 5 times (the rest pooled), at level 1e−6
            big = [o for o, q in exact.items() if P * q >= 5]
            obs = np.array([seen[o] for o in big] + [P - sum(seen[o] for o in big)], dtype=float)
            exp = np.array([P * exact[o] for o in big] + [P * (1 - sum(exact[o] for o in big))])
            keep = exp > 0
            chi2 = float((((obs - exp) ** 2)[keep] / exp[keep]).sum())
            assert chi2 <= scipy.stats.chi2.ppf(1 - 1e-6, int(keep.sum()) - 1), (c, chi2, len(big))

    def test_hypergeometric_tables_hold_the_exact_distribution(self):
        hyper = _permutation._Hyper(3, 5, 0, 9, 7)  # good 3…7, bad 0…8, sample 0…6
        good, bad, sample = (a.ravel() for a in np.meshgrid(np.arange(3, 8), np.arange(9), np.arange(7), indexing="ij"))
        ok = sample <= good + bad
        u = np.random.default_rng(0).random(ok.sum())
        hyper.draw(good[ok], bad[ok], sample[ok], u)  # builds every table of the box
        for g, b, k in zip(good[ok], bad[ok], sample[ok], strict=True):
            t = hyper.index[((g - 3) * 9 + b) * 7 + k]
            a, m = hyper.start[t], hyper.length[t]
            x = hyper.value[a : a + m]
            assert np.array_equal(x, np.arange(max(0, k - b), min(k, g) + 1))
            assert np.allclose(hyper.cdf[a : a + m], scipy.stats.hypergeom.cdf(x, g + b, g, k), rtol=0, atol=1e-12)
            assert hyper.cdf[a + m - 1] == 1.0
            # the guide never starts past the answer: bucket i holds u ≥ i/m
            first = [a + int(np.searchsorted(hyper.cdf[a : a + m], i / m, side="right")) for i in range(m)]
            assert np.all(hyper.guide[a : a + m] <= first)

    def test_p_value_matches_enumeration_on_two_cells(self):
        cells = [[[1, 1, 0], [0, 0, 0]], [[1, 0, 0], [1, 0, 0]]]
        # exact p: all relabellings of both cells, statistic max−min of slice means (pooled)
        obs = (3 / 6) - (1 / 6)
        d0, d1 = _exact_sums(cells[0]), _exact_sums(cells[1])
        p_exact = sum(p0 * p1 for s0, p0 in d0.items() for s1, p1 in d1.items()
                      if abs((s0[0] + s1[0]) - (s0[1] + s1[1])) / 6 >= obs - 1e-12)
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


class TestSamplerOnCommittedRecordings:
    def test_p_values_do_not_depend_on_the_pass_size(self, committed):
        design, Y = committed
        cells = build_cells(design, Y, tuple(HARM))
        fam = cells.cell_codes["family"]
        G = len(design.factors["family"].levels)
        a = permutation_pvalues_cells(cells, HARM, fam, G, P=700, seed=4)
        b = permutation_pvalues_cells(cells, HARM, fam, G, P=700, seed=4, budget=1)  # one 250-resample block a pass
        for x, y in zip(a, b, strict=True):
            assert np.array_equal(x, y, equal_nan=True)

    def test_p_values_agree_with_the_previous_sampler(self, committed):
        """Same null, new random stream: each p-value moves by Monte Carlo error only
        (two independent estimates: sd of the difference √(2p(1−p)/P))."""
        design, Y = committed
        cells = build_cells(design, Y, tuple(HARM))
        fam = cells.cell_codes["family"]
        G = len(design.factors["family"].levels)
        P = 2000  # the audit's default, seed 0
        _, p_g, _, p_all = permutation_pvalues_cells(cells, HARM, fam, G, P=P, seed=0)
        ref_g, ref_all = _previous_pvalues(cells, HARM, fam, G, P, seed=0)
        for new, old in ((p_g.ravel(), ref_g.ravel()), (p_all, ref_all)):
            assert np.array_equal(np.isnan(new), np.isnan(old))
            ok = ~np.isnan(old)
            mid = (new[ok] + old[ok]) / 2
            assert np.all(np.abs(new[ok] - old[ok]) <= 4 * np.sqrt(2 * mid * (1 - mid) / P) + 1 / P)


def _previous_sums(levels, counts, P, rng):
    """Reference: the sampler before issue 13 — each value's hits dealt slice by slice with
    `Generator.hypergeometric` into the room left, the most common value last (P × C × S)."""
    C, S, _ = counts.shape
    K = counts.sum(axis=1)
    cap = np.ascontiguousarray(np.broadcast_to(counts.sum(axis=2).T[:, None, :], (S, P, C)))
    total = np.zeros((S, P, C))
    order = np.argsort(K.sum(axis=0), kind="stable")
    for v in order[:-1]:
        remaining = np.broadcast_to(K[:, v], (P, C)).copy()
        room = cap.sum(axis=0)
        for s in range(S - 1):
            room -= cap[s]
            taken = rng.hypergeometric(cap[s], room, remaining)
            remaining -= taken
            cap[s] -= taken
            total[s] += levels[v] * taken
        cap[S - 1] -= remaining
        total[S - 1] += levels[v] * remaining
    total += levels[order[-1]] * cap
    return total.transpose(1, 2, 0)


def _previous_pvalues(table, metrics, cell_group, G, P, seed):
    """Reference: the p-values before issue 13 (stream `[seed, metric index]`, 250 resamples a pass);
    on the committed recordings it gave exactly the numbers that implementation gave."""
    onehot = np.eye(G)[cell_group]
    n_g = onehot.T @ table.n
    p_g, p_all = np.full((G, len(metrics)), np.nan), np.full(len(metrics), np.nan)

    def gaps(sums, n):
        with np.errstate(invalid="ignore", divide="ignore"):
            means = sums / n
            return np.nanmax(means, axis=-1) - np.nanmin(means, axis=-1)

    for j, m in enumerate(metrics):
        levels, counts = table.histogram(m)
        obs_g = gaps(onehot.T @ table.sums[:, :, m], n_g)
        obs_p = gaps(table.sums[:, :, m].sum(axis=0), n_g.sum(axis=0))
        rng = np.random.default_rng([seed, j])
        ex_g, ex_p = np.zeros(G), 0
        for start in range(0, P, 250):
            sg = np.einsum("pcs,cg->pgs", _previous_sums(levels, counts, min(250, P - start), rng), onehot)
            with np.errstate(invalid="ignore"):
                ex_g += (gaps(sg, n_g) >= obs_g - 1e-9).sum(axis=0)
                ex_p += int((gaps(sg.sum(axis=1), n_g.sum(axis=0)) >= obs_p - 1e-9).sum())
        p_g[:, j] = np.where(np.isnan(obs_g), np.nan, (1 + ex_g) / (P + 1))
        p_all[j] = np.nan if np.isnan(obs_p) else (1 + ex_p) / (P + 1)
    return p_g, p_all


def scopes(design: Design, max_depth: int | None = None) -> list[Scope]:
    """Reference: the scopes as masks over the rows."""
    codes = {name: f.codes for name, f in design.factors.items()}
    return scope_masks(design, np.ones(design.n, dtype=bool), codes, max_depth)


def slice_table(design: Design, Y: np.ndarray, scope: Scope) -> SliceTable:
    """Reference: a scope's per-slice row counts and sums, from its rows."""
    S = len(design.slices)
    codes = design.slice_codes[scope.mask]
    n = np.bincount(codes, minlength=S).astype(np.float64)
    onehot = np.zeros((len(codes), S))
    onehot[np.arange(len(codes)), codes] = 1.0
    return SliceTable(scope, n, onehot.T @ Y[scope.mask])


def scope_cells(design: Design, table: CellTable, scope: Scope) -> np.ndarray:
    """The cells of a row scope (its conditions name cell-level factors only)."""
    mask = table.n.sum(axis=1) > 0
    for name, level in scope.conditions:
        mask &= table.cell_codes[name] == design.factors[name].levels.index(level)
    return mask


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
