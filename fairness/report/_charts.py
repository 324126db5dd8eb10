"""Per-family chart data and the summary's Mermaid charts.

Mermaid's xychart draws every `bar` series at the same x, on top of each other
(mermaid-js/mermaid#7392), so several families in one chart hide all but the tallest.
Hence one small chart per family with a single bar series: no two bars can overlap.
Both the Markdown charts and card.html read the same `FamilySeries`, so they show the
same numbers.
"""

from __future__ import annotations

import re
from typing import NamedTuple

from fairness.audit._audit import Estimate, FairnessRun

_UNSAFE = re.compile(r'[\x00-\x1f\x7f"`\\]')


class FamilySeries(NamedTuple):
    """One family's per-slice estimates of one metric, with the rule that judges it."""

    family: str
    name: str
    state: str
    """The family's gate state, whatever states the gate knows (pass, fail, inconclusive, …)."""
    points: tuple[tuple[str, Estimate], ...]
    """(slice, estimate) in the run's slice order; an estimate's value is None when undefined."""
    threshold: float | None


def deciding_metric(run: FairnessRun) -> str:
    """The metric of the first rule check that did not pass (else of the first rule)."""
    checks = [c for c in run.rules if c.state != "pass"] or run.rules
    return checks[0].metric if checks else "stereotype_kw_rate"


def family_series(run: FairnessRun, metric: str) -> list[FamilySeries]:
    m = next((m for m in run.metrics if m.metric == metric), None)
    if m is None:
        return []
    out = []
    for f in run.families:
        scope = f"family={f.family}"
        sr = m.scopes.get(scope)
        if sr is None:
            continue
        rule = next((c for c in run.rules if c.metric == metric and c.scope == scope), None)
        rule = rule or next((c for c in run.rules if c.metric == metric), None)
        points = tuple((s, sr.by_slice[s]) for s in run.slices if s in sr.by_slice)
        out.append(FamilySeries(f.family, f.name, f.state, points, rule.threshold if rule else None))
    return out


def _label(text: str, limit: int = 60) -> str:
    """Text safe inside a Mermaid quoted string and a Markdown fence."""
    text = _UNSAFE.sub("'", text).strip()
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _num(x: float) -> str:
    return f"{round(x, 4):g}"


def mermaid_charts(run: FairnessRun, metric: str) -> str:
    """One xychart per family (x = slices, one bar series, the threshold as a line) and a caption."""
    series = family_series(run, metric)
    values = [e.value for s in series for _, e in s.points if e.value is not None]
    thresholds = [s.threshold for s in series if s.threshold is not None]
    top = round(max(values + thresholds + [0.01]) * 1.15, 4)
    blocks, missing = [], []
    for s in series:
        shown = [(sl, e.value) for sl, e in s.points if e.value is not None]
        missing += [f"{s.family} {sl}" for sl, e in s.points if e.value is None]
        if not shown:
            continue
        lines = [
            "```mermaid",
            '%%{init: {"xyChart": {"width": 560, "height": 260}, '
            '"themeVariables": {"xyChart": {"plotColorPalette": "#4e79a7, #d62728"}}}}%%',
            "xychart-beta",
            f'    title "{_label(s.family)} ({_label(s.name, 40)}): {_label(s.state)}"',
            "    x-axis [" + ", ".join(f'"{_label(sl)}"' for sl, _ in shown) + "]",
            f'    y-axis "{_label(metric)}" 0 --> {_num(top)}',
            "    bar [" + ", ".join(_num(v) for _, v in shown) + "]",
        ]
        if s.threshold is not None:
            lines.append("    line [" + ", ".join(_num(s.threshold) for _ in shown) + "]")
        blocks.append("\n".join([*lines, "```"]))
    if not blocks:
        return f"_No slice of `{metric}` has a value in any family._"
    caption = (
        f"One chart per prompt family, all on the same y scale (0 to {_num(top)}): each blue bar is the point "
        f"estimate of `{metric}` for one slice in that family — one bar per slice, none stacked or hidden."
    )
    if thresholds:
        caption += " The red line is the rule's threshold" + (
            f" {_num(thresholds[0])}." if len(set(thresholds)) == 1 else " (per family)."
        )
    caption += (
        " Bars are point estimates only: the per-family table gives the worst slice's 95% interval, and card.html"
        " draws every slice's interval."
    )
    if missing:
        caption += " Not drawn (undefined: too few rows): " + ", ".join(_label(x) for x in missing) + "."
    return "\n\n".join(blocks) + "\n\n" + caption
