"""Pure renderings of a `MonitorRun`: monitor.json, summary.md, junit.xml and the console lines.

Every output opens with the same verdict line as `run` (`fairness.report._render.gate_line`) and
lists the same caveats; none holds log text unless `--examples` put some into the record.
"""

from __future__ import annotations

from fairness._util.canonical import compact_json
from fairness.monitor._results import MonitorRun
from fairness.report._render import _ci, _fmt, cap_summary, checks_counted, gate_line, head_words, regression_words


def monitor_json(run: MonitorRun) -> str:
    return compact_json(run.model_dump(mode="json")) + "\n"


def against(run: MonitorRun) -> str:
    ref = run.reference
    if ref.kind == "previous":
        return "the previous window"
    if ref.kind == "window":
        return f"window {ref.window}"
    return f"the grid audit of {ref.model_id} ({ref.suite})"


def verdict_line(run: MonitorRun) -> str:
    g = run.gate
    head = head_words(g, run.rules).replace("a decision rule", "a decision rule in a window")
    reg = None if g.regression_state is None else regression_words(g, run.regressions, against(run))
    return gate_line(g, head, reg, compared="drift")


def drift_line(run: MonitorRun) -> str:
    if not run.changes:
        return "no window has a reference to compare with"
    if not run.drift:
        return f"no confident drift against {against(run)} in any window"
    return f"drift against {against(run)} in {len(run.drift)} window(s): {', '.join(run.drift)}"


def summary_md(run: MonitorRun) -> str:
    s = run.source
    parts = [f"## Fairness monitor: `{run.suite.name}` rules on production logs", "", verdict_line(run), ""]
    if run.gate.reasons:
        parts += ["<details><summary>Why</summary>", ""] + [f"- {r}" for r in run.gate.reasons[:40]] + ["", "</details>", ""]
    how = "every record" if s.sample == 1 else f"1/{s.sample}, by the md5 of `{s.mapping.id}`"
    parts += [f"{s.rows_sampled} of {s.rows_read} records sampled ({how}) from "
              f"{s.files} {s.format} file(s), windowed by {s.window}; {len(run.windows)} window(s). "
              f"{drift_line(run)[0].upper()}{drift_line(run)[1:]}.", ""]
    if run.rules:
        parts += [f"Rule checks: {checks_counted(run.gate, run.rules)}.", ""]
    metrics = sorted({c.metric for c in run.rules} | {c.metric for c in run.regressions})
    if not metrics and run.windows:  # no rule names one: the rubric's first metric
        metrics = [run.windows[0].metrics[0].metric]
    for metric in metrics:
        parts += [f"### `{metric}` per window and slice", ""]
        slices = run.slices
        parts += ["| window | n | " + " | ".join(slices) + " | worst slice | gap |",
                  "|---|---|" + "---|" * len(slices) + "---|---|"]
        for w in run.windows:
            m = next(x for x in w.metrics if x.metric == metric)
            cells = [f"{_fmt(m.by_slice[sl].value)}{_ci(m.by_slice[sl].ci)}" if sl in m.by_slice else "–" for sl in slices]
            flag = " ❔" if w.underpowered else ""
            parts.append(f"| {w.window}{flag} | {w.n} | " + " | ".join(cells)
                         + f" | {_fmt(m.worst_slice.value)}{_ci(m.worst_slice.ci)} | {_fmt(m.max_minus_min.value)}{_ci(m.max_minus_min.ci)} |")
        parts.append("")
    flagged = [c for c in run.changes if c.verdict == "regressed"]
    if flagged:
        parts += ["### Drift flags", "", "| window | metric | statistic | slice | reference | window value | change [95% CI] |",
                  "|---|---|---|---|---|---|---|"]
        for c in flagged[:60]:
            parts.append(f"| {c.scope.split('=', 1)[1]} | {c.metric} | {c.statistic} | {c.slice or ''} | {_fmt(c.base)} | "
                         f"{_fmt(c.head)} | {c.change:+.3f}{_ci(c.ci)} |")
        parts.append("")
    if run.caveats:
        parts += ["### Caveats", ""] + [f"- **{c.code}**: {' '.join(c.message.split())}" for c in run.caveats] + [""]
    parts += ["### What the numbers are about", "", f"- Estimand: {run.estimand}.", *(f"- {k}: {v}" for k, v in run.methods.items()), ""]
    parts += ["_No log text is written to these outputs" + (" except the examples in monitor.json (`--examples`)._" if run.examples else "._"), ""]
    return cap_summary("\n".join(parts))


def junit(run: MonitorRun) -> str:
    from fairness.report._junit import junit_document

    return junit_document(f"{run.suite.name} on production logs", run.gate, run.rules, run.regressions,
                          against(run), model="production logs", suffix=" (against the reference)")
