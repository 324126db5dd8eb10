"""Drift: each window's change against a reference, with the base-vs-head diff's intervals and regression rule.

The reference of a window is the window before it (`previous`), one chosen window (`window`),
or a grid audit's results.json (`results`, its `overall` scope). Each change is the diff's
(`side_change`: each side's exact interval for the statistic, combined by MOVER), the two sides
taken as independent (r = 0): windows hold different records, and a unit seen in both adds a
positive correlation, which only narrows the true interval. Per-slice changes combine the two
slices' own intervals the same way. The flags are simultaneous per metric (Bonferroni over the
windows, and slices, of each statistic: `changes`). Regression rules are the diff's
(`regression_checks_over`: Holm across windows, the one gate rule). A window or reference with
a slice below `min_group_size` makes its changes and checks `undefined`, never a pass.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from fairness._util.canonical import json_number
from fairness._util.errors import FairnessError
from fairness.audit._diff import Change, change_verdict, regression_checks_over, side_change
from fairness.audit._intervals import CellCounts, SliceBounds, mover
from fairness.audit._results import RegressionCheck
from fairness.monitor._results import Reference
from fairness.monitor._stats import WindowCells
from fairness.monitor._windows import counts_of, scope_of
from fairness.score._catalog import MetricSpec
from fairness.suite._rules import DecisionRule

STATISTICS = ("slice", "worst_slice", "max_minus_min")


@dataclass(frozen=True)
class FixedCounts(CellCounts):
    """A grid audit's per-slice counts read back from its results.json, with the design effects it reported."""

    deffs: np.ndarray = field(default_factory=lambda: np.zeros(0))
    pooled_deff: float = 1.0

    def design(self) -> tuple[np.ndarray, float]:
        return self.deffs, math.nan

    def pooled(self) -> FixedCounts:
        return FixedCounts(self.sums.sum(axis=1, keepdims=True), self.counts.sum(axis=1, keepdims=True), self.kind,
                           np.array([self.pooled_deff]), self.pooled_deff)


@dataclass(frozen=True)
class RefSide:
    """One reference: a label for the reasons, counts per metric, and its underpowered slices."""

    label: str
    counts: Callable[[MetricSpec], CellCounts]
    underpowered: list[str]


def parse_reference(value: str) -> tuple[str, str | None]:
    """`previous`, `window:LABEL`, or a path to a run directory or its results.json."""
    if value == "previous":
        return "previous", None
    if value.startswith("window:"):
        label = value.split(":", 1)[1]
        if not label:
            raise FairnessError("--reference window:LABEL needs a window label, e.g. window:2026-01-05")
        return "window", label
    return "results", value


def grid_reference(path: str, slices: list[str], min_group_size: int) -> tuple[Reference, RefSide]:
    """A grid audit's `overall` scope as a reference over the logs' `slices` (read from its results.json)."""
    rp, results = read_grid_results(path)
    by_metric = {m.get("metric"): m for m in results.get("metrics", []) if isinstance(m, dict)}
    shared = [s for s in slices if s in results["slices"]]
    if not shared:
        raise FairnessError(f"`{rp}` audits slices {', '.join(results['slices'])}; the logs have "
                            f"{', '.join(slices)}: none in common to compare")

    def counts(spec: MetricSpec) -> CellCounts:
        scope = by_metric.get(spec.name, {}).get("scopes", {}).get("overall")
        if not isinstance(scope, dict):
            raise FairnessError(f"`{rp}` has no overall scope for metric `{spec.name}`")
        x, n, deff = np.zeros(len(slices)), np.zeros(len(slices)), np.ones(len(slices))
        for i, s in enumerate(slices):
            est = scope.get("by_slice", {}).get(s)
            if isinstance(est, dict) and est.get("value") is not None and est.get("n"):
                n[i] = float(est["n"])
                x[i] = est["value"] * n[i]
                x[i] = round(x[i]) if spec.kind == "rate" else x[i]
                deff[i] = float(est.get("deff") or 1.0)
        pooled = scope.get("pooled", {}).get("deff") or 1.0
        return FixedCounts(x[None, :], n[None, :], spec.kind, deff, float(pooled))

    small = [s for s in shared if _grid_n(by_metric, s) < min_group_size]
    ref = Reference(kind="results", suite=results["suite"]["name"], model_id=results["recordings"]["model_id"])
    return ref, RefSide(f"the grid audit of {ref.model_id}", counts, small)


def read_grid_results(path: str) -> tuple[Path, dict]:
    """A results.json alone (no transcripts needed: the monitor reads its per-slice counts only)."""
    from fairness._util.io import load_json
    from fairness.audit._diff import check_schema

    rp = Path(path)
    results = load_json(rp, missing=f"no results at `{rp}` (--reference takes previous, window:LABEL or a results.json)",
                        what="results")
    check_schema(rp, results)
    for key, sub in (("suite", "name"), ("recordings", "model_id")):
        if not isinstance(results.get(key), dict) or sub not in results[key]:
            raise FairnessError(f"`{rp}` lacks `{key}.{sub}` (results of an older version? rerun `run` on it)")
    return rp, results


def _grid_n(by_metric: dict, s: str) -> float:
    m: dict[str, Any] = next(iter(by_metric.values()), {})
    est = m.get("scopes", {}).get("overall", {}).get("by_slice", {}).get(s) or {}
    return float(est.get("n") or 0)


def window_side(wc: WindowCells, small: list[str]) -> RefSide:
    return RefSide(f"window {wc.window}", lambda spec: counts_of(wc, spec), small)


def references(kind: str, label: str | None, windows: dict[str, WindowCells], small: dict[str, list[str]],
               grid: RefSide | None) -> dict[str, RefSide]:
    """Each window's reference (windows without one are left out)."""
    names = list(windows)
    if kind == "previous":
        return {w: window_side(windows[p], small[p]) for p, w in itertools.pairwise(names)}
    if kind == "window":
        if label not in windows:
            raise FairnessError(f"--reference window:{label}: no such window (windows: {', '.join(names) or 'none'})")
        return {w: window_side(windows[label], small[label]) for w in names if w != label}
    assert grid is not None
    return dict.fromkeys(names, grid)


def changes(windows: dict[str, WindowCells], refs: dict[str, RefSide], small: dict[str, list[str]],
            alpha: float, metrics: dict[str, MetricSpec]) -> list[Change]:
    """Every harm or good metric's per-slice, worst-slice and gap change of each window against its reference.

    A drift flag is an alarm, so each metric's flags hold simultaneously at 1 − α: each change's
    interval is at 1 − α/m, m the number of changes of its statistic (windows × slices for a
    per-slice change, windows for a worst-slice or gap change; Bonferroni)."""
    out: list[Change] = []
    slices = next(iter(windows.values())).slices if windows else []
    a_slice, a_stat = alpha / max(len(refs) * len(slices), 1), alpha / max(len(refs), 1)
    for w, ref in refs.items():
        wc = windows[w]
        for spec in metrics.values():
            if spec.higher_is_worse is None:
                continue
            ch, cb = counts_of(wc, spec), ref.counts(spec)
            bad = set(small[w]) | set(ref.underpowered)
            out += _slice_changes(cb, ch, spec, wc.slices, bad, scope_of(w), a_slice)
            for statistic in ("worst_slice", "max_minus_min"):
                pb, ph, d, lo, hi, wh = side_change(cb, ch, spec, statistic, a_stat)
                verdict = "undefined" if bad or not (math.isfinite(lo) and math.isfinite(hi)) else change_verdict(spec, statistic, lo, hi)
                out.append(Change(metric=spec.name, scope=scope_of(w), statistic=statistic,
                                  slice=wc.slices[wh] if wh is not None and statistic == "worst_slice" else None,
                                  base=json_number(pb), head=json_number(ph), change=json_number(d),
                                  ci=[json_number(lo), json_number(hi)], verdict=verdict))
    return out


def _slice_changes(cb: CellCounts, ch: CellCounts, spec: MetricSpec, slices: list[str], bad: set[str], scope: str,
                   alpha: float) -> list[Change]:
    """Each slice's change: its two sides' 1 − alpha intervals combined by MOVER (independent sides)."""
    sb, sh = SliceBounds.of(cb), SliceBounds.of(ch)
    (lb, ub), (lh, uh) = (sb.lo(alpha / 2), sb.hi(alpha / 2)), (sh.lo(alpha / 2), sh.hi(alpha / 2))
    vb, vh = cb.values, ch.values
    out = []
    for i, s in enumerate(slices):
        if cb.n[i] == 0 or ch.n[i] == 0:
            continue
        d = float(vh[i] - vb[i])
        ends = [float(e) for e in (vh[i], lh[i], uh[i], vb[i], lb[i], ub[i])]
        if all(math.isfinite(e) for e in ends):
            lo, hi = mover(d, ends[0] - ends[1], ends[2] - ends[0], ends[3] - ends[4], ends[5] - ends[3], 0.0)
        else:
            lo, hi = math.nan, math.nan
        verdict = "undefined" if s in bad or not math.isfinite(lo) else change_verdict(spec, "slice", lo, hi)
        out.append(Change(metric=spec.name, scope=scope, statistic="slice", slice=s, base=json_number(float(vb[i])),
                          head=json_number(float(vh[i])), change=json_number(d), ci=[json_number(lo), json_number(hi)],
                          verdict=verdict))
    return out


def regressions(rules: list[DecisionRule], windows: dict[str, WindowCells], refs: dict[str, RefSide],
                small: dict[str, list[str]], alpha: float, metrics: dict[str, MetricSpec]) -> list[RegressionCheck]:
    """Every regression rule in each window that has a reference (either scope: a window is the unit of change)."""
    out: list[RegressionCheck] = []
    if not refs:
        return out
    slices = next(iter(windows.values())).slices
    for rule in rules:
        if rule.kind != "regression":
            continue
        spec = metrics[rule.metric]
        statistic = "max_minus_min" if rule.statistic == "max_minus_min" else "worst_slice"
        low = rule.comparator in (">", ">=")
        live = [w for w in refs if not small[w] and not refs[w].underpowered]

        def at(scope: str, tail: float | None, spec: MetricSpec = spec, statistic: str = statistic, low: bool = low):
            w = scope.split("=", 1)[1]
            return side_change(refs[w].counts(spec), counts_of(windows[w], spec), spec, statistic, alpha,
                               breach_low=low, tail=tail)

        done = {c.scope: c for c in regression_checks_over(rule, statistic, [scope_of(w) for w in live], at, slices, alpha,
                                                           "against its reference")}
        for w in refs:
            if scope_of(w) in done:
                out.append(done[scope_of(w)])
                continue
            why = ", ".join(sorted(set(small[w]) | set(refs[w].underpowered)))
            out.append(RegressionCheck(rule=rule.id, scope=scope_of(w), metric=rule.metric, statistic=statistic, slice=None,
                                       base=None, head=None, change=None, ci=None, threshold=rule.threshold,
                                       comparator=rule.comparator, state="undefined",
                                       reason=f"underpowered: slice(s) {why} below min_group_size in the window or its reference"))
    return out
