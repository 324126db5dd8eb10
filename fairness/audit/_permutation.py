"""Permutation tests of "slices differ" from per-cell value counts, without the rows.

Estimand: for each harm metric, the p-value of the max−min gap of slice means under the
null that slice labels are exchangeable within template cells (the paired design), per
group (e.g. family) and pooled over groups; p = (1 + #{permuted gap ≥ observed}) / (P + 1).

Relabelling the rows of a cell at random deals the cell's values out to its slices without
replacement. So the permuted slice totals of a discrete metric depend only on how often
each value occurs in the cell and how many rows each slice has: the value × slice table is
a random table with fixed margins, drawn value by value (each value's hits are multivariate
hypergeometric over the room its slices have left). The most common value is dealt last and
takes whatever room is left (no draw); totals are kept relative to it. Every draw below is
exact (up to the float64 rounding of the probabilities), so the null is the permutation null.

Cost is per (resample, cell) and per value, so each value is dealt the cheapest exact way:

- one value (for a binary metric, the only one) is dealt first, into every slice's full
  room, so its draw depends only on the cell's (slice sizes, hits), which few cells do not
  share. Per configuration the distribution of the hits per slice (every composition of the
  hits, weighted Π_s C(n_s, a_s)) is tabulated once, and a draw is one uniform and an
  inverse-CDF lookup through a guide table (O(1), ~10–40 ns against ~3 × 20–85 ns for
  S − 1 numpy hypergeometrics). It is the value with ≥ 10 rows a cell and the smallest
  table, else the most common one; configurations too large to tabulate are drawn;
- any other value is dealt slice by slice: slice s takes hypergeometric(its room, the later
  slices' room, rows left) of it. Each such triple's distribution is tabulated the first
  time it occurs (exact, from log-factorials) and kept for the metric's later passes; a
  draw is one uniform and an inverse-CDF lookup (~30 ns against ~85 ns for numpy's
  hypergeometric from 10 rows on). Such values are dealt before the row-by-row ones, so
  the room they meet varies less and fewer triples occur; where a slice's triples would
  not fit an index of `HYPER_BOX`, `Generator.hypergeometric` draws instead;
- a later value with few rows a cell is dealt row by row: each row takes a uniformly random
  free place (one uniform, ~15–30 ns a row).

Slice totals are summed per group as they are dealt (cells are sorted by group); a table
step's hits are summed in bit fields packed into one int64 per outcome, and room left is
kept only for cells a later step deals into. Cost and memory are O(P × cells × slices) per
metric, independent of the rows (plus the tables: at most `TABLES_MAX` joint outcomes, and
the hypergeometric triples met, indexed within `HYPER_BOX` each); resamples are processed in passes of at most `BUDGET` (resample, cell, slice) elements.

Randomness comes in blocks of `BLOCK` resamples, each with its own seeded stream
(`[seed, metric index, block]`): p-values are reproducible and do not depend on how the
rows or the resamples were chunked.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from fairness._util.arrays import unique
from fairness._util.special import gammaln
from fairness.audit._cells import CellTable

TIE = 1e-9
"""Permuted gaps within this of the observed one count as ties (≥): float sums of equal
integer tables can differ in the last bit."""

BLOCK = 250
"""Resamples per random stream: a pass draws whole blocks, so results do not depend on the pass size."""

BUDGET = 1 << 20
"""Most (resample × cell × slice) elements held per pass (at least one block): an array of them
is 8 MiB, small enough for the allocator to reuse rather than map fresh pages each time."""

TABLE_MAX = 1 << 16
"""Most outcomes tabulated for one (slice sizes, hits) configuration; larger ones draw hypergeometrics."""

TABLES_MAX = 1 << 19
"""Most outcomes tabulated per metric (smallest configurations first)."""

HYPER_BOX = 1 << 21
"""Most (room, later room, rows left) triples one slice of a step may index for its hypergeometric
tables (an int32 each); a step whose box is larger draws with `Generator.hypergeometric`."""

ROWS_MEAN = 8
"""A later value with at most this many rows a cell on average is dealt row by row (one uniform
a row, ~15–30 ns), which beats S − 1 tabulated hypergeometric draws (~30 ns each, plus
building the tables of the triples met) and numpy's (~85 ns each from 10 rows on)."""


class _Streams:
    """Uniform and hypergeometric draws over a pass of resamples, block by block.

    Resamples are the last axis (…, p); each block's columns come from its own generator, so
    a block's draws are the same whichever pass it falls in.
    """

    def __init__(self, gens: list[np.random.Generator], sizes: list[int]):
        self.gens, self.sizes = gens, sizes
        self.cut = np.cumsum(sizes)[:-1]

    def random(self, head: tuple[int, ...]) -> np.ndarray:
        if len(self.gens) == 1:
            return self.gens[0].random((*head, self.sizes[0]))
        return np.concatenate([g.random((*head, b)) for g, b in zip(self.gens, self.sizes, strict=True)], axis=-1)

    def hypergeometric(self, good: np.ndarray, bad: np.ndarray, sample: np.ndarray, out: np.ndarray) -> None:
        if len(self.gens) == 1:
            out[...] = self.gens[0].hypergeometric(good, bad, sample)
            return
        for g, a, b in zip(self.gens, [0, *self.cut], [*self.cut, out.shape[-1]], strict=True):
            out[..., a:b] = g.hypergeometric(good[..., a:b], bad[..., a:b], sample[..., a:b])


class _Table(NamedTuple):
    """Exact inverse-CDF tables of one value's hits per slice, per (slice sizes, hits) configuration.

    `config` (C,) each tabulated cell's configuration; per configuration t its outcomes are
    `start[t] : start[t] + length[t]` of `cdf` (L,) and `hits` (S × L); `guide` (L,) maps
    bucket i of configuration t (u ∈ [i/length, (i+1)/length)) to the first outcome that can hold u.
    """

    config: np.ndarray
    start: np.ndarray
    length: np.ndarray
    cdf: np.ndarray
    guide: np.ndarray
    hits: np.ndarray

    def draw(self, u: np.ndarray) -> np.ndarray:
        """(C × p) outcome drawn for uniforms `u` (C × p), one per (cell, resample)."""
        t = self.config[:, None]
        return _inverse(self.cdf, self.guide, self.start[t], self.length[t], u).reshape(u.shape)


def _inverse(cdf: np.ndarray, guide: np.ndarray, start: np.ndarray, length: np.ndarray, u: np.ndarray) -> np.ndarray:
    """(flat) index of the first outcome whose CDF exceeds u, of each draw's distribution (its
    `start` and `length` in `cdf`, broadcast against `u`): an exact inverse-CDF draw. The guide
    table gives a start at or below it in O(1)."""
    # (`take` gathers as indexing does, a little faster on these ~10⁵-element index arrays)
    j = guide.take(start + np.minimum((u * length).astype(np.int64), length - 1)).ravel()
    flat = u.ravel()
    # walk up to the first outcome whose CDF exceeds u (about one step on average) …
    act = np.flatnonzero(cdf.take(j) <= flat)
    for _ in range(4):
        if not act.size:
            break
        j[act] += 1
        act = act[cdf.take(j[act]) <= flat[act]]
    if act.size:  # … and bisect the few left (u in a long run of tiny probabilities)
        lo, hi = j[act], np.broadcast_to(start + length - 1, u.shape).ravel()[act]
        uu = flat[act]
        while np.any(hi - lo > 1):
            mid = (lo + hi) // 2
            below = cdf[mid] <= uu
            lo, hi = np.where(below, mid, lo), np.where(below, hi, mid)
        j[act] = hi
    return j


def _compositions(room: np.ndarray, K: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Every way to deal K_t hits into slices with room `room` (T × S), configuration by
    configuration: (owner configuration (L,), hits per slice (S × L)), owners contiguous."""
    T, S = room.shape
    after = np.cumsum(room[:, ::-1], axis=1)[:, ::-1]  # room in slices s … S−1
    owner, rem = np.arange(T), K.astype(np.int64)
    parts: list[np.ndarray] = []
    for s in range(S - 1):
        lo = np.maximum(rem - after[owner, s + 1], 0)  # leave no more than the later slices hold
        hi = np.minimum(rem, room[owner, s])
        cnt = hi - lo + 1
        idx = np.repeat(np.arange(owner.size), cnt)
        a = lo[idx] + np.arange(idx.size) - (np.cumsum(cnt) - cnt)[idx]
        parts = [p[idx] for p in parts] + [a]
        owner, rem = owner[idx], rem[idx] - a
    return owner, np.stack([*parts, rem])


def _table(n: np.ndarray, K: np.ndarray, P: int) -> tuple[_Table, np.ndarray] | None:
    """Tables for the cells whose (slice sizes n (C × S), hits K (C,)) configuration is small
    enough; returns (table, which cells it covers) or None."""
    S = n.shape[1]
    keys, config, counts = np.unique(np.column_stack([n, K]).astype(np.int64), axis=0, return_inverse=True, return_counts=True)
    config = config.ravel()
    size = np.array([min(math.comb(int(k) + S - 1, S - 1), TABLE_MAX + 1) for k in keys[:, S]], dtype=np.int64)  # ≥ outcomes
    # a table pays for itself when its configuration gets at least as many draws as it has outcomes
    ok = (size <= TABLE_MAX) & (size <= P * counts)
    order = np.argsort(np.where(ok, size, np.iinfo(np.int64).max), kind="stable")
    take = order[: int(np.searchsorted(np.cumsum(size[order]), TABLES_MAX, side="right"))]
    take = take[ok[take]]
    if take.size == 0:
        return None
    keep = np.zeros(len(keys), dtype=bool)
    keep[take] = True
    renum = np.cumsum(keep) - 1
    room, hits_k = keys[take][:, :S], keys[take][:, S]
    owner, hits = _compositions(room, hits_k)
    lf = gammaln(np.arange(int(room.max()) + 2, dtype=np.float64))  # lf[k] = log((k−1)!)
    logw = -(lf[hits + 1] + lf[room[owner].T - hits + 1]).sum(axis=0)  # ∝ Π_s C(n_s, a_s)
    length = np.bincount(owner, minlength=take.size)
    start = np.cumsum(length) - length
    cdf = np.empty(owner.size)
    guide = np.empty(owner.size, dtype=np.int64)
    for a, m in zip(start.tolist(), length.tolist(), strict=True):
        w = np.exp(logw[a : a + m] - logw[a : a + m].max())
        c = np.cumsum(w)
        c /= c[-1]
        c[-1] = 1.0
        cdf[a : a + m] = c
        # margin: floor(u × m) = i guarantees u ≥ i/m − 1e-12, so the guide never overshoots
        guide[a : a + m] = a + np.searchsorted(c, np.arange(m) / m - 1e-12, side="right")
    cells = keep[config]
    small = np.int8 if int(hits.max()) < 128 else np.int16 if int(hits.max()) < 1 << 15 else np.int64
    return _Table(renum[config[cells]], start, length, cdf, guide, hits.astype(small)), cells


class _Hyper:
    """Exact inverse-CDF tables of hypergeometric(good, bad, sample), one per triple, built the
    first time a triple occurs and kept for later passes. A triple is found through a dense
    index over its box [g0, g0 + gw) × [b0, b0 + bw) × [0, nw) (−1: not built yet).

    Each table is a function of its triple alone (its own row of log-factorials and cumulative
    sum), so draws do not depend on which triples were built together or in which pass.
    """

    def __init__(self, g0: int, gw: int, b0: int, bw: int, nw: int):
        self.g0, self.b0, self.bw, self.nw = g0, b0, bw, nw
        self.index = np.full(gw * bw * nw, -1, dtype=np.int32)
        self.lf = gammaln(np.arange(g0 + gw + b0 + bw + 1, dtype=np.float64))  # lf[k] = log((k−1)!)
        self.size = 0  # outcomes held (of the buffers' capacity)
        self.cdf = np.empty(0)
        self.guide = np.empty(0, dtype=np.int64)
        self.value = np.empty(0, dtype=np.int64)
        self.start = np.empty(0, dtype=np.int64)
        self.length = np.empty(0, dtype=np.int64)

    def draw(self, good: np.ndarray, bad: np.ndarray, sample: np.ndarray, u: np.ndarray) -> np.ndarray:
        """Hypergeometric draws (shape of `u`) by inverse CDF, one uniform each."""
        key = (((good - self.g0) * self.bw + (bad - self.b0)) * self.nw + sample).ravel()
        t = self.index.take(key)
        if t.min() < 0:
            self._build(unique(key[t < 0]))
            t = self.index.take(key)
        return self.value.take(_inverse(self.cdf, self.guide, self.start.take(t), self.length.take(t), u.ravel())).reshape(u.shape)

    def _build(self, key: np.ndarray) -> None:
        n = key % self.nw
        b = (key // self.nw) % self.bw + self.b0
        g = key // (self.nw * self.bw) + self.g0
        lo = np.maximum(n - b, 0)
        m = np.minimum(n, g) - lo + 1
        # rows padded to the next power of two of their length, a few widths at a time
        width = np.left_shift(1, np.ceil(np.log2(m)).astype(np.int64))
        for w in unique(width).tolist():
            sel = np.flatnonzero(width == w)
            self._append(key[sel], g[sel], b[sel], n[sel], lo[sel], m[sel], w)

    def _append(self, key: np.ndarray, g: np.ndarray, b: np.ndarray, n: np.ndarray, lo: np.ndarray, m: np.ndarray, M: int) -> None:
        T = key.size
        valid = np.arange(M) < m[:, None]
        x = lo[:, None] + np.where(valid, np.arange(M), 0)
        lf = self.lf[1:]  # log(k!)
        logp = (lf[g][:, None] - lf[x] - lf[g[:, None] - x] + lf[b][:, None] - lf[n[:, None] - x] - lf[b[:, None] - n[:, None] + x]
                - (lf[g + b] - lf[n] - lf[g + b - n])[:, None])
        cdf = np.cumsum(np.where(valid, np.exp(logp), 0.0), axis=1)
        rows = np.arange(T)
        cdf /= cdf[rows, m - 1][:, None]
        cdf[rows, m - 1] = 1.0
        # guide: bucket i of a table (u·m ∈ [i, i+1)) starts past the outcomes whose CDF is at most
        # i/m − 1e-9 (so never past the answer): outcome j is passed from bucket ⌈m·(cdf_j + 1e-9)⌉ on
        e = np.minimum(np.ceil(m[:, None] * (cdf + 1e-9)), m[:, None]).astype(np.int64)
        passed = np.bincount((rows[:, None] * (M + 1) + e)[valid], minlength=T * (M + 1)).reshape(T, M + 1).cumsum(axis=1)
        base, first = self.size, self.start.size
        start = base + np.cumsum(m) - m
        self.size = end = base + int(m.sum())
        if end > self.cdf.size:  # grow geometrically: appends stay linear in all
            cap = max(2 * self.cdf.size, end)
            self.cdf, self.guide, self.value = (np.concatenate([a[:base], np.empty(cap - base, a.dtype)]) for a in (self.cdf, self.guide, self.value))
        self.cdf[base:end] = cdf[valid]
        self.guide[base:end] = (start[:, None] + passed[:, :M])[valid]
        self.value[base:end] = x[valid]
        self.start = np.concatenate([self.start, start])
        self.length = np.concatenate([self.length, m])
        self.index[key] = first + rows


def _hyper(n: np.ndarray, K: np.ndarray, free: np.ndarray) -> list[_Hyper] | None:
    """Tables for dealing a value with K (C,) rows slice by slice into cells of slice sizes n
    (C × S) with `free` (C,) places left, or None where a slice's box exceeds `HYPER_BOX`."""
    used = (n.sum(axis=1) - free)[:, None]  # places earlier values took, anywhere in the cell
    later = np.cumsum(n[:, ::-1], axis=1)[:, ::-1]
    out = []
    for s in range(n.shape[1] - 1):
        g0, g1 = int(np.maximum(n[:, s : s + 1] - used, 0).min()), int(n[:, s].max())
        b0, b1 = int(np.maximum(later[:, s + 1 : s + 2] - used, 0).min()), int(later[:, s + 1].max())
        if (g1 - g0 + 1) * (b1 - b0 + 1) * (int(K.max()) + 1) > HYPER_BOX:
            return None
        out.append(_Hyper(g0, g1 - g0 + 1, b0, b1 - b0 + 1, int(K.max()) + 1))
    return out


def _deal_slices(room: np.ndarray, K: np.ndarray, streams: _Streams, hyper: list[_Hyper] | None) -> np.ndarray:
    """(S × C × p) hits per slice of a value with K (C,) rows dealt into `room` (S × C × p),
    slice by slice: slice s takes a hypergeometric share of what it and the later slices hold,
    drawn from `hyper`'s tables (one uniform each) or else by `Generator.hypergeometric`."""
    S = room.shape[0]
    remaining = np.repeat(K[:, None], room.shape[2], axis=1)
    later = room.sum(axis=0, dtype=room.dtype)
    taken = np.empty_like(room)
    u = streams.random((S - 1, room.shape[1])) if hyper is not None else None
    for s in range(S - 1):
        later -= room[s]
        if hyper is not None and u is not None:
            taken[s] = hyper[s].draw(room[s], later, remaining, u[s])
        else:
            streams.hypergeometric(room[s], later, remaining, taken[s])
        remaining -= taken[s]
    taken[S - 1] = remaining
    return taken


def _deal_rows(room: np.ndarray, K: np.ndarray, free: np.ndarray, streams: _Streams) -> np.ndarray:
    """(S × C × p) hits per slice of a value with K (C,) rows dealt into `room` (S × C × p,
    `free` (C,) in all), one row at a time: each row takes a uniformly random free place.

    The cumulative room up to each slice is kept, so a row at place x < room total lands in
    the first slice whose cumulative room exceeds x, and takes one place from that
    cumulative room and every later one. Cells go in order of decreasing K, so the cells
    still dealing are always a prefix.
    """
    S = room.shape[0]
    order = np.argsort(-K, kind="stable")
    Ks = K[order]
    cum = np.take(room[:-1], order, axis=1)
    for t in range(1, S - 1):
        cum[t] += cum[t - 1]
    for k in range(int(Ks[0])):
        a = int(np.searchsorted(-Ks, -k, side="left"))  # cells with more than k rows
        x = (streams.random((a,)) * (free[order[:a]] - k)[:, None]).astype(np.int32)
        for t in range(S - 1):
            cum[t, :a] -= x < cum[t, :a]
    # hits = room before − room after, slice by slice, back in the cells' order
    back = np.argsort(order)
    cum = np.take(cum, back, axis=1)
    hits = room.copy()
    hits[:-1] -= cum
    hits[1:-1] += cum[:-1]
    hits[-1] -= (free - K)[:, None]
    hits[-1] += cum[-1]
    return hits


@dataclass
class _Step:
    """One value dealt to some cells (ascending): by its table, row by row or by
    hypergeometric draws; `starts` are where each non-empty group (`groups`) begins among
    those cells."""

    value: int
    cells: np.ndarray
    table: _Table | None
    starts: np.ndarray
    groups: np.ndarray
    free: np.ndarray  # (cells,) room left in each cell before this value is dealt
    by_rows: bool = False
    hyper: list[_Hyper] | None = None  # slice-by-slice tables (neither table nor rows)
    leaves_room: bool = True  # a later step deals into some of these cells: room must be kept
    packed: np.ndarray | None = None  # per table outcome, its hits per slice in `bits`-bit fields
    bits: int = 0


class _Plan(NamedTuple):
    """How one metric's varying cells are dealt, step by step; the last (most common) value
    takes the room left. Slice totals are kept relative to the last value's level
    (`shift` = level − last)."""

    n: np.ndarray  # (C × S) slice sizes
    K: np.ndarray  # (C × V) rows per value
    last: float
    shift: np.ndarray  # (V,)
    n_groups: int
    steps: list[_Step]


def _plan(levels: np.ndarray, counts: np.ndarray, group: np.ndarray, n_groups: int, P: int) -> _Plan:
    """`group` (C,) is each cell's group, non-decreasing (cells sorted by group)."""
    n = counts.sum(axis=2).astype(np.int32)  # int32 room and hits: half the memory traffic
    K = counts.sum(axis=1).astype(np.int32)
    order = np.argsort(K.sum(axis=0), kind="stable")  # most common last
    last, first = int(order[-1]), int(order[-2])
    # The table goes to the value that is dearest to draw otherwise: one with many rows a cell
    # (any with ≥ 10 cost the same hypergeometric draws), the fewest of those (smallest table).
    held = (K > 0).sum(axis=0)
    mean = np.where(held > 0, K.sum(axis=0) / np.maximum(held, 1), 0)
    many = [int(v) for v in order[:-1] if mean[v] >= 10]
    if many:
        first = min(many, key=lambda v: mean[v])
        order = np.array([*(v for v in order[:-1] if v != first), first, last])

    free = n.sum(axis=1)

    def step(v: int, cells: np.ndarray, table: _Table | None = None) -> _Step:
        starts = np.searchsorted(group[cells], np.arange(n_groups))
        nonempty = np.flatnonzero(np.diff(np.append(starts, cells.size)) > 0)
        by_rows = bool(K[cells, v].mean() <= ROWS_MEAN)
        hyper = None if table is not None or by_rows else _hyper(n[cells], K[cells, v], free[cells])
        st = _Step(v, cells, table, starts[nonempty], nonempty, free[cells].copy(), by_rows, hyper)
        free[cells] -= K[cells, v]
        return st

    steps = []
    has_first = np.flatnonzero(K[:, first] > 0)
    tab = _table(n[has_first], K[has_first, first], P) if has_first.size else None
    if tab is not None:
        steps.append(step(first, has_first[tab[1]], tab[0]))
        has_first = has_first[~tab[1]]
    if has_first.size:
        steps.append(step(first, has_first))
    # Values dealt slice by slice go before those dealt row by row: the room they meet varies less
    # (fewer tables to build), and the commonest row-by-row value, dealt last, leaves no room to keep.
    rest = sorted((int(v) for v in order[:-2] if K[:, v].any()), key=lambda v: bool(mean[v] <= ROWS_MEAN))
    steps += [step(v, np.flatnonzero(K[:, v] > 0)) for v in rest]
    later = np.zeros(len(n), dtype=bool)
    for st in reversed(steps):
        st.leaves_room = bool(later[st.cells].any())
        later[st.cells] = True
        if st.table is not None:
            # A table's hits summed per group fit fields of `bits` bits: one gather and one sum a
            # (cell, resample) for all slices at once, when the S fields fit an int64.
            bound = np.add.reduceat(np.minimum(n[st.cells], K[st.cells, st.value][:, None]), st.starts, axis=0).max()
            bits = int(bound).bit_length()
            if bits * n.shape[1] <= 62:
                st.bits = bits
                st.packed = (st.table.hits.astype(np.int64) << (bits * np.arange(n.shape[1]))[:, None]).sum(axis=0)
    return _Plan(n, K, float(levels[last]), levels - levels[last], n_groups, steps)


def _deal(plan: _Plan, streams: _Streams, p: int) -> np.ndarray:
    """(S × G × p) per-group sums of the slice totals, relative to the last value, of `p`
    random within-cell relabellings."""
    C, S = plan.n.shape
    out = np.zeros((S, plan.n_groups, p))
    def full(cells: np.ndarray) -> np.ndarray:
        return np.ascontiguousarray(np.broadcast_to(plan.n[cells].T[:, :, None], (S, cells.size, p)))

    room = full(np.arange(C)) if any(st.leaves_room for st in plan.steps) else None  # what earlier steps left
    for st in plan.steps:
        every = st.cells.size == C
        hits: np.ndarray | None = None
        if st.table is not None and st.packed is not None:
            j = st.table.draw(streams.random((st.cells.size,)))
            tot = np.add.reduceat(st.packed.take(j), st.starts, axis=0)
            sums = (tot >> (st.bits * np.arange(S))[:, None, None]) & ((1 << st.bits) - 1)
            if st.leaves_room:
                hits = st.table.hits.take(j, axis=1)
        else:
            if st.table is not None:
                dealt = st.table.hits.take(st.table.draw(streams.random((st.cells.size,))), axis=1)
            else:
                left = full(st.cells) if room is None else room if every else room[:, st.cells]
                K = plan.K[st.cells, st.value]
                dealt = _deal_rows(left, K, st.free, streams) if st.by_rows else _deal_slices(left, K, streams, st.hyper)
            sums = np.add.reduceat(dealt, st.starts, axis=1, dtype=np.int64)
            hits = dealt
        out[:, st.groups] += plan.shift[st.value] * sums
        if room is not None and st.leaves_room and hits is not None:
            if every:
                room -= hits
            else:
                room[:, st.cells] -= hits
    return out


def _gaps(sums: np.ndarray, n: np.ndarray) -> np.ndarray:
    """max − min over the last axis of sums / n (NaN-aware: empty slices are skipped)."""
    with np.errstate(invalid="ignore", divide="ignore"):
        means = sums / n
    with np.errstate(invalid="ignore"):
        return np.nanmax(means, axis=-1) - np.nanmin(means, axis=-1)


def permutation_pvalues_cells(
    table: CellTable, metrics: list[int], cell_group: np.ndarray, n_groups: int, P: int = 2000, seed: int = 0,
    budget: int = BUDGET,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """p-values of "slices differ" (statistic: max−min of slice means) per group × metric.

    `cell_group` (C,) gives each cell's group (e.g. its family). Returns (observed gaps
    G × M', p per group G × M', observed pooled gaps M', p pooled M') for the M' metrics
    listed; a metric without a value histogram (continuous) gets NaN. `budget` bounds the
    (resample × cell × slice) elements held per pass; it does not change the result.
    """
    G, Mh = n_groups, len(metrics)
    onehot = np.zeros((table.n_cells, G))
    onehot[np.arange(table.n_cells), cell_group] = 1.0
    n_g = onehot.T @ table.n  # (G × S)
    n_all = n_g.sum(axis=0)
    obs_g = np.full((G, Mh), np.nan)
    obs_p = np.full(Mh, np.nan)
    p_g = np.full((G, Mh), np.nan)
    p_p = np.full(Mh, np.nan)
    S = table.n_slices
    for j, m in enumerate(metrics):
        sums_g = onehot.T @ table.sums[:, :, m]
        with np.errstate(invalid="ignore"):
            obs_g[:, j] = _gaps(sums_g, n_g)
            obs_p[j] = _gaps(sums_g.sum(axis=0), n_all)
        hist = table.histogram(m)
        if hist is None or P <= 0:
            continue
        levels, counts = hist
        # Cells holding one value only cannot change under relabelling: their totals are fixed.
        varies = (counts.sum(axis=1) > 0).sum(axis=1) > 1
        exceed_g = np.zeros(G)
        exceed_p = 0.0
        if varies.any():
            cells = np.flatnonzero(varies)
            cells = cells[np.argsort(cell_group[cells], kind="stable")]  # groups contiguous
            plan = _plan(levels, counts[cells], cell_group[cells], G, P)
            # fixed cells' totals, plus the varying cells' totals had every row the last value
            base_g = onehot[~varies].T @ table.sums[~varies, :, m] + plan.last * (onehot[cells].T @ plan.n)
            C = cells.size
            per_pass = max(1, budget // (BLOCK * C * S)) * BLOCK
            for start in range(0, P, per_pass):
                blocks = range(start // BLOCK, (min(P, start + per_pass) + BLOCK - 1) // BLOCK)
                sizes = [min(BLOCK, P - b * BLOCK) for b in blocks]
                p = sum(sizes)
                streams = _Streams([np.random.default_rng([seed, j, b]) for b in blocks], sizes)
                sg = _deal(plan, streams, p).transpose(2, 1, 0) + base_g  # (p × G × S)
                with np.errstate(invalid="ignore"):
                    exceed_g += (_gaps(sg, n_g) >= obs_g[None, :, j] - TIE).sum(axis=0)
                    exceed_p += float((_gaps(sg.sum(axis=1), n_all) >= obs_p[j] - TIE).sum())
        else:
            # nothing can move: every relabelling reproduces the observed gaps
            exceed_g[:] = P
            exceed_p = float(P)
        p_g[:, j] = np.where(np.isnan(obs_g[:, j]), np.nan, (1.0 + exceed_g) / (P + 1.0))
        p_p[j] = np.nan if np.isnan(obs_p[j]) else (1.0 + exceed_p) / (P + 1.0)
    return obs_g, p_g, obs_p, p_p
