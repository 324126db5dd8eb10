"""Permutation tests of "slices differ" from per-cell value counts, without the rows.

Estimand: for each harm metric, the p-value of the max−min gap of slice means under the
null that slice labels are exchangeable within template cells (the paired design), per
group (e.g. family) and pooled over groups; p = (1 + #{permuted gap ≥ observed}) / (P + 1).

Relabelling the rows of a cell at random deals the cell's values out to its slices without
replacement. So the permuted slice totals of a discrete metric depend only on how often
each value occurs in the cell and how many rows each slice has: for a binary flag the
number of hits a slice receives is hypergeometric (jointly multivariate hypergeometric
over the slices); for a small-count metric the value × slice table is a random table with
fixed margins, drawn value by value. Each value's hits are dealt slice by slice with
`Generator.hypergeometric`, vectorised over resamples and cells; the last slice takes the
rest. Cost and memory are O(P × cells × slices) per metric, independent of the rows.

Each metric draws from its own seeded stream (`[seed, metric index]`), so p-values are
reproducible and do not depend on how the rows were chunked.
"""

from __future__ import annotations

import numpy as np

from fairness.audit._cells import CellTable

TIE = 1e-9
"""Permuted gaps within this of the observed one count as ties (≥): float sums of equal
integer tables can differ in the last bit."""


def permuted_slice_sums(levels: np.ndarray, counts: np.ndarray, P: int, rng: np.random.Generator) -> np.ndarray:
    """(P × C × S) slice totals of the metric after a random relabelling within each cell.

    `levels` (V,) are the metric's distinct values, `counts` (C × S × V) how often each
    occurs per cell and slice. Exact: each draw is a uniformly random within-cell
    permutation's slice totals.
    """
    C, S, V = counts.shape
    if C == 0 or S == 0 or V == 0:
        return np.zeros((P, C, S))
    K = counts.sum(axis=1)  # (C × V) rows per (cell, value)
    # Work slice-major (S × P × C) so each slice's draw reads and writes contiguous rows.
    cap = np.ascontiguousarray(np.broadcast_to(counts.sum(axis=2).T[:, None, :], (S, P, C)))  # room left
    total = np.zeros((S, P, C))
    # Deal the most common value last: it fills whatever room is left, no draws needed.
    order = np.argsort(K.sum(axis=0), kind="stable")
    last = order[-1]
    for v in order[:-1]:
        cells = np.flatnonzero(K[:, v] > 0)
        if cells.size == 0:
            continue
        every = cells.size == C
        c_cap = cap if every else cap[:, :, cells]
        remaining = np.broadcast_to(K[cells, v], (P, cells.size)).copy()
        room = c_cap.sum(axis=0)
        taken = np.empty_like(c_cap)
        for s in range(S - 1):
            room -= c_cap[s]
            taken[s] = rng.hypergeometric(c_cap[s], room, remaining)
            remaining -= taken[s]
        taken[S - 1] = remaining
        c_cap -= taken
        if every:
            total += levels[v] * taken
        else:
            cap[:, :, cells] = c_cap
            total[:, :, cells] += levels[v] * taken
    if levels[last] != 0:
        total += levels[last] * cap
    return total.transpose(1, 2, 0)


def _gaps(sums: np.ndarray, n: np.ndarray) -> np.ndarray:
    """max − min over the last axis of sums / n (NaN-aware: empty slices are skipped)."""
    with np.errstate(invalid="ignore", divide="ignore"):
        means = sums / n
    with np.errstate(invalid="ignore"):
        return np.nanmax(means, axis=-1) - np.nanmin(means, axis=-1)


def permutation_pvalues_cells(
    table: CellTable, metrics: list[int], cell_group: np.ndarray, n_groups: int, P: int = 2000, seed: int = 0,
    chunk: int = 250,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """p-values of "slices differ" (statistic: max−min of slice means) per group × metric.

    `cell_group` (C,) gives each cell's group (e.g. its family). Returns (observed gaps
    G × M', p per group G × M', observed pooled gaps M', p pooled M') for the M' metrics
    listed; a metric without a value histogram (continuous) gets NaN.
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
        fixed_g = onehot[~varies].T @ table.sums[~varies, :, m]
        onehot_v = onehot[varies]
        rng = np.random.default_rng([seed, j])
        exceed_g = np.zeros(G)
        exceed_p = 0.0
        for start in range(0, P, chunk):
            p = min(chunk, P - start)
            perm = permuted_slice_sums(levels, counts[varies], p, rng)  # (p × c × S)
            sg = np.einsum("pcs,cg->pgs", perm, onehot_v) + fixed_g[None]
            with np.errstate(invalid="ignore"):
                exceed_g += (_gaps(sg, n_g[None]) >= obs_g[None, :, j] - TIE).sum(axis=0)
                exceed_p += float((_gaps(sg.sum(axis=1), n_all[None]) >= obs_p[j] - TIE).sum())
        p_g[:, j] = np.where(np.isnan(obs_g[:, j]), np.nan, (1.0 + exceed_g) / (P + 1.0))
        p_p[j] = np.nan if np.isnan(obs_p[j]) else (1.0 + exceed_p) / (P + 1.0)
    return obs_g, p_g, obs_p, p_p
