"""One scope's results for every metric at once: per-slice estimates, worst slice, gap, pooled value.

The audit reports every metric of the catalogue in every scope (14 × ~75). One metric at a
time, a scope's intervals were ~15 numpy calls on 8-element arrays per metric, so the
per-call overhead, not the arithmetic, was the cost. Here the design effects and the exact
bounds of a scope are computed for all metrics of a kind in one (S × G) array: the same
elementwise float64 operations on the same arguments, and sums over cells and slices in the
same order, so every figure is bit-for-bit what `fairness.audit._intervals` gives for one
metric (`slice_intervals`, `worst_interval`, `gap_interval`, `pooled_interval`;
tests/test_scopes.py checks it). The rounding of the recorded numbers is `json_number`'s.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from fairness.audit._cells import CellTable
from fairness.audit._intervals import (
    Interval,
    design_effects_all,
    gap_from_bounds,
    gap_pairs,
    lower,
    sidak,
    slice_corrs_many,
    upper,
)
from fairness.audit._metrics import Scope, slice_gap
from fairness.audit._options import AuditOptions
from fairness.audit._results import ScopeResult
from fairness.score._catalog import MetricSpec

CEILING = 0.95
"""A rate at or above this in every slice is a lexical ceiling (noted, not a disparity)."""


def worst_kind(spec: MetricSpec) -> str:
    """`min` where lower is worse, else `max`: which slice is the worst."""
    return "min" if spec.higher_is_worse is False else "max"


_scope_result = ScopeResult.__pydantic_validator__.validate_python
"""`ScopeResult` from a dict of its fields whose estimates are dicts too, fully validated in one
call (the same instances as `Estimate(**fields)` each, then `ScopeResult(...)`): a run builds ~11,000
estimates, and one call per scope result instead of ~18 halves their validation's cost."""


_ROUNDED: dict[float, float] = {}
"""`round(x, 6)` of the nonzero finite values met so far. A run records ~8,000 estimates holding
~1,600 distinct values, and a correctly rounded `round` costs ~20 times a lookup. Two nonzero
floats that compare equal are the same value, so the key is exact; zeros are passed as they are
(`round(±0.0, 6)` is ±0.0, and 0.0 == -0.0 would mix the signs)."""
_ROUNDED_MAX = 1 << 16


def _nums(a: np.ndarray) -> list[float | None]:
    """`json_number` of every element (round to 6 digits; None where not finite)."""
    memo = _ROUNDED
    if len(memo) > _ROUNDED_MAX:
        memo.clear()
    out: list[float | None] = []
    for x in a.tolist():
        if not x:
            out.append(x)
        elif (r := memo.get(x)) is not None:
            out.append(r)
        elif math.isfinite(x):
            out.append(memo.setdefault(x, round(x, 6)))
        else:
            out.append(None)
    return out


class _Bounds:
    """The exact bounds of G metrics of one kind in one scope (S × G), at any level."""

    def __init__(self, T: np.ndarray, N: np.ndarray, x: np.ndarray, n: np.ndarray, kind: str):
        with np.errstate(invalid="ignore", divide="ignore"):
            values = x / n[:, None]
        self.kind, self.x, self.n = kind, x, n[:, None]
        self.deff = design_effects_all(T, N, values, n, kind)
        self.x_eff, self.n_eff = x / self.deff, n[:, None] / self.deff

    def lo(self, tail: float, *, deff1: bool = False) -> np.ndarray:
        return lower(self.x, self.n, self.kind, tail) if deff1 else lower(self.x_eff, self.n_eff, self.kind, tail)

    def hi(self, tail: float, *, deff1: bool = False) -> np.ndarray:
        return upper(self.x, self.n, self.kind, tail) if deff1 else upper(self.x_eff, self.n_eff, self.kind, tail)


def scope_results(cells: CellTable, scope: Scope, slices: list[str], specs: Sequence[MetricSpec], options: AuditOptions,
                  min_n: int) -> tuple[np.ndarray, np.ndarray, list[ScopeResult]]:
    """The scope's per-cell sums (C' × S × M) and rows (C' × S), and one `ScopeResult` per metric of `specs`.

    Intervals only for scopes no deeper than `options.interval_depth`; values are hidden in an
    underpowered scope (unless `allow_small_samples`) and wherever a slice's rows come from a
    single template cell."""
    in_scope = scope.mask
    T, N = cells.sums[in_scope], cells.n[in_scope]
    n_s, X = N.sum(axis=0), T.sum(axis=0)  # per slice: rows (S,), sums (S × M)
    with np.errstate(invalid="ignore", divide="ignore"):
        values = X / n_s[:, None]
    S, M = len(slices), len(specs)
    n_cells = (N > 0).sum(axis=0)
    live = n_s > 0
    min_cells = int(n_cells[live].min()) if live.any() else 0
    underpowered = bool(np.any(n_s < min_n) or np.any(n_cells < min_n))
    want_ci = scope.depth <= options.interval_depth
    hidden = (underpowered and not options.allow_small_samples) or min_cells < 2
    shown = [not hidden and (n_s[i] >= min_n or options.allow_small_samples) for i in range(S)]
    with_ci = want_ci and not hidden
    half = options.alpha / 2
    values_l = values.T.tolist()  # per metric, its slices' values

    slice_ci: list[tuple[list, list, list] | None] = [None] * M  # per metric: lows, highs, design effects
    worst_ci: list[Interval | None] = [None] * M
    gap_ci: list[Interval | None] = [None] * M
    pooled_ci: list[Interval | None] = [None] * M
    for kind in ("rate", "count"):
        group = [m for m, s in enumerate(specs) if s.kind == kind]
        if not group:
            continue
        Tg = T[:, :, group]
        if with_ci:
            b = _Bounds(Tg, N, X[:, group], n_s, kind)
            lo, hi = b.lo(half), b.hi(half)
            live_idx = np.flatnonzero(live)
            k = len(live_idx)
            lo_k, hi_k = (b.lo(sidak(half, k)), b.hi(sidak(half, k))) if k else (lo, hi)
            pairs = gap_pairs(live_idx)
            at_low = at_high = None
            if len(pairs):
                t_low = half / (2 * len(pairs))
                at_low = [a.T.tolist() for a in (b.lo(t_low), b.hi(t_low), b.lo(t_low, deff1=True), b.hi(t_low, deff1=True))]
                at_high = [a.T.tolist() for a in (lo, hi, b.lo(half, deff1=True), b.hi(half, deff1=True))]
                corrs = slice_corrs_many(Tg, N).tolist()
            if k:  # per metric, the live slices' extremes (min and max are exact: one reduction per group)
                lo_min, hik_min = lo[live].min(axis=0).tolist(), hi_k[live].min(axis=0).tolist()
                lok_max, hi_max = lo_k[live].max(axis=0).tolist(), hi[live].max(axis=0).tolist()
            lo_r, hi_r, deff_r = (_nums(a.T.ravel()) for a in (lo, hi, b.deff))  # metric by metric, S each
            for j, m in enumerate(group):
                s_j = slice(j * S, (j + 1) * S)
                slice_ci[m] = (lo_r[s_j], hi_r[s_j], deff_r[s_j])  # round is idempotent: one rounding
                if not k:
                    worst_ci[m] = Interval(math.nan, math.nan, "korn-graubard-simultaneous")
                elif worst_kind(specs[m]) == "min":
                    worst_ci[m] = Interval(lo_min[j], hik_min[j], "korn-graubard-simultaneous-min")
                else:
                    worst_ci[m] = Interval(lok_max[j], hi_max[j], "korn-graubard-simultaneous-max")
                if at_low is None or at_high is None:
                    gap_ci[m] = Interval(math.nan, math.nan, "paired-newcombe-simultaneous")
                else:
                    gap_ci[m] = gap_from_bounds(values_l[m], pairs, [a[j] for a in at_low], [a[j] for a in at_high], corrs[j])
        if want_ci and min_cells >= 2:  # all slices together, one cluster per template cell
            Tp = np.ascontiguousarray(Tg.transpose(0, 2, 1)).sum(axis=2)[:, None, :]
            Np = N.sum(axis=1, keepdims=True)
            p = _Bounds(Tp, Np, Tp.sum(axis=0), Np.sum(axis=0), kind)
            plo, phi = p.lo(half)[0].tolist(), p.hi(half)[0].tolist()
            method = "korn-graubard" if kind == "rate" else "garwood-effective-n"
            for j, m in enumerate(group):
                pooled_ci[m] = Interval(plo[j], phi[j], method)

    n_total = np.sum(n_s)
    pooled_values = _nums(np.ascontiguousarray(X.T).sum(axis=1) / max(n_total, 1))
    gaps = _nums(slice_gap(values.T))
    missing = np.isnan(values.T)
    hi_at = np.where(missing, -np.inf, values.T).argmax(axis=1).tolist()
    lo_at = np.where(missing, np.inf, values.T).argmin(axis=1).tolist()
    none_at = missing.all(axis=1).tolist()
    ns, ncs = [int(x) for x in n_s.tolist()], [int(x) for x in n_cells.tolist()]
    values_r = _nums(values.T.ravel())  # metric by metric, S each
    finite, zero, ceiling = (np.isfinite(values).all(axis=0).tolist(), (values == 0).all(axis=0).tolist(),
                             (values >= CEILING).all(axis=0).tolist())
    out = []
    for m, spec in enumerate(specs):
        vs = values_r[m * S:(m + 1) * S]
        sci = slice_ci[m]
        by_slice = {
            sl: {
                "value": vs[i] if shown[i] else None,
                "n": ns[i],
                "ci": [sci[0][i], sci[1][i]] if sci is not None and shown[i] else None,
                "cells": ncs[i],
                "deff": sci[2][i] if sci is not None else None,
            }
            for i, sl in enumerate(slices)
        }
        wi = None if none_at[m] else (lo_at[m] if spec.higher_is_worse is False else hi_at[m])
        w_value, w_slice = (None, None) if hidden or wi is None else (vs[wi], slices[wi])
        wint, gint, pint = worst_ci[m], gap_ci[m], pooled_ci[m]
        worst = ({"value": w_value, "slice": w_slice} if wint is None
                 else {"value": w_value, "slice": w_slice, "ci": wint.as_list(), "method": wint.method})
        g_value = None if hidden else gaps[m]
        g = {"value": g_value} if gint is None else {"value": g_value, "ci": gint.as_list(), "method": gint.method}
        pooled = {"value": pooled_values[m], "n": int(n_total), "ci": pint.as_list() if pint is not None else None,
                  "method": pint.method if pint is not None else None}
        notes = []
        if underpowered:
            notes.append("underpowered" + (" (shown, not judged: --allow-small-samples)" if options.allow_small_samples else ""))
        if min_cells < 2:
            notes.append("a slice's rows come from a single template cell: no design effect, no interval")
        if spec.kind == "rate" and scope.depth <= 1 and finite[m]:
            if zero[m]:
                notes.append("lexical ceiling: the flag never fires in any slice (0%); no disparity can be measured")
            elif ceiling[m]:
                notes.append(f"lexical ceiling: the flag fires in ≥{CEILING:.0%} of outputs in every slice")
        if sci is not None and not live.all():
            notes.append("a slice has no rows in this scope: worst slice and gap are over the others")
        out.append(_scope_result({"n": int(n_total), "by_slice": by_slice, "pooled": pooled, "worst_slice": worst,
                                  "max_minus_min": g, "caveats": notes, "cells": min_cells}))
    return T, N, out
