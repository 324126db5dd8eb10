"""Exact intervals for the grid estimand, from per-cell per-slice counts (no per-row arrays).

Estimand (the *grid estimand*): for each slice, the expected rate (or mean count) on *this
grid's* template cells if the seeds were redrawn. The gate's rules are about this grid, not a
population of templates: with 5 paraphrases and 4 occupations shared across cells no
cell-level method can support the population claim (benchmarks/stats_simulation.py).

Why these constructions:
- **Korn–Graubard** rate intervals: Clopper–Pearson at the effective n = n / design effect,
  the design effect floored at 1. For the grid estimand the template cells are fixed, so they
  are *strata*, not clusters: given the grid, a slice's rows are independent Bernoulli draws
  (one per seed) with their cell's rate, and the variance of its rate is the stratified one,
  Σ_c n_c·s²_c / n² with s²_c the within-cell (unbiased) variance. The design effect is that
  variance over the binomial one at the slice's rate (≤ 1 in expectation: fixed cell
  differences do not add variance), so after the floor the bound is Clopper–Pearson on the
  rows, which is exact-or-conservative for a mean of unequal Bernoulli rates (Hoeffding 1956:
  the binomial tails beyond the mean dominate the Poisson-binomial ones). A between-cell
  (intra-cluster) design effect would size the interval for a population of templates, which
  the grid estimand does not claim. Exact, so the lower end keeps its one-sided level at rates
  near 0, where Wilson's does not.
- Count metrics (mean keywords per output) use the exact Poisson (Garwood) interval on the
  effective total, the design effect being the Pearson dispersion of the cluster totals.
- **Worst slice**: simultaneous over the k slices on the end that needs it, Šidák-split
  (1 − (1 − t)^(1/k)): given the grid the slices' rows are disjoint independent draws, so the
  slices' bounds miss independently and Šidák is the exact split (Bonferroni is conservative).
- **Gap** (max − min): paired MOVER/Newcombe differences of the slice bounds for every pair,
  Bonferroni over the pairs; the correlation between two slices' estimates through shared
  template cells is estimated from the cells and never allowed to shrink a difference's
  variance below the binomial one (the grid estimand's own variance).
- Only per (cell, slice) sums and counts are needed, so streamed aggregation can feed these.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property, lru_cache
from typing import NamedTuple

import numpy as np

from fairness._util import special
from fairness._util.canonical import json_number


class Interval(NamedTuple):
    """Bounds [low, high] of a statistic; NaN bounds when the data cannot support one.

    The one interval type, shared by the audit's statistics and the peer-parity evaluators.
    `method` names the construction (`simultaneous-max`, `expanded-percentile` …); the
    resampling fields are filled where a bootstrap produced the interval.
    """

    low: float
    high: float
    method: str
    confidence: float | None = None
    """Nominal coverage, e.g. 0.95."""
    n_resamples: int | None = None
    """Bootstrap resamples behind the bounds."""
    n_clusters: int | None = None
    """Independent units resampled (templates, prompts or BBQ question templates)."""

    def as_list(self) -> list[float | None]:
        """[low, high] as results files store numbers (rounded; None where not finite)."""
        return [json_number(self.low), json_number(self.high)]

    def covers(self, value: float) -> bool:
        return bool(self.low <= value <= self.high)


ESTIMAND = (
    "grid estimand: each slice's expected rate (mean count for counts) on this suite's template cells "
    "if the seeds were redrawn; the intervals and the gate make no claim about other prompt templates"
)

POWER = 0.8


@dataclass(frozen=True)
class CellCounts:
    """One metric in one scope: per template cell × slice sums of the metric and row counts (C × S).

    The per-slice totals are computed once (every bound, gap and power figure reads them);
    treat them as read-only."""

    sums: np.ndarray
    counts: np.ndarray
    kind: str
    """`rate` (0/1 outcomes) or `count` (non-negative counts per output)."""

    @cached_property
    def n(self) -> np.ndarray:
        return self.counts.sum(axis=0)

    @cached_property
    def x(self) -> np.ndarray:
        return self.sums.sum(axis=0)

    @cached_property
    def values(self) -> np.ndarray:
        with np.errstate(invalid="ignore", divide="ignore"):
            return self.x / self.n

    @cached_property
    def cells(self) -> np.ndarray:
        """Template cells with at least one row, per slice."""
        return (self.counts > 0).sum(axis=0)

    @cached_property
    def corrs(self) -> list[list[float]]:
        """`slice_corrs` as lists: a search over levels reads a gap's interval again and again."""
        return slice_corrs(self).tolist()

    def pooled(self) -> CellCounts:
        """All slices together: one cluster per template cell."""
        return CellCounts(self.sums.sum(axis=1, keepdims=True), self.counts.sum(axis=1, keepdims=True), self.kind)

    def design(self) -> tuple[np.ndarray, float]:
        """Per-slice design effects and the pooled parameter behind every bound (`design_effects`: template
        cells as strata). A sample of another design (the monitor's units as clusters) overrides it."""
        return design_effects(self)


# -- design effects -----------------------------------------------------------------------


def stratified_variance(cc: CellCounts) -> tuple[np.ndarray, np.ndarray]:
    """Per slice: n² × the stratified variance of its rate (cells = strata), and n² × the binomial one.

    A cell with n_c ≥ 2 rows contributes n_c²/(n_c − 1)·p_c(1 − p_c) (n_c times the unbiased
    within-cell variance); a single-row cell, whose within variance is not estimable,
    contributes the binomial p(1 − p) at the slice's rate.
    """
    v, b = stratified_variances(cc.sums[:, :, None], cc.counts, cc.values[:, None], cc.n)
    return v[:, 0], b[:, 0]


def stratified_variances(T: np.ndarray, N: np.ndarray, values: np.ndarray, n: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """`stratified_variance` of G metrics at once: T (C × S × G) sums, N (C × S) rows, values (S × G)
    slice values, n (S,) slice rows; each result S × G. Elementwise the same float64 operations
    and the same order of summation over cells as for one metric, so the same bits."""
    N3 = N[:, :, None]
    p_s = np.nan_to_num(values)
    with np.errstate(invalid="ignore", divide="ignore"):
        p_c = np.where(N3 > 0, T / np.where(N3 > 0, N3, 1), 0.0)
        within = np.where(N3 >= 2, N3 * N3 / np.where(N3 >= 2, N3 - 1, 1) * p_c * (1 - p_c), 0.0)
    single = np.where(N3 == 1, p_s[None, :, :] * (1 - p_s[None, :, :]), 0.0)
    return (within + single).sum(axis=0), n[:, None] * p_s * (1 - p_s)


def dispersion(cc: CellCounts) -> float:
    """Pearson dispersion of the (cell, slice) totals of a count under a Poisson model per slice."""
    return float(dispersions(cc.sums[:, :, None], cc.counts, cc.values[:, None], cc.n)[0])


def dispersions(T: np.ndarray, N: np.ndarray, values: np.ndarray, n: np.ndarray) -> np.ndarray:
    """`dispersion` of G count metrics at once (shapes as `stratified_variances`); (G,). Each
    metric's χ² is summed over its own cells in the same order as for one metric."""
    ok = N > 0
    mu = np.nan_to_num(values)
    K, S = int(ok.sum()), int((n > 0).sum())
    G = T.shape[2]
    if K - S <= 0:
        return np.full(G, math.nan)
    expected = N[:, :, None] * mu[None, :, :]
    with np.errstate(invalid="ignore", divide="ignore"):
        q = (T - expected) ** 2 / expected
    out = np.ones(G)
    for g in range(G):
        use = ok & (mu[None, :, g] > 0)
        if use.any():
            out[g] = float(q[:, :, g][use].sum()) / (K - S)
    return out


def design_effects(cc: CellCounts) -> tuple[np.ndarray, float]:
    """Per-slice design effects (≥ 1; NaN when not estimable) and the one pooled over slices behind the power figures.

    Rates: stratified (grid-estimand) variance over the binomial one, floored at 1 (a slice at
    0 or 1 has design effect 1). Counts: the Pearson dispersion φ of the cluster totals.
    """
    if cc.kind == "rate":
        v, b = stratified_variance(cc)
        pooled = float(v.sum() / b.sum()) if b.sum() > 0 else 1.0
        return _rate_deff(v, b), max(pooled, 1.0)
    phi = dispersion(cc)
    return _count_deff(np.array([phi]), cc.counts.shape[1])[:, 0], phi


def design_effects_all(T: np.ndarray, N: np.ndarray, values: np.ndarray, n: np.ndarray, kind: str) -> np.ndarray:
    """`design_effects`' per-slice figures for G metrics of one kind at once (S × G; shapes as `stratified_variances`)."""
    if kind == "rate":
        return _rate_deff(*stratified_variances(T, N, values, n))
    return _count_deff(dispersions(T, N, values, n), N.shape[1])


def _rate_deff(v: np.ndarray, b: np.ndarray) -> np.ndarray:
    with np.errstate(invalid="ignore", divide="ignore"):
        deff = np.where(b > 0, v / np.where(b > 0, b, 1), 1.0)
    return np.maximum(deff, 1.0)


def _count_deff(phi: np.ndarray, S: int) -> np.ndarray:
    """(S × G): every slice at its metric's φ, floored at 1 (NaN where φ is not estimable)."""
    return np.repeat(np.where(np.isnan(phi), math.nan, np.maximum(phi, 1.0))[None, :], S, axis=0)


# -- exact bounds at the effective n ---------------------------------------------------------


def lower(x, n, kind: str, tail) -> np.ndarray:
    """One-sided exact lower bound, missing with probability `tail` (Clopper–Pearson / Garwood)."""
    x, n, tail = (np.asarray(v, dtype=np.float64) for v in (x, n, tail))  # the ufuncs broadcast them
    with np.errstate(invalid="ignore", divide="ignore"):
        if kind == "rate":
            b = special.betaincinv(np.where(x > 0, x, 1.0), np.maximum(n - x + 1, 1e-300), tail)
        else:
            b = special.gammaincinv(np.where(x > 0, x, 1.0), tail) / n
    return np.where(n > 0, np.where(x > 0, b, 0.0), np.nan)


def upper(x, n, kind: str, tail) -> np.ndarray:
    """One-sided exact upper bound, missing with probability `tail`."""
    x, n, tail = (np.asarray(v, dtype=np.float64) for v in (x, n, tail))  # the ufuncs broadcast them
    with np.errstate(invalid="ignore", divide="ignore"):
        if kind == "rate":
            b = special.betaincinv(x + 1, np.where(n - x > 0, n - x, 1.0), 1 - tail)
            b = np.where(x < n, b, 1.0)
        else:
            b = special.gammaincinv(x + 1, 1 - tail) / n
    return np.where(n > 0, b, np.nan)


class SliceBounds(NamedTuple):
    """Effective counts of one metric in one scope, ready for bounds at any level."""

    cc: CellCounts
    deff: np.ndarray
    param: float
    """The design effect pooled over slices for rates, φ for counts."""
    pair_lists: dict[float, list[list[float]]] | None = None
    """`pair_bounds` made so far, by level (`of` gives each its own dict)."""

    @classmethod
    def of(cls, cc: CellCounts) -> SliceBounds:
        deff, param = cc.design()
        return cls(cc, deff, param, {})

    @property
    def live(self) -> np.ndarray:
        return self.cc.n > 0

    @property
    def n_eff(self) -> np.ndarray:
        return self.cc.n / self.deff

    @property
    def x_eff(self) -> np.ndarray:
        return self.cc.x / self.deff

    def lo(self, tail, *, deff1: bool = False) -> np.ndarray:
        x, n = (self.cc.x, self.cc.n) if deff1 else (self.x_eff, self.n_eff)
        return lower(x, n, self.cc.kind, tail)

    def pair_bounds(self, tail: float) -> list[list[float]]:
        """`_pair_bounds` at `tail` as lists, kept per level: a search over the level of a gap's
        one end reads the other end, at one level, at every step."""
        memo = self.pair_lists
        if memo is None:
            return [a.tolist() for a in _pair_bounds(self, tail)]
        if (b := memo.get(tail)) is None:
            b = memo[tail] = [a.tolist() for a in _pair_bounds(self, tail)]
        return b

    def hi(self, tail, *, deff1: bool = False) -> np.ndarray:
        x, n = (self.cc.x, self.cc.n) if deff1 else (self.x_eff, self.n_eff)
        return upper(x, n, self.cc.kind, tail)


def slice_intervals(sb: SliceBounds, alpha: float) -> tuple[np.ndarray, np.ndarray]:
    """Per-slice two-sided 1−α intervals (NaN for an empty slice or an inestimable design effect)."""
    return sb.lo(alpha / 2), sb.hi(alpha / 2)


def sidak(tail: float, k: int) -> float:
    """Per-slice tail so that k independent one-sided bounds all hold with probability 1 − tail."""
    return -math.expm1(math.log1p(-tail) / k) if k > 1 else tail


def worst_interval(sb: SliceBounds, worst: str, alpha: float, *, low_tail: float | None = None,
                   high_tail: float | None = None) -> Interval:
    """Simultaneous interval for the worst slice's value over the non-empty slices.

    `worst` is `max` (harms) or `min` (goods). The end that must hold for every slice (the
    lower end of a max, the upper end of a min) is Šidák-split over the k slices; the
    other end holds at its own level. `low_tail`/`high_tail` override the one-sided levels
    (default α/2 each), e.g. for a Holm adjustment across families.
    """
    live = sb.live
    k = int(live.sum())
    if k == 0:
        return Interval(math.nan, math.nan, "korn-graubard-simultaneous")
    lt = alpha / 2 if low_tail is None else low_tail
    ht = alpha / 2 if high_tail is None else high_tail
    if worst == "min":
        lo = np.min(sb.lo(lt)[live])
        hi = np.min(sb.hi(sidak(ht, k))[live])
    else:
        lo = np.max(sb.lo(sidak(lt, k))[live])
        hi = np.max(sb.hi(ht)[live])
    return Interval(float(lo), float(hi), f"korn-graubard-simultaneous-{worst}")


def pooled_interval(cc: CellCounts, alpha: float) -> Interval:
    """The pooled value over all slices; clusters are whole template cells."""
    sb = SliceBounds.of(cc.pooled())
    lo, hi = slice_intervals(sb, alpha)
    return Interval(float(lo[0]), float(hi[0]), "korn-graubard" if cc.kind == "rate" else "garwood-effective-n")


# -- paired differences ---------------------------------------------------------------------


def cluster_corr(sa: np.ndarray, na: np.ndarray, sb: np.ndarray, nb: np.ndarray) -> float:
    """Correlation of two ratio estimates Σs/Σn over the same clusters (linearised, cluster-robust); 0 if undefined."""
    ta, tb = na.sum(), nb.sum()
    if ta <= 0 or tb <= 0:
        return 0.0
    ra = sa - na * sa.sum() / ta
    rb = sb - nb * sb.sum() / tb
    va, vb = float((ra**2).sum()), float((rb**2).sum())
    if va <= 0 or vb <= 0:
        return 0.0
    return float((ra * rb).sum() / math.sqrt(va * vb))


def mover(d: float, a_lo: float, a_hi: float, b_lo: float, b_hi: float, r: float) -> tuple[float, float]:
    """Newcombe/MOVER interval for d = A − B from the distances of each estimate to its bounds.

    a_lo = A − L_A, a_hi = U_A − A (same for B); r = correlation of the two estimates.
    """
    low = d - math.sqrt(max(a_lo**2 + b_hi**2 - 2 * r * a_lo * b_hi, 0.0))
    high = d + math.sqrt(max(a_hi**2 + b_lo**2 - 2 * r * a_hi * b_lo, 0.0))
    return low, high


def capped_corr(r: float, a: float, b: float, a0: float, b0: float) -> float:
    """Clip r to [0, r_max] so that a² + b² − 2rab never falls below a0² + b0² (the binomial floor)."""
    if a <= 0 or b <= 0:
        return 0.0
    r_max = (a * a + b * b - a0 * a0 - b0 * b0) / (2 * a * b)
    return float(min(max(r, 0.0), max(min(r_max, 1.0), 0.0)))


def slice_corrs(cc: CellCounts) -> np.ndarray:
    """(S × S) `cluster_corr` of every pair of slices' estimates, computed once for all pairs: every
    pair's products of residuals in one (S × S × C) array, each pair's summed along its own contiguous
    row, so each figure is bit-for-bit the pairwise one."""
    return slice_corrs_many(cc.sums[:, :, None], cc.counts)[0]


def slice_corrs_many(sums: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """(G × S × S) `slice_corrs` of G metrics at once from their sums (C × S × G) and the shared row
    counts (C × S): the same elementwise operations, and each sum over cells along its own contiguous
    row of C, as for one metric, so every figure is the same to the bit (a scope's metrics in one
    call instead of ~12 numpy calls each)."""
    st, nt = np.ascontiguousarray(sums.transpose(2, 1, 0)), np.ascontiguousarray(counts.T)  # G × S × C, S × C
    tot_s, tot_n = st.sum(axis=2), nt.sum(axis=1)
    ok = tot_n > 0
    with np.errstate(invalid="ignore", divide="ignore"):
        resid = st - nt * tot_s[:, :, None] / np.where(ok, tot_n, 1.0)[:, None]
    var = (resid**2).sum(axis=2)
    ok = ok & (var > 0)
    with np.errstate(invalid="ignore", divide="ignore"):
        r = (resid[:, :, None, :] * resid[:, None, :, :]).sum(axis=3) / np.sqrt(var[:, :, None] * var[:, None, :])
    above = np.triu(np.ones(r.shape[1:], dtype=bool), k=1)
    r = np.where(above & ok[:, :, None] & ok[:, None, :], r, 0.0)  # each pair once, as i < j …
    return np.where(above, r, r.transpose(0, 2, 1))  # … and mirrored


def pair_difference(sb: SliceBounds, i: int, j: int, tail: float,
                    bounds: tuple[np.ndarray, ...] | None = None, r: float | None = None) -> tuple[float, float]:
    """Paired interval for value_i − value_j, each end missing with probability `tail`.

    `bounds`: `_pair_bounds(sb, tail)` and `r`: the pair's `cluster_corr`, when the caller
    already has them (one evaluation serves every pair, and both levels of a gap)."""
    lo, hi, lo0, hi0 = bounds if bounds is not None else _pair_bounds(sb, tail)
    if r is None:
        r = cluster_corr(sb.cc.sums[:, i], sb.cc.counts[:, i], sb.cc.sums[:, j], sb.cc.counts[:, j])
    v = sb.cc.values
    return _pair_ends(float(v[i]), float(v[j]), float(lo[i]), float(hi[i]), float(lo[j]), float(hi[j]),
                      float(lo0[i]), float(hi0[i]), float(lo0[j]), float(hi0[j]), r)


def _pair_ends(vi: float, vj: float, lo_i: float, hi_i: float, lo_j: float, hi_j: float,
               lo0_i: float, hi0_i: float, lo0_j: float, hi0_j: float, r: float) -> tuple[float, float]:
    """`pair_difference` on plain floats (a gap evaluates it for every pair at two levels, and
    numpy scalars cost several times as much per operation; the arithmetic is the same IEEE
    float64 arithmetic, so the bounds are the same to the bit)."""
    d = vi - vj
    ai_lo, ai_hi, bj_lo, bj_hi = vi - lo_i, hi_i - vi, vj - lo_j, hi_j - vj
    r_low = capped_corr(r, ai_lo, bj_hi, vi - lo0_i, hi0_j - vj)
    r_high = capped_corr(r, ai_hi, bj_lo, hi0_i - vi, vj - lo0_j)
    low = d - math.sqrt(max(ai_lo * ai_lo + bj_hi * bj_hi - 2 * r_low * ai_lo * bj_hi, 0.0))
    high = d + math.sqrt(max(ai_hi * ai_hi + bj_lo * bj_lo - 2 * r_high * ai_hi * bj_lo, 0.0))
    return low, high


def _pair_bounds(sb: SliceBounds, tail: float) -> tuple[np.ndarray, ...]:
    """Every slice's bounds at `tail`: effective-n and design-effect-1 (the binomial floor)."""
    return sb.lo(tail), sb.hi(tail), sb.lo(tail, deff1=True), sb.hi(tail, deff1=True)


def gap_interval(sb: SliceBounds, alpha: float, *, low_tail: float | None = None,
                 high_tail: float | None = None) -> Interval:
    """Simultaneous interval for max − min over the non-empty slices (needs two of them).

    Lower end: the largest |difference| lower bound over the P pairs, each pair's two ends at
    low_tail/(2P) (so the lower end misses with probability ≤ low_tail, default α/2). Upper end:
    the largest difference upper bound at high_tail (only the true extreme pair must hold).
    """
    live = np.flatnonzero(sb.live)
    if len(live) < 2:
        return Interval(math.nan, math.nan, "paired-newcombe-simultaneous")
    lt = alpha / 2 if low_tail is None else low_tail
    ht = alpha / 2 if high_tail is None else high_tail
    pairs = gap_pairs(live)
    return gap_from_bounds(sb.cc.values.tolist(), pairs, sb.pair_bounds(lt / (2 * len(pairs))), sb.pair_bounds(ht),
                           sb.cc.corrs)


def gap_pairs(live: np.ndarray) -> list[tuple[int, int]]:
    """The slice pairs a gap interval runs over (its lower end's level is split over 2 × their number)."""
    return [(int(i), int(j)) for a, i in enumerate(live) for j in live[a + 1:]]


def gap_from_bounds(v: list[float], pairs: list[tuple[int, int]], bl: list[list[float]], bh: list[list[float]],
                    corr: list[list[float]]) -> Interval:
    """`gap_interval` from the slice values, the pairs, `_pair_bounds` at the lower end's level (`bl`) and
    the upper end's (`bh`), as lists, and `slice_corrs`: every pair at both levels, in plain floats."""
    low, high = 0.0, 0.0
    for i, j in pairs:
        r = corr[i][j]
        lo_ij, hi_ij = _pair_ends(v[i], v[j], bl[0][i], bl[1][i], bl[0][j], bl[1][j], bl[2][i], bl[3][i], bl[2][j], bl[3][j], r)
        low = max(low, lo_ij, -hi_ij)
        lo_h, hi_h = _pair_ends(v[i], v[j], bh[0][i], bh[1][i], bh[0][j], bh[1][j], bh[2][i], bh[3][i], bh[2][j], bh[3][j], r)
        high = max(high, hi_h, -lo_h)
    if not (math.isfinite(low) and math.isfinite(high)):
        return Interval(math.nan, math.nan, "paired-newcombe-simultaneous")
    return Interval(low, high, "paired-newcombe-simultaneous")


# -- multiplicity across scopes -----------------------------------------------------------------


def level_p(beyond: Callable[[float], bool], lo: float = 1e-12) -> float:
    """The smallest one-sided level at which `beyond(level)` holds (bisection on log level); 1 if none ≤ 0.5."""
    if not beyond(0.5):
        return 1.0
    if beyond(lo):
        return lo
    a, b = math.log(lo), math.log(0.5)
    for _ in range(50):
        mid = (a + b) / 2
        if beyond(math.exp(mid)):
            b = mid
        else:
            a = mid
    return math.exp(b)


def holm_levels(p: list[float], total: float) -> list[float]:
    """Holm step-down: the one-sided level each hypothesis is tested at (total = family-wise level).

    Sorted by p, the j-th is tested at total/(m − j) while every earlier one was rejected; the
    rest keep the level of the first that was not.
    """
    m = len(p)
    order = sorted(range(m), key=lambda i: p[i])
    levels = [0.0] * m
    stop = None
    for rank, i in enumerate(order):
        level = total / (m - rank) if stop is None else stop
        levels[i] = level
        if stop is None and not p[i] < level:
            stop = level
    return levels


# -- power: how many more seeds would settle it ---------------------------------------------------
#
# Sized with the test the gate runs, not a normal formula: each slice's exact bound (Clopper–Pearson
# or Garwood at the effective n, `lower`/`upper` above) at the level the check uses, summed over every
# row count the slice can show. Issue 19 measured the normal-approximation sizing of one slice at
# 75% (fail) and 49% (pass) decisive against an 80% target: it missed the exact test's discreteness,
# the Holm/Šidák level, and that a pass needs every slice.

MAX_SEEDS = 10_000
"""No advice beyond this many seeds per template cell: past it the answer is "more templates", not seeds."""


class Side(NamedTuple):
    """One verdict of a check as the gate reaches it: one end of the interval crossing the threshold.

    The end is a max (or min) over slices (pairs for a gap) of per-slice bounds, so crossing it
    upward needs any slice (max) or every slice (min), and the reverse downward: `every` says which.
    """

    end: str
    """`lower` or `upper`: the interval end the verdict reads."""
    level: float
    """One-sided level of each slice's (pair's) bound at that end (Holm, Šidák, pairs already applied)."""
    every: bool
    """Every slice (pair) must cross; otherwise one crossing suffices."""
    up: bool
    """The verdict needs the bound above the threshold (else below)."""
    reached: Callable[[np.ndarray | float], np.ndarray | bool]
    """Elementwise: does a bound at this end (an array, or one float) reach the verdict (the rule's own comparator)."""


def check_sides(statistic: str, worst: str, over: bool, fires: Callable, k: int, tail: float, alpha: float) -> tuple[Side, Side]:
    """(fail, pass) sides of a check, mirroring `worst_interval`, `gap_interval` and the pooled bound.

    `over`: the rule fires above its threshold (its breaching end is the lower one, at `tail`, the
    Holm level of the check); the other end is at α/2. The worst slice's end that every slice must
    meet is Šidák-split over the k live slices; the gap's lower end is split over its 2·P pair ends.
    """
    lt, ht = (tail, alpha / 2) if over else (alpha / 2, tail)
    agg = "max" if statistic == "max_minus_min" else ("min" if worst == "min" else "max")
    if statistic == "worst_slice":
        lt = sidak(lt, k) if agg == "max" else lt
        ht = sidak(ht, k) if agg == "min" else ht
    elif statistic == "max_minus_min":
        lt = lt / (2 * (k * (k - 1) // 2))

    def side(verdict: str) -> Side:
        end = "lower" if (verdict == "fail") == over else "upper"
        up = (verdict == "fail") == over
        every = statistic != "rate" and ((agg == "max") != up)
        reached = fires if verdict == "fail" else (lambda b: np.logical_not(fires(b)))
        return Side(end, lt if end == "lower" else ht, every, up, reached)

    return side("fail"), side("pass")


def unit_var(value: float, kind: str) -> float:
    """Per-row variance at a value: p(1−p) for a rate, the mean for a (Poisson) count."""
    return value * (1 - value) if kind == "rate" else max(value, 0.0)


def _support(p: float, n: float, deff: float, kind: str) -> tuple[int, int, float]:
    """The first and last count `outcomes` keeps at true value p, and the design effect used."""
    d = max(deff, 1.0) if math.isfinite(deff) else 1.0
    mean, sd = n * p, math.sqrt(d * n * unit_var(p, kind))
    lo = max(0, math.floor(mean - 9 * sd - 10))
    hi = math.ceil(mean + 9 * sd + 10)
    if kind == "rate":
        hi = min(hi, math.floor(n))
    return lo, hi, d


def _survival(x: np.ndarray, n: float, d: float, p: float, kind: str) -> np.ndarray:
    """P(count ≥ x) at true value p under the effective-sample model of `outcomes`."""
    with np.errstate(invalid="ignore", divide="ignore"):
        if kind == "rate":
            surv = np.where(x > n, 0.0, special.betainc(np.maximum(x, 1e-300) / d, np.maximum((n - x) / d + 1, 1e-300), p))
        else:
            surv = special.gammainc(np.maximum(x, 1e-300) / d, n * p / d)
    return np.where(x <= 0, 1.0, surv)


def _survival1(x: float, n: float, d: float, p: float, kind: str) -> float:
    """`_survival` at one count in scalar arithmetic: the same ufuncs on the same float64 arguments
    (so the same bits), without the array overhead the power searches would pay on every call."""
    if x <= 0:
        return 1.0
    if kind == "rate":
        return 0.0 if x > n else float(special.betainc(max(x, 1e-300) / d, max((n - x) / d + 1, 1e-300), p))
    return float(special.gammainc(max(x, 1e-300) / d, n * p / d))


def outcomes(p: float, n: float, deff: float, kind: str) -> tuple[np.ndarray, np.ndarray]:
    """The row counts x a slice of n rows can show at true value p, and their probabilities.

    Model: x/deff is Binomial(n/deff, p) for a rate, Poisson(n·p/deff) for a count — the
    Korn–Graubard effective sample the bounds are computed on. At deff 1 this is the exact law of
    a binomial row count; for the grid estimand the rows of unequal cells are Poisson-binomial,
    less spread than that (Hoeffding 1956), so the power is exact-or-conservative. The survival
    P(x' ≥ x) is the regularized incomplete beta (gamma) function, which is the binomial (Poisson)
    tail sum at integer arguments and interpolates it at the effective n. Counts beyond 9 sd
    (plus 10 rows) of the mean carry < 1e-18 and are left out.
    """
    lo, hi, d = _support(p, n, deff, kind)
    x = np.arange(lo, hi + 2, dtype=np.float64)
    surv = _survival(x, n, d, p, kind)
    return x[:-1], np.maximum(surv[:-1] - surv[1:], 0.0)


def _bounds(x: np.ndarray, n: float, deff: float, kind: str, end: str, level: float) -> np.ndarray:
    d = max(deff, 1.0) if math.isfinite(deff) else 1.0
    return (lower if end == "lower" else upper)(x / d, n / d, kind, level)


@lru_cache(maxsize=1 << 14)
def _bound1(x: float, n: float, kind: str, end: str, level: float) -> float:
    """`lower`/`upper` for one effective count in scalar arithmetic: the same ufuncs on the same
    float64 arguments (so the same bits), without the array overhead the power searches would
    pay on thousands of single-count calls. Memoised (a pure function): the power searches
    bisect over the same counts again and again (the default run asks ~7,500 times for ~1,600
    distinct bounds, each an inverse incomplete beta or gamma)."""
    if not n > 0:
        return math.nan
    if end == "lower":
        if not x > 0:
            return 0.0
        if kind == "rate":
            return float(special.betaincinv(x, max(n - x + 1, 1e-300), level))
        return float(special.gammaincinv(x, level)) / n
    if kind == "rate":
        return float(special.betaincinv(x + 1, n - x if n - x > 0 else 1.0, 1 - level)) if x < n else 1.0
    return float(special.gammaincinv(x + 1, 1 - level)) / n


def slice_reach(p: float, n: float, deff: float, kind: str, side: Side) -> float:
    """Exact probability that one slice's bound at `side`'s end and level reaches the verdict.

    The bounds rise with the count, so the counts that reach it are those past one critical
    count (above it for an upward verdict, below for a downward one), found by bisection over the
    counts `outcomes` keeps — a dozen scalar bound evaluations instead of one per count — and
    their probability is a difference of two survival values (the tail sum of `outcomes`)."""
    lo, hi, d = _support(p, n, deff, kind)

    def tail(a: int, b: int) -> float:
        """P(a ≤ count ≤ b)."""
        return max(_survival1(float(a), n, d, p, kind) - _survival1(float(b + 1), n, d, p, kind), 0.0)

    first, last = lo, hi
    f = _crossing(side, n, d, kind).first(first, last)
    if side.up:  # the first count that reaches it
        return 0.0 if f is None else tail(f, last)
    # the first count past the last that reaches it
    return tail(first, last) if f is None else (0.0 if f == first else tail(first, f - 1))


class _Crossing:
    """Where one slice's count starts to reach a side's verdict (the bound rises with the count: for
    an upward verdict the counts from some x* on reach it, for a downward one those before some x*),
    as far as it has been evaluated. The power searches ask `slice_reach` again and again for one
    slice at other true values: only the range `outcomes` keeps moves, the crossing does not, so
    what one bisection learnt about it answers the next one's questions without a bound, and once
    both neighbours of x* are known a search is two comparisons. The answers are the ones a fresh
    bisection gives (the predicate is monotone in the count, which the bisection assumes too)."""

    __slots__ = ("_false_at", "_pred", "_true_at")

    def __init__(self, pred: Callable[[int], bool]) -> None:
        self._pred = pred
        self._false_at: float = -math.inf  # the largest count known not past x*
        self._true_at: float = math.inf  # the smallest count known past it

    def __call__(self, x: int) -> bool:
        if x >= self._true_at:
            return True
        if x <= self._false_at:
            return False
        if self._pred(x):
            self._true_at = x
            return True
        self._false_at = x
        return False

    def first(self, lo: int, hi: int) -> int | None:
        """`_first(lo, hi, pred)`."""
        x = self._true_at
        if x == self._false_at + 1:
            return None if hi < x else (lo if lo >= x else int(x))
        return _first(lo, hi, self)


_CROSSINGS: dict[tuple, _Crossing] = {}
"""The crossings met so far, by (side, n, effective divisor, kind), the side by identity (its
crossing's predicate holds it, so the id is not reused while the entry lives); at most `_CROSSINGS_MAX`."""
_CROSSINGS_MAX = 1 << 12


def _crossing(side: Side, n: float, d: float, kind: str) -> _Crossing:
    key = (id(side), n, d, kind)
    c = _CROSSINGS.get(key)
    if c is None:
        if len(_CROSSINGS) >= _CROSSINGS_MAX:
            _CROSSINGS.clear()

        def hit(x: int) -> bool:
            return bool(side.reached(_bound1(x / d, n / d, kind, side.end, side.level)))

        c = _CROSSINGS[key] = _Crossing(hit if side.up else (lambda x: not hit(x)))
    return c


def _first(lo: int, hi: int, pred: Callable[[int], bool]) -> int | None:
    """The first x in [lo, hi] where `pred` (false, then true) holds, by bisection; None if it never does."""
    if not pred(hi):
        return None
    if pred(lo):
        return lo
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if pred(mid) else (mid, hi)
    return hi


def pair_reach(pi: float, ni: float, di: float, pj: float, nj: float, dj: float, kind: str, side: Side) -> float:
    """Exact probability that the pair's gap end (`pair_difference` with no correlation credit) reaches the verdict.

    The two slices' rows are independent given the grid, so the sum runs over both counts. The
    gate's MOVER narrows the interval by the correlation it estimates from shared cells (≥ 0, and
    never below the binomial floor); taking r = 0 makes the interval wider, so this power is a
    lower bound on the gate's and the seeds it sizes are enough.
    """
    xi, fi = outcomes(pi, ni, di, kind)
    xj, fj = outcomes(pj, nj, dj, kind)
    vi, vj = xi / ni, xj / nj
    li, ui = _bounds(xi, ni, di, kind, "lower", side.level), _bounds(xi, ni, di, kind, "upper", side.level)
    lj, uj = _bounds(xj, nj, dj, kind, "lower", side.level), _bounds(xj, nj, dj, kind, "upper", side.level)
    d = vi[:, None] - vj[None, :]
    high = d + np.hypot((ui - vi)[:, None], (vj - lj)[None, :])
    low = d - np.hypot((vi - li)[:, None], (uj - vj)[None, :])
    end = np.maximum(high, -low) if side.end == "upper" else np.maximum(low, -high)
    return float((fi[:, None] * fj[None, :])[side.reached(end)].sum())


def side_power(values: np.ndarray, n: np.ndarray, deff: np.ndarray, kind: str, side: Side, *, gap: bool = False) -> float:
    """Probability that the check reaches `side`'s verdict with these true values, rows and design effects.

    Slices: independent given the grid, so every slice crossing is the product and any slice the
    complement of the product of misses — exact. Gap: pairs share slices, so the pair
    probabilities are combined by bounds that only undersell the power: every pair by Bonferroni
    (1 − Σ misses), any pair by the best single pair.
    """
    if not gap:
        q = np.array([slice_reach(float(v), float(m), float(d), kind, side) for v, m, d in zip(values, n, deff, strict=True)])
        return float(np.prod(q)) if side.every else float(1.0 - np.prod(1.0 - q))
    k = len(values)
    q = np.array([pair_reach(float(values[i]), float(n[i]), float(deff[i]), float(values[j]), float(n[j]), float(deff[j]), kind, side)
                  for i in range(k) for j in range(i + 1, k)])
    return max(0.0, 1.0 - float((1.0 - q).sum())) if side.every else float(q.max())


SIZING_LEVEL = 0.25
"""The one-sided level of the bounds the seeds are sized at (`sizing_values`)."""


def sizing_values(values: np.ndarray, x: np.ndarray, n: np.ndarray, deff: np.ndarray, kind: str, side: Side, *,
                  gap: bool = False, level: float = SIZING_LEVEL) -> np.ndarray:
    """The slice values the seeds are sized at: each moved to its one-sided `level` bound against the verdict.

    Why not the observed values: an inconclusive check's point is noisy, and sized at it the
    advice falls short whenever the point overstates the distance to the threshold — issue 19's
    benchmark, following the advice on fresh grids, found 73% where 80% was promised. Sized at
    the 75% bound nearer the threshold (lower for an upward verdict, upper for a downward one;
    for a gap, the slices above the median move down and the others up when the gap must grow,
    the reverse when it must shrink), the power holds for any truth at least that far out.
    """
    d = np.where(np.isfinite(deff), np.maximum(deff, 1.0), 1.0)
    lo, hi = lower(x / d, n / d, kind, level), upper(x / d, n / d, kind, level)
    if not gap:
        return np.asarray(lo if side.up else hi, dtype=np.float64)
    top = values > np.median(values)
    grow = side.up
    return np.where(top == grow, lo, hi).astype(np.float64)


def seeds_to_settle(power_at: Callable[[int], float], m_now: float, power: float = POWER,
                    max_seeds: int = MAX_SEEDS) -> int | None:
    """Seeds per template cell (≥ the current ⌈m_now⌉) at which `power_at` reaches `power`; None past `max_seeds`.

    Exact power is a sawtooth in the size, so the search brackets by doubling and bisects to an m
    with power(m) ≥ `power` and power(m − 1) below it: the figure holds at the m it names.
    """
    lo = max(1, math.ceil(m_now - 1e-9))
    if power_at(lo) >= power:
        return lo
    hi = lo
    while True:
        hi = min(hi * 2, max_seeds)
        if power_at(hi) >= power:
            break
        if hi >= max_seeds:
            return None
        lo = hi
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if power_at(mid) >= power else (mid, hi)
    return hi


def reach_value(side: Side, n: np.ndarray, deff: np.ndarray, kind: str, threshold: float, power: float = POWER, *,
                gap_base: float | None = None) -> float | None:
    """The true value past the threshold on `side`'s side that reaches its verdict with `power` at these sizes.

    One slice may carry an any-slice verdict, so it is put at the value alone on the least
    favourable live slice (the fewest effective rows): the figure holds whichever slice it is.
    An every-slice verdict puts every slice at the value (each with its own rows and design
    effect): power only falls as any slice moves toward the threshold, so "every slice at or
    beyond the value" is covered. For a gap (`gap_base`: the lowest slice's value now) one pair
    sits at base and base + value, at the two fewest effective rows, and an every-pair verdict is
    charged all P pairs at that distance (Bonferroni). None when even the far limit falls short.
    """
    order = np.argsort(n / np.where(np.isfinite(deff), np.maximum(deff, 1.0), 1.0))
    k = len(n)
    cap = (1.0 - (gap_base or 0.0)) if kind == "rate" else max(10 * threshold, threshold + 10.0)

    def pw(v: float) -> float:
        if gap_base is not None:
            i, j = order[0], order[min(1, k - 1)]
            q = pair_reach(gap_base + v, float(n[i]), float(deff[i]), gap_base, float(n[j]), float(deff[j]), kind, side)
            pairs = k * (k - 1) // 2
            return max(0.0, 1.0 - pairs * (1.0 - q)) if side.every else q
        if side.every:
            return side_power(np.full(k, v), n, deff, kind, side)
        return slice_reach(v, float(n[order[0]]), float(deff[order[0]]), kind, side)

    near, far = threshold, (cap if side.up else 0.0)
    if side.up == (far <= near) or pw(far) < power:
        return None
    for _ in range(40):
        mid = (near + far) / 2
        if pw(mid) >= power:
            far = mid
        else:
            near = mid
    return far


# -- adapter from rows (the only per-row code here; streamed aggregation can replace it) --------------


def cell_counts(cluster: np.ndarray, slice_codes: np.ndarray, Y: np.ndarray, n_slices: int) -> tuple[np.ndarray, np.ndarray]:
    """Per (cell, slice) sums (C × S × M) and counts (C × S) over the given rows; cells renumbered densely."""
    _, cl = np.unique(cluster, return_inverse=True)
    C = int(cl.max()) + 1 if len(cl) else 0
    key = cl * n_slices + slice_codes
    T = np.zeros((C * n_slices, Y.shape[1]))
    np.add.at(T, key, Y)
    N = np.bincount(key, minlength=C * n_slices).astype(np.float64)
    return T.reshape(C, n_slices, Y.shape[1]), N.reshape(C, n_slices)
