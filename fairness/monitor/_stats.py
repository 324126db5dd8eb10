"""Statistics from the per-cell aggregate table: per window and slice, each metric's value and exact interval.

Estimand: for each window and slice, the share of outputs with the flag (the mean count per
output, for counts) in the traffic the window's logs sample — the ratio Σ flags / Σ outputs over
that traffic. Records are independent draws when the mapping has no unit; with a unit (a user,
a conversation) the units are the independent draws (clusters of correlated records, of any
size) and the estimand is output-weighted, not a mean over units.

Method: the project's exact bounds at an effective sample size (`fairness.audit._intervals`:
Clopper–Pearson for rates, Garwood for counts, at n / design effect, the Korn–Graubard
construction), with the design effect for *clusters*, not the grid's strata:
- with units: the linearised (cluster-robust) variance of the ratio, Σ_u e_u² / (1 − n_u/n) with
  e_u = x_u − n_u·p (Bell–McCaffrey's bias-reduced CR2: a heavy unit pulls the estimate toward
  itself, shrinking its own residual, which its leverage n_u/n scales back; with equal sizes the
  usual U/(U − 1)·Σ e_u²), over the binomial n·p(1 − p) (rates) or the Poisson n·μ (counts),
  times Korn–Graubard's degrees-of-freedom factor (t_{ν, .975} / z_{.975})² (few units make the
  variance uncertain). The degrees of freedom ν are the *effective* number of units, the least of
  U − 1, K_eff − 1 with K_eff = (Σ n_u)² / Σ n_u² (unequal unit sizes: a few heavy units carry the
  estimate) and the variance's own 2U / (κ − 1), κ = U·Σe⁴ / (Σe²)² the residuals' kurtosis (a
  variance carried by a few residuals is as uncertain as one from few units; 2U / (κ − 1) is the
  χ² degrees of freedom with that variance of the variance, U for normal residuals); ν ≥ 1;
- without units the records are independent: design effect 1 for rates (Clopper–Pearson on the
  records); for counts the records' variance (from the sums of squares) over the Poisson one;
every design effect floored at 1 and not estimable (no interval) from fewer than two units.
Bounds stay exact at the edges: 0 flags give Clopper–Pearson's upper bound at the effective n,
and a rate's bounds lie in [0, 1].
Coverage with heterogeneous unit sizes and unit-level random effects: benchmarks/monitor_coverage.py.
The heavy, rate-linked units that make the ratio right-skewed also make the windows that miss
look benign, so no per-window statistic finds them; `heterogeneity` (the design effect before the
degrees-of-freedom factor) says when the traffic is of the kind where the benchmark under-covers.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING

import numpy as np

from fairness._util import special
from fairness.audit._intervals import CellCounts

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


def windows_of(table: pa.Table, slices: list[str], *, pool: str | None = None) -> dict[str, WindowCells]:
    """The aggregate table split per window (sorted labels), every window over the same `slices`;
    with `pool`, all windows as one window of that name (a unit seen in several windows is one cluster)."""
    cols = table.column_names
    sum_cols = [c[4:] for c in cols if c.startswith("sum_")]
    sq_cols = [c[3:] for c in cols if c.startswith("sq_")]
    window = np.array(table.column("window").to_pylist() if pool is None else [pool] * table.num_rows, dtype=object)
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


@dataclass(frozen=True)
class UnitCounts(CellCounts):
    """One score column of one window as the project's `CellCounts`, its cells being units (clusters).

    Overrides only the design: every bound, worst-slice, gap and change interval of
    `fairness.audit` reads it unchanged."""

    squares: np.ndarray = field(default_factory=lambda: np.zeros(0))
    """Per slice: the sum of squared per-record values (counts without units)."""
    clustered: bool = False
    """Cells are units (clusters); otherwise one cell per slice of independent records."""

    def design(self) -> tuple[np.ndarray, float]:
        return design_effects(self), math.nan

    def pooled(self) -> UnitCounts:
        return UnitCounts(self.sums.sum(axis=1, keepdims=True), self.counts.sum(axis=1, keepdims=True), self.kind,
                          self.squares.sum(keepdims=True), self.clustered)

    def units(self) -> np.ndarray:
        """Units with a record, per slice (records, when not clustered)."""
        return self.cells if self.clustered else self.n

    @cached_property
    def residual_squares(self) -> np.ndarray:
        """Per (unit, slice): the squared linearised residual (x_u − n_u·p)² of the ratio (0 for a unit without records)."""
        N, n = self.counts, self.n
        with np.errstate(invalid="ignore", divide="ignore"):
            mean = np.where(n > 0, self.x / np.where(n > 0, n, 1), 0.0)
        return ((self.sums - N * mean[None, :]) * (N > 0)) ** 2


def unit_counts(wc: WindowCells, column: str, kind: str) -> UnitCounts:
    """One column of one window, ready for the audit's interval functions."""
    squares = wc.squares.get(column, np.zeros(len(wc.slices)))
    return UnitCounts(wc.sums[column], wc.counts, kind, squares, wc.clustered)


DF_LEVEL = 0.975
"""The quantile of the degrees-of-freedom correction (the two-sided 95% level)."""


def design_effects(uc: UnitCounts) -> np.ndarray:
    """Per slice: the design effect of the ratio estimate (module docstring); ≥ 1, NaN if not estimable."""
    n, x = uc.n, uc.x
    k = uc.units()
    if uc.kind == "rate" and not uc.clustered:
        return np.where(n > 0, 1.0, np.nan)
    with np.errstate(invalid="ignore", divide="ignore"):
        if uc.clustered:
            # Korn–Graubard's degrees of freedom: few (effective) units make the variance itself uncertain
            deff = heterogeneity(uc) * (special.stdtrit(effective_df(uc), DF_LEVEL) / special.ndtri(DF_LEVEL)) ** 2
        else:  # a count's records: their variance from the sums of squares
            mean = np.where(n > 0, x / np.where(n > 0, n, 1), 0.0)
            v = n / np.where(n > 1, n - 1, 1) * (uc.squares - n * mean * mean)
            deff = _over(v, n * mean)
    return np.where(k >= 2, np.maximum(deff, 1.0), np.nan)


def _over(v: np.ndarray, b: np.ndarray) -> np.ndarray:
    """v / b where b > 0, else 1."""
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(b > 0, v / np.where(b > 0, b, 1), 1.0)


def heterogeneity(uc: UnitCounts) -> np.ndarray:
    """Per slice: the cluster-robust variance of the ratio over the binomial (Poisson) one, before the
    degrees-of-freedom factor and the floor — how much the units' rates differ (about 1 when they do not)."""
    n = uc.n
    mean = np.where(n > 0, uc.x / np.where(n > 0, n, 1), 0.0)
    binomial = n * mean * (1 - mean) if uc.kind == "rate" else n * mean
    with np.errstate(invalid="ignore", divide="ignore"):
        leverage = np.where(n > 0, uc.counts / np.where(n > 0, n, 1), 0.0)
        v = np.where(leverage < 1, uc.residual_squares / np.where(leverage < 1, 1 - leverage, 1), 0.0).sum(axis=0)
    return _over(v, binomial)


def effective_df(uc: UnitCounts) -> np.ndarray:
    """Per slice: the degrees of freedom ν of the clustered variance (module docstring), ≥ 1."""
    N = uc.counts
    k, n = uc.units().astype(np.float64), uc.n
    e2 = uc.residual_squares
    s2, s4 = e2.sum(axis=0), (e2 * e2).sum(axis=0)
    with np.errstate(invalid="ignore", divide="ignore"):
        k_eff = np.where(n > 0, n * n / np.where(n > 0, (N * N).sum(axis=0), 1), 1.0)
        kurtosis = np.where(s2 > 0, k * s4 / np.where(s2 > 0, s2 * s2, 1), 3.0)
        from_kurtosis = np.where(kurtosis > 1, 2 * k / np.where(kurtosis > 1, kurtosis - 1, 1), np.inf)
    return np.maximum(np.minimum(np.minimum(k - 1, k_eff - 1), from_kurtosis), 1.0)


def method_name(kind: str, clustered: bool) -> str:
    if kind == "rate":
        return "korn-graubard-units" if clustered else "clopper-pearson"
    return "garwood-effective-n-units" if clustered else "garwood-effective-n"
