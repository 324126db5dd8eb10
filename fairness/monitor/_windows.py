"""Per-window statistics and the absolute rule checks, from the per-cell aggregate table.

Every interval is the audit's own (`fairness.audit._intervals`), read through `UnitCounts`
(units as clusters); every rule check is the audit's (`rule_intervals`: Holm across the scopes a
rule quantifies over) decided by the one gate rule (`check_state`). A window's `each_family` rule
is checked in each window (the window plays the family's part); an `overall` rule on all
windows pooled (a unit seen in several windows is one cluster).
"""

from __future__ import annotations

import math

import numpy as np

from fairness._util.canonical import json_number
from fairness.audit._audit import rule_intervals
from fairness.audit._gate import check_state
from fairness.audit._intervals import SliceBounds, gap_interval, slice_intervals, worst_interval
from fairness.audit._results import Estimate, RuleCheck
from fairness.monitor._results import WindowMetric, WindowResult
from fairness.monitor._stats import UnitCounts, WindowCells, method_name, unit_counts
from fairness.score._catalog import MetricSpec
from fairness.suite._rules import DecisionRule

OVERALL = "overall"


def scope_of(window: str) -> str:
    return f"window={window}"


def worst_kind(spec: MetricSpec) -> str:
    return "min" if spec.higher_is_worse is False else "max"


def counts_of(wc: WindowCells, spec: MetricSpec) -> UnitCounts:
    return unit_counts(wc, spec.column, spec.kind)


def underpowered(wc: WindowCells, min_group_size: int) -> list[str]:
    """Slices with records in the window but fewer records (or units) than `min_group_size`."""
    n = wc.counts.sum(axis=0)
    units = (wc.counts > 0).sum(axis=0) if wc.clustered else n
    return [s for i, s in enumerate(wc.slices) if n[i] > 0 and (n[i] < min_group_size or units[i] < min_group_size)]


def _estimate(value: float, lo: float, hi: float, method: str, **extra) -> Estimate:
    return Estimate(value=json_number(value), ci=[json_number(lo), json_number(hi)], method=method, **extra)


def window_metric(uc: UnitCounts, spec: MetricSpec, slices: list[str], alpha: float) -> WindowMetric:
    """One metric in one window: per-slice, pooled, worst-slice and gap estimates with their exact intervals."""
    sb = SliceBounds.of(uc)
    lo, hi = slice_intervals(sb, alpha)
    v, n = uc.values, uc.n
    method = method_name(uc.kind, uc.clustered)
    by_slice = {
        s: _estimate(float(v[i]), float(lo[i]), float(hi[i]), method, n=int(n[i]),
                     cells=int(uc.cells[i]) if uc.clustered else None, deff=json_number(float(sb.deff[i])))
        for i, s in enumerate(slices) if n[i] > 0
    }
    psb = SliceBounds.of(uc.pooled())
    plo, phi = slice_intervals(psb, alpha)
    pooled = _estimate(float(psb.cc.values[0]), float(plo[0]), float(phi[0]), method, n=int(psb.cc.n[0]),
                       deff=json_number(float(psb.deff[0])))
    live = np.flatnonzero(sb.live)
    if len(live) == 0:
        none = Estimate(value=None)
        return WindowMetric(metric=spec.name, by_slice=by_slice, pooled=pooled, worst_slice=none, max_minus_min=none)
    kind = worst_kind(spec)
    w = int(live[np.argmin(v[live])] if kind == "min" else live[np.argmax(v[live])])
    wi = worst_interval(sb, kind, alpha)
    gi = gap_interval(sb, alpha)
    gap = float(np.max(v[live]) - np.min(v[live]))
    return WindowMetric(
        metric=spec.name, by_slice=by_slice, pooled=pooled,
        worst_slice=_estimate(float(v[w]), wi.low, wi.high, wi.method, slice=slices[w]),
        max_minus_min=_estimate(gap, gi.low, gi.high, gi.method) if len(live) >= 2 else Estimate(value=json_number(gap)),
    )


def window_result(wc: WindowCells, alpha: float, min_group_size: int, metrics: dict[str, MetricSpec]) -> WindowResult:
    """One window: every metric of the catalogue `metrics` (the suite's rubric), in its order."""
    return WindowResult(
        window=wc.window, n=int(wc.counts.sum()),
        units=int((wc.counts.sum(axis=1) > 0).sum()) if wc.clustered else None,
        underpowered=underpowered(wc, min_group_size),
        metrics=[window_metric(counts_of(wc, spec), spec, wc.slices, alpha) for spec in metrics.values()],
    )


def _value(rule: DecisionRule, m: WindowMetric) -> Estimate:
    if rule.statistic == "worst_slice":
        return m.worst_slice
    return m.max_minus_min if rule.statistic == "max_minus_min" else m.pooled


def rule_checks(rules: list[DecisionRule], scopes: dict[str, tuple[WindowCells, WindowResult]], *, alpha: float,
                min_group_size: int, gate_on: str, metrics: dict[str, MetricSpec]) -> list[RuleCheck]:
    """Every absolute rule in each scope it applies to: `each_family` → every window, `overall` → `overall`."""
    out: list[RuleCheck] = []
    for rule in rules:
        if rule.kind != "absolute":
            continue
        spec = metrics[rule.metric]
        names = [OVERALL] if rule.scope == "overall" else [s for s in scopes if s != OVERALL]
        ccs = {name: counts_of(scopes[name][0], spec) for name in names}
        ivs = rule_intervals(rule, spec, ccs, alpha)  # type: ignore[arg-type]
        for name in names:
            _wc, wr = scopes[name]
            est = _value(rule, next(m for m in wr.metrics if m.metric == rule.metric))
            iv, tail = ivs[name]
            exact = (iv.low, iv.high) if math.isfinite(iv.low) and math.isfinite(iv.high) else None
            state, fired, reason = check_state(rule, math.nan if est.value is None else est.value, exact,
                                               underpowered=bool(wr.underpowered), gate_on=gate_on)  # type: ignore[arg-type]
            if wr.underpowered:
                reason = (f"underpowered: slice{'s' if len(wr.underpowered) > 1 else ''} {', '.join(wr.underpowered)} "
                          f"{'have' if len(wr.underpowered) > 1 else 'has'} fewer records (or units) than min_group_size "
                          f"{min_group_size}")
            out.append(RuleCheck(
                rule=rule.id, scope=name, metric=rule.metric, statistic=rule.statistic, value=est.value,
                interval=None if exact is None else [json_number(exact[0], 9), json_number(exact[1], 9)],
                threshold=rule.threshold, comparator=rule.comparator, fired=fired, state=state, reason=reason,
                worst_slice=est.slice, n=wr.n, tail=json_number(tail),
            ))
    return out
