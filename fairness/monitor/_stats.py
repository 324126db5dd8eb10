"""Statistics from the per-cell aggregate table: per window and slice, each metric's value and exact interval.

Estimand: for each window and slice, the share of outputs with the flag (the mean count per
output, for counts) in the traffic the window's logs sample — the ratio Σ flags / Σ outputs over
that traffic. Records are independent draws when the mapping has no unit; with a unit (a user,
a conversation) the units are the independent draws (clusters of correlated records, of any
size) and the estimand is output-weighted, not a mean over units.

Method: the project's exact bounds at an effective sample size (`fairness.audit._intervals`:
Clopper–Pearson for rates, Garwood for counts, at n / design effect, the Korn–Graubard
construction), with the design effect for *clusters*, not the grid's strata:
- rates with units: the linearised (cluster-robust) variance of the ratio, U/(U − 1)·Σ_u (x_u − n_u·p)²,
  over the binomial n·p(1 − p); without units the records are independent and the design
  effect is 1 (Clopper–Pearson on the records);
- counts: the Pearson dispersion of the unit totals (with units) or of the records (without:
  from the sums of squares), Σ (t − n·μ)² / (n·μ) / (k − 1);
every design effect floored at 1 and not estimable (no interval) from fewer than two units.
Coverage with heterogeneous unit sizes and unit-level random effects: benchmarks/monitor_coverage.py.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from fairness.audit._intervals import CellCounts, SliceBounds

if TYPE_CHECKING:
    import pyarrow as pa

ESTIMAND = (
    "monitor estimand: in each window and slice, the share of outputs with the flag (mean count per output for "
    "counts) over the traffic the window's logs sample; with a unit field the units (users, conversations) are "
    "the independent clusters and the share is output-weighted"
)


@dataclass(frozen=True)
class WindowCells:
    """One window's aggregate as arrays: per (unit, slice) row counts and per score column sums.

    Without a unit every slice has one cell (the records are independent draws)."""

    window: str
    slices: list[str]
    counts: np.ndarray
    """Records per (unit, slice): U × S."""
    sums: dict[str, np.ndarray]
    """Per score column: sums per (unit, slice), U × S."""
    squares: dict[str, np.ndarray]
    """Per count score column: the sum of squared values per slice, S."""
    clustered: bool
    """Whether the cells are units (clusters) rather than one cell per slice."""

    def n(self) -> np.ndarray:
        return self.counts.sum(axis=0)

    def units(self) -> np.ndarray:
        """Units with a record, per slice (records, when not clustered)."""
        return (self.counts > 0).sum(axis=0) if self.clustered else self.n()

    def pooled(self) -> WindowCells:
        """All slices as one (`rate` rules): one slice named `all`."""
        return WindowCells(self.window, ["all"], self.counts.sum(axis=1, keepdims=True),
                           {c: s.sum(axis=1, keepdims=True) for c, s in self.sums.items()},
                           {c: q.sum(keepdims=True) for c, q in self.squares.items()}, self.clustered)


def windows_of(table: pa.Table, slices: list[str]) -> dict[str, WindowCells]:
    """The aggregate table split per window (sorted labels), every window over the same `slices`."""
    cols = table.column_names
    sum_cols = [c[4:] for c in cols if c.startswith("sum_")]
    sq_cols = [c[3:] for c in cols if c.startswith("sq_")]
    window = np.array(table.column("window").to_pylist(), dtype=object)
    slice_ = table.column("slice").to_pylist()
    unit = table.column("unit").to_pylist()
    clustered = any(u is not None for u in unit)
    s_index = {s: i for i, s in enumerate(slices)}
    s_code = np.array([s_index[s] for s in slice_], dtype=np.int64)
    n = np.asarray(table.column("n").to_numpy(), dtype=np.float64)
    data = {c: np.asarray(table.column(f"sum_{c}").to_numpy(), dtype=np.float64) for c in sum_cols}
    sq = {c: np.asarray(table.column(f"sq_{c}").to_numpy(), dtype=np.float64) for c in sq_cols}
    out: dict[str, WindowCells] = {}
    S = len(slices)
    for w in sorted(set(window.tolist())):
        rows = np.flatnonzero(window == w)
        units = list(dict.fromkeys(unit[i] for i in rows)) if clustered else [None]
        u_index = {u: i for i, u in enumerate(units)}
        u_code = np.array([u_index[unit[i]] for i in rows], dtype=np.int64) if clustered else np.zeros(len(rows), np.int64)
        key = u_code * S + s_code[rows]
        U = len(units)

        def cells(values: np.ndarray, key: np.ndarray = key, U: int = U, rows: np.ndarray = rows) -> np.ndarray:
            return np.bincount(key, weights=values[rows], minlength=U * S).reshape(U, S)

        out[w] = WindowCells(
            window=w, slices=slices, counts=cells(n), sums={c: cells(v) for c, v in data.items()},
            squares={c: np.bincount(s_code[rows], weights=v[rows], minlength=S) for c, v in sq.items()},
            clustered=clustered,
        )
    return out


def design_effects(wc: WindowCells, column: str, kind: str) -> np.ndarray:
    """Per slice: the design effect of the column's ratio estimate (module docstring); ≥ 1, NaN if not estimable."""
    N, X = wc.counts, wc.sums[column]
    n, x = N.sum(axis=0), X.sum(axis=0)
    k = wc.units()
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = np.where(n > 0, x / np.where(n > 0, n, 1), 0.0)
        if kind == "rate":
            if not wc.clustered:
                return np.where(n > 0, 1.0, np.nan)
            v = k / np.where(k > 1, k - 1, 1) * ((X - N * mean[None, :]) ** 2 * (N > 0)).sum(axis=0)
            b = n * mean * (1 - mean)
            deff = np.where(b > 0, v / np.where(b > 0, b, 1), 1.0)
        else:
            if wc.clustered:
                expected = N * mean[None, :]
                x2 = np.where(expected > 0, (X - expected) ** 2 / np.where(expected > 0, expected, 1), 0.0).sum(axis=0)
            else:
                x2 = np.where(mean > 0, (wc.squares[column] - n * mean * mean) / np.where(mean > 0, mean, 1), 0.0)
            deff = np.where(mean > 0, x2 / np.where(k > 1, k - 1, 1), 1.0)
    return np.where(k >= 2, np.maximum(deff, 1.0), np.nan)


def slice_bounds(wc: WindowCells, column: str, kind: str) -> SliceBounds:
    """The project's `SliceBounds` for one column of one window, with the cluster design effects.

    `worst_interval`, `gap_interval` and the change intervals of the diff read it unchanged."""
    cc = CellCounts(wc.sums[column], wc.counts, kind)
    return SliceBounds(cc, design_effects(wc, column, kind), math.nan)


def method_name(kind: str, clustered: bool) -> str:
    if kind == "rate":
        return "korn-graubard-units" if clustered else "clopper-pearson"
    return "garwood-effective-n-units" if clustered else "garwood-effective-n"
