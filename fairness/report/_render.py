"""Report: pure renderings of a `FairnessRun` — results.json, summary.md, card.yaml, card.md."""

from __future__ import annotations

import datetime as _dt
import json
import math
import re
import shlex
from typing import Any

import yaml

from fairness._util.canonical import compact_json
from fairness.audit._audit import FairnessRun, MetricResult
from fairness.audit._gate import Gate
from fairness.audit._results import AgreementResult, MetricDefinition, RegressionCheck, RuleCheck
from fairness.report._charts import deciding_metric, mermaid_charts
from fairness.report._json import metrics_json
from fairness.suite._rules import DecisionRule
from fairness.suite._suite import Suite

SUMMARY_CAP = 1024 * 1024 - 1
"""GitHub rejects a job summary of 1 MiB or more."""

ICONS = {"pass": "✅", "fail": "❌", "inconclusive": "⚠️", "undefined": "❔"}


def _fmt(x: float | None, digits: int = 3) -> str:
    if x is None:
        return "n/a"
    return f"{x:.{digits}f}".rstrip("0").rstrip(".") if x != 0 else "0.0"


def _ci(ci: list[float | None] | None) -> str:
    if not ci or ci[0] is None or ci[1] is None:
        return ""
    return f" [{_fmt(ci[0])}, {_fmt(ci[1])}]"


def results_json(run: FairnessRun) -> str:
    """`json.dumps(run.model_dump(mode="json"), ensure_ascii=False, allow_nan=False, separators=(",", ":"))`
    and a newline: each top-level field encoded as it is there, the metrics (~97% of the file) by
    `metrics_json`, the same text without the dump."""
    data = run.model_dump(mode="json", exclude={"metrics"})
    keys = list(data)
    keys.insert(list(type(run).model_fields).index("metrics"), "metrics")
    fields = [compact_json(k) + ":" + (metrics_json(run.metrics) if k == "metrics" else compact_json(data[k])) for k in keys]
    return "{" + ",".join(fields) + "}\n"


_HEAD_WORDS = {
    ("pass", "interval"): "every decision rule is met with confidence",
    ("pass", "point"): "no decision rule is breached at the point",
    ("fail", "interval"): "a decision rule is breached with confidence",
    ("fail", "point"): "a decision rule is breached at the point",
    **{(state, on): words for on in ("interval", "point") for state, words in (
        ("inconclusive", "the evidence does not settle a decision rule either way"),
        ("undefined", "the rules could not be evaluated (too little data or no rules)"))},
}
_REGRESSION_WORDS = {
    "pass": "no regression rule is breached",
    "fail": "a confident regression",
    "inconclusive": "a possible regression (the change's interval straddles the threshold)",
    "undefined": "the regression rules could not be evaluated",
}


def _head_words(run: FairnessRun) -> str:
    return head_words(run.gate, run.rules)


def head_words(gate: Gate, rules: list[RuleCheck]) -> str:
    """The head's own rules in words (the verdict line's first part)."""
    text = _HEAD_WORDS[(gate.head_state, gate.gate_on)]
    if rules:
        text += f" ({checks_counted(gate, rules)})"
    if gate.head_state == "inconclusive" and any(c.settle is not None for c in rules):
        text += "; see “How many more seeds would settle it”"
    return text


def _regression_words(run: FairnessRun) -> str:
    comp = run.comparison
    assert comp is not None and comp.ran and run.gate.regression_state is not None
    return regression_words(run.gate, comp.checks, comp.base)


def regression_words(gate: Gate, checks: list[RegressionCheck], against: str) -> str:
    """The regression checks against `against` in words."""
    assert gate.regression_state is not None
    counts = (f"{sum(c.state == 'fail' for c in checks)}/{len(checks)} regression checks beyond the threshold with confidence"
              if checks else "the suite has no regression rule")
    return f"{_REGRESSION_WORDS[gate.regression_state]} against {against} ({counts})"


def verdict_line(run: FairnessRun) -> str:
    """The verdict in one line (Markdown): the state, what decided it, the exit code.

    Every output opens with this line; it renders `run.gate` and recomputes nothing. When a
    comparison ran, the part that decided the state (the more severe) comes first."""
    g = run.gate
    return gate_line(g, _head_words(run), None if g.regression_state is None else _regression_words(run))


def gate_line(g: Gate, head: str, regression: str | None, *, compared: str = "base vs head") -> str:
    """The verdict line from a gate and its two parts in words (`head_words`, `regression_words`);
    `run` and `monitor` both open every output with it (`compared` names the comparison)."""
    if regression is None:
        what = head
    else:
        regression_decides = g.state == g.regression_state and g.state != g.head_state
        what = f"{regression}; the head's own rules: {head}" if regression_decides else f"{head}; {compared}: {regression}"
    policy = "" if g.fail_on == "state" else f" (fail-on {g.fail_on})"
    return f"{ICONS[g.state]} **{g.state.upper()}** — {what}. Exit code {g.exit_code}{policy}."


def plain(markdown_line: str) -> str:
    """A Markdown line as console text: no emphasis markers, no emoji."""
    return re.sub(r"[*✅❌⚠️❔]+", "", markdown_line).strip()


def rule_counts(run: FairnessRun) -> str:
    """What the rule checks' counts count (`checks_counted`)."""
    return checks_counted(run.gate, run.rules)


def checks_counted(gate: Gate, rules: list[RuleCheck]) -> str:
    """What the rule checks' counts count: point values beyond the threshold, and (interval gate)
    checks whose interval lies beyond it. A point breach alone is not a failure under the interval
    gate, so "fired" next to an inconclusive verdict would read as a contradiction."""
    point = sum(c.fired for c in rules)
    text = f"{point}/{len(rules)} rule checks beyond the threshold at the point estimate"
    if gate.gate_on == "interval":
        text += f"; {sum(c.state == 'fail' for c in rules)} with confidence"
    return text


def comparison_line(run: FairnessRun) -> str:
    """The comparison in one console line; empty when none was asked for."""
    comp = run.comparison
    if comp is None:
        return ""
    if not comp.ran:
        return f"base vs head skipped: {comp.note}"
    return f"base vs head: {_regression_words(run)}; every metric's change in {comp.diff_path}"


def comparison_md(run: FairnessRun, *, icons: bool = True) -> str:
    """Base vs head as Markdown: one row per regression check, the head's worst slice named.
    `icons=False` leaves out the state emoji (card.html colours the states instead)."""
    icon = ICONS if icons else dict.fromkeys(ICONS, "")
    comp = run.comparison
    if comp is None:
        return ""
    if not comp.ran:
        return f"### Base vs head\n\n_Skipped: {comp.note}_\n"
    mark = icon[comp.state or "pass"]
    lines = ["### Base vs head", "",
             f"{mark + ' ' if mark else ''}{_regression_words(run)}; "
             f"{'paired by grid cell' if comp.paired else 'unpaired: the grids differ'}.", ""]
    if comp.checks:
        lines += ["| rule | scope | worst slice (head) | base → head | change [CI] | threshold | state |",
                  "|---|---|---|---|---|---|---|"]
        for c in comp.checks:
            change = "n/a" if c.change is None else f"{c.change:+.3f}"
            ci = f" [{c.ci[0]:+.3f}, {c.ci[1]:+.3f}]" if c.ci and None not in c.ci else ""
            lines.append(f"| {c.rule} | {c.scope} | {c.slice or 'n/a'} | {_fmt(c.base)} → {_fmt(c.head)} | {change}{ci} "
                         f"| {c.comparator} {c.threshold:g} | {f'{icon[c.state]} ' if icon[c.state] else ''}{c.state} |")
        lines += ["", "The change's interval combines the two runs' exact intervals (MOVER); its breaching end is "
                      "Holm-adjusted across the families a rule quantifies over."]
    if comp.not_compared:
        lines += ["", "Not compared (the base's and the head's rubrics differ): " + "; ".join(comp.not_compared) + "."]
    return "\n".join(lines) + "\n"


def rules_as_checked(run: FairnessRun, suite: Suite) -> list[DecisionRule]:
    """The suite's rules with the thresholds the run checked them at (after `--threshold` or
    `--regression-threshold`), so a card never states a threshold the verdict did not use."""
    checked = {c.rule: c.threshold for c in run.rules}
    if run.comparison is not None:
        checked.update({c.rule: c.threshold for c in run.comparison.checks})
    return [r.model_copy(update={"threshold": checked[r.id]}) if r.id in checked else r for r in suite.rules]


def caveat_lines(run: FairnessRun) -> list[str]:
    """Every caveat as one Markdown line naming its code (and metric and scope): the one list that
    summary.md, card.md, card.yaml and card.html all render."""
    return [f"**{c.code}**{f' ({c.metric}, {c.scope})' if c.metric else ''}: {' '.join(c.message.split())}"
            for c in run.caveats]


def _metric(run: FairnessRun, name: str) -> MetricResult | None:
    return next((m for m in run.metrics if m.metric == name), None)


PAPER_COLUMNS = (("worst_slice_stereotype", "stereotype_kw_rate", "worst_slice"),
                 ("worst_slice_pilot_harm", "pilot_harm_rate", "worst_slice"),
                 ("refusal_delta", "refusal_or_deflection_rate", "max_minus_min"))
"""The paper's per-family table: (column, metric, statistic)."""


def family_columns(run: FairnessRun) -> list[tuple[str, str, str]]:
    """The per-family table's columns: the paper's where the rubric defines its metrics, else the worst
    slice of each metric a rule checks (a suite's own rubric), else of each harm metric."""
    names = {m.metric for m in run.metrics}
    if all(metric in names for _, metric, _ in PAPER_COLUMNS):
        return list(PAPER_COLUMNS)
    chosen = list(dict.fromkeys(c.metric for c in run.rules)) or [m.metric for m in run.metrics if m.higher_is_worse]
    return [(f"worst_slice_{metric}", metric, "worst_slice") for metric in chosen if metric in names]


def family_value(run: FairnessRun, metric: str, statistic: str, family: str) -> float | None:
    m = _metric(run, metric)
    sr = None if m is None else m.scopes.get(f"family={family}")
    return None if sr is None else getattr(sr, statistic).value


def worst_slice_interval(run: FairnessRun, metric: MetricResult, scope: str) -> list[float | None] | None:
    """The rule check's interval (Holm-adjusted across families) where a rule gates this value, else the scope's."""
    check = next((c for c in run.rules if c.metric == metric.metric and c.scope == scope and c.statistic == "worst_slice"), None)
    if check is not None:
        return check.interval
    return metric.scopes[scope].worst_slice.ci if scope in metric.scopes else None


def intervals_note(run: FairnessRun) -> str:
    """What the table's intervals are (Markdown), shared by summary.md and card.html."""
    return (f"**Estimand** — {run.estimand}. Intervals are exact (Korn–Graubard) 95% bounds, simultaneous over slices "
            "and, where a rule gates the value, Holm-adjusted across families; `decision` is the paper's point rule.")


def family_table_md(run: FairnessRun) -> str:
    columns = family_columns(run)
    lines = [
        "| family | " + " | ".join(c for c, _, _ in columns) + " | decision | gate |",
        "|---|" + "---|" * len(columns) + "---|---|",
    ]
    for row in run.families:
        scope = f"family={row.family}"
        cells = []
        for _, metric, statistic in columns:
            m = _metric(run, metric)
            ci = worst_slice_interval(run, m, scope) if m is not None and statistic == "worst_slice" else None
            cells.append(f"{_fmt(family_value(run, metric, statistic, row.family))}{_ci(ci)}")
        lines.append(f"| {row.family} | " + " | ".join(cells) + f" | {row.decision} | {ICONS[row.state]} {row.state} |")
    return "\n".join(lines)


def worst_slices_md(run: FairnessRun) -> str:
    lines = ["| metric | scope | worst slice | value [95% CI] | max−min gap [95% CI] | p (Holm) |", "|---|---|---|---|---|---|"]
    for m in run.metrics:
        if m.higher_is_worse is not True:
            continue
        for scope in ["overall"] + [f"family={f.family}" for f in run.families]:
            sr = m.scopes.get(scope)
            if sr is None or sr.worst_slice.value is None:
                continue
            if sr.worst_slice.value == 0:
                continue
            lines.append(
                f"| {m.metric} | {scope} | {sr.worst_slice.slice} | {_fmt(sr.worst_slice.value)}{_ci(sr.worst_slice.ci)} "
                f"| {_fmt(sr.max_minus_min.value)}{_ci(sr.max_minus_min.ci)} | {_fmt(sr.p_holm)} |"
            )
    return "\n".join(lines) if len(lines) > 2 else "_No harm metric fired in any slice._"


def settle_md(run: FairnessRun) -> str:
    """One row per inconclusive rule check: rows and seeds for 80% power, detectable values now."""
    rows = [c for c in run.rules if c.settle is not None]
    if not rows:
        return ""
    lines = ["| rule | scope | value [CI] | threshold | toward | rows/slice (now) | seeds/cell | fails at ≥ | passes at ≤ |",
             "|---|---|---|---|---|---|---|---|---|"]
    for c in rows:
        st = c.settle
        assert st is not None
        rows_txt = "too near the threshold to size" if st.rows_per_slice is None else f"{st.rows_per_slice} ({st.rows_per_slice_now})"
        lines.append(f"| {c.rule} | {c.scope} | {_fmt(c.value)}{_ci(c.interval)} | {c.threshold:g} | {st.toward} | {rows_txt} "
                     f"| {st.seeds if st.seeds is not None else 'n/a'} | {_fmt(st.detectable)} | {_fmt(st.passable)} |")
    return "\n".join(lines) + ("\n\n80% power of the exact test the gate runs (each slice's Clopper–Pearson or Garwood bound at "
                               "the effective n, at the check's Holm/Šidák level; a pass needs every slice), with each slice "
                               "at its 75% confidence bound toward the threshold and the scope's design effect; "
                               "`fails at`: the worst slice's true value that fails with 80% power at the current size; "
                               "`passes at`: the value every slice must be at or below to pass with 80% power.")


def provenance_md(run: FairnessRun) -> str:
    r = run.recordings
    rows = [
        ("suite", f"`{run.suite.name}` v{run.suite.version} (hash `{run.suite.hash[:12]}`)"),
        ("recordings", f"`{r.path}` — {r.rows} rows, manifest sha256 `{r.manifest_sha256[:12]}`"),
        ("model", f"`{r.model_id}` via {r.engine}" + ("" if r.is_audited_model else " — **test model, not the audited model**")),
        ("scorer", f"lexical rubric `{run.scorer.rubric_version}` ({rubric_source(run)}), mode `{run.scorer.mode}`"),
        ("statistics", f"exact intervals at α={run.options.alpha} decide the gate (no resampling); "
                       f"P={run.options.permutations} permutations per test (reported, not gated), seed {run.options.seed}; "
                       f"B={run.options.bootstrap} bootstrap resamples for the peer evaluators only"),
        ("tool", f"{run.tool.name} {run.tool.version}"),
    ]
    return "| | |\n|---|---|\n" + "\n".join(f"| {a} | {b} |" for a, b in rows)


def summary_md(run: FairnessRun, *, extra_sections: list[str] | None = None) -> str:
    parts = [f"## Fairness audit: `{run.suite.name}` on `{run.recordings.model_id}`", "", verdict_line(run), ""]
    if run.gate.reasons:
        parts += ["<details><summary>Why</summary>", ""] + [f"- {r}" for r in run.gate.reasons[:40]] + ["", "</details>", ""]
    comparison = comparison_md(run)
    if comparison:
        parts += [comparison]
    parts += ["### Per-family results", "", family_table_md(run), ""]
    parts += [intervals_note(run)]
    settle = settle_md(run)
    if settle:
        parts += ["", "### How many more seeds would settle it", "", settle]
    if run.stability:
        parts += ["", "### Verdict stability", ""] + [f"- {s.summary}" for s in run.stability]
    metric = deciding_metric(run)
    parts += ["", f"### `{metric}` per slice", "", mermaid_charts(run, metric), ""]
    parts += ["### Worst slices", "", worst_slices_md(run), ""]
    var = run.variance.get(metric)
    if var:
        share = var.get("slice", 0.0)
        parts += [f"Variance decomposition of `{metric}`: the group (slice) effect is {share:.1%} of the variation; "
                  + ", ".join(f"{k} {v:.1%}" for k, v in sorted(var.items(), key=lambda kv: -kv[1]) if k != "slice") + ".", ""]
    if run.agreement:
        parts += ["### Agreement of scorers", "", agreement_md(run.agreement)]
    caveats = caveat_lines(run)
    if caveats:
        parts += ["### Caveats", ""] + [f"- {c}" for c in caveats] + [""]
    for section in extra_sections or []:
        if section:
            parts += [section, ""]
    parts += ["### Provenance", "", provenance_md(run), ""]
    return cap_summary("\n".join(parts))


def cap_summary(text: str, cap: int = SUMMARY_CAP) -> str:
    """Keep a summary under GitHub's 1 MiB limit, cutting at a line boundary with a note."""
    data = text.encode("utf-8")
    if len(data) <= cap:
        return text
    note = "\n\n_… summary truncated to stay under 1 MiB; see results.json for everything._\n"
    keep = data[: cap - len(note.encode("utf-8"))].decode("utf-8", errors="ignore")
    keep = keep[: keep.rfind("\n")] if "\n" in keep else keep
    return keep + note


# -- Fairness Card ---------------------------------------------------------------------------

_HUB = re.compile(r"^([A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+)")


def card(run: FairnessRun, suite: Suite, *, evaluation_date: str | None = None, replay_command: str | None = None) -> dict[str, Any]:
    """A Fairness Card (core + LLM extension schema) generated from this run. `replay_command` is
    the exact `run` command that reproduces it (`fairness.pipeline._commands`); without it, the card
    names a built-in suite by name and a suite file as `SUITE.yaml` for the reader to fill in."""
    from fairness.report._card_text import card_text
    from fairness.suite._suite import BUILTIN_SUITES

    r = run.recordings
    text = card_text(suite)
    replay = replay_command or shlex.join(["llm-fairness-check", "run", "--suite",
                                           suite.name if suite.name in BUILTIN_SUITES else "SUITE.yaml",
                                           "--recordings", r.path, "--out", "out"])
    hub = _HUB.match(r.model_source or "")
    test_model = not r.is_audited_model
    slices = suite.slice_list
    occupations = next((p.values for ph, p in suite.placeholders.items() if suite.column_for(ph) == "occupation"), None)
    n_prompts = len(suite.templates) * len(slices) * math.prod(len(p.values) for p in suite.placeholders.values())
    columns = family_columns(run)
    rows = [[f.family, *(family_value(run, metric, stat, f.family) for _, metric, stat in columns), f.decision]
            for f in run.families]
    notes = [f"System prompt held fixed at {suite.system_prompt!r}.", f"Recordings replayed from `{r.path}` (engine {r.engine})."]
    if test_model:
        notes.insert(0, r.model_note)
    audit_result: dict[str, Any] = {
        "verdict": plain(verdict_line(run)),
        "gate": run.gate.state,
        "exit_code": run.gate.exit_code,
        "fail_on": run.gate.fail_on,
        "reasons": list(run.gate.reasons),
        "rule_checks": rule_counts(run) if run.rules else "no rule checks",
        "head_state": run.gate.head_state,
    }
    comp = run.comparison
    if comp is not None:
        audit_result["base_vs_head"] = {
            "base": comp.base, "compared": comp.ran, **({"note": comp.note} if not comp.ran else {}),
            **({"state": comp.state, "paired": comp.paired} if comp.ran else {}),
            "regression_checks": [
                {"rule": c.rule, "scope": c.scope, "worst_slice": c.slice, "base": c.base, "head": c.head,
                 "change": c.change, "interval": c.ci, "threshold": c.threshold, "state": c.state, "reason": c.reason}
                for c in comp.checks
            ],
        }
    audit_result.update({
        "verdict_stability": [s.summary for s in run.stability],
        "estimand": run.estimand,
        "caveats": [plain(c) for c in caveat_lines(run)],
        "intervals": run.tests.model_dump(),
        "to_settle": [
            {"rule": c.rule, "scope": c.scope, "toward": c.settle.toward, "rows_per_slice": c.settle.rows_per_slice,
             "seeds_per_cell": c.settle.seeds, "detectable": c.settle.detectable, "passable": c.settle.passable, "note": c.settle.note}
            for c in run.rules if c.settle is not None
        ],
    })
    data: dict[str, Any] = {
        "card_version": "0.1.0",
        "modality": "text",
        "evaluation_date": evaluation_date or _dt.datetime.now(_dt.timezone.utc).date().isoformat(),
        "audit_result": audit_result,
        "system": {
            "name": r.model_id,
            "version": f"recorded {r.created[:10]}",
            "surface": "base-model",
            **({"checkpoint_url": f"https://huggingface.co/{hub.group(1)}"} if hub else {}),
            "description": text.model_description,
            "notes": " ".join(notes),
        },
        "intended_use": {
            "in_scope": list(text.intended_use or []),
            "out_of_scope": list(text.out_of_scope or [])
            + (["Any claim about the audited model: these recordings come from a stand-in test model."] if test_model else []),
        },
        "contact": text.contact,
        "fairness_scope": _fairness_scope(run),
        "protected_attributes": {
            "slices": [dict(s) for s in slices],
            "operationalisation": f"Attribute appears verbatim in the prompt via {{{suite.insertion.placeholder}}} → "
            f"\"{suite.insertion.template}\"; no post-hoc demographic inference.",
        },
        "prompt_suite": {
            "suite_name": suite.name,
            "suite_hash": suite.hash,
            "families": [
                {"id": f.id, "name": f.name, "description": f.description, "template": f.paraphrases[0], "paraphrases": list(f.paraphrases)}
                for f in suite.families
            ],
            **({"occupations": list(occupations)} if occupations else {}),
            "attribute_insertion_rule": f"{{{suite.insertion.placeholder}}} is replaced by \"{suite.insertion.template}\" with all other tokens unchanged.",
            "total_prompts": n_prompts,
        },
        "decoding": {
            "regimes": [{"name": g.name, "temperature": g.temperature, "top_p": g.top_p, "max_new_tokens": g.max_new_tokens} for g in suite.regimes],
            "seeds_per_prompt": len(suite.seeds),
            "post_processing": "Strip leading/trailing whitespace only.",
        },
        "refusal_handling": _refusal_handling(run),
        "scorer": {
            "type": "lexical-rule",
            "patterns_file": rubric_source(run),
            "thresholds": {f"{c.rule}_threshold": c.threshold for c in run.rules[:1]} or {},
            "mode": run.scorer.mode,
            "rubric_version": run.scorer.rubric_version,
            "rubric_sha256": run.scorer.rubric_sha256,
        },
        "metrics": card_metrics(run),
        "decision_rules": [{"rule": _rule_text(rule), "rationale": rule.rationale or "Set in the suite."}
                           for rule in rules_as_checked(run, suite)]
        + [{"rule": "Report worst-slice values per metric, not just means.", "rationale": "Average and worst-case behaviour can differ by an order of magnitude."}],
        "example_result": {
            "description": "Computed by this run from the replayed recordings.",
            "columns": ["family", *(c for c, _, _ in columns), "decision"],
            "rows": rows,
        },
        "reproducibility": {
            "code_url": "https://github.com/fairness-cards/llm-fairness-check",
            "license": "MIT",
            "data_release": f"{r.path} ({r.rows} records)",
            "seeds": list(suite.seeds),
            "total_samples": run.n_rows,
            "regen_command": replay,
            "replay_command": replay,
            "replay_note": "Run from the directory the audit ran in (the repository's root in CI); "
            "it replays the recordings offline and writes the same results.json (paths aside) into --out.",
        },
    }
    if run.evaluators:
        data["evaluators"] = run.evaluators
    if run.agreement:
        data["agreement"] = [a.model_dump(mode="json") for a in run.agreement]
    return data


def agreement_md(results: list[AgreementResult]) -> str:
    """The agreement pairs: κ with its interval, the confusion counts per slice, and whether the verdict changes."""
    out: list[str] = []
    for a in results:
        c = a.confusion
        out += [f"**`{a.a}` vs `{a.b}`:** Cohen's κ {_fmt(a.kappa)}{_ci(a.interval)} over {c.both + c.only_a + c.only_b + c.neither}"
                f" rows ({a.method}, {a.n_clusters} prompts; agreement {_fmt(a.observed)}; {a.disagreements} disagreements,"
                f" listed in transcripts.jsonl; {c.invalid} rows without a valid score left out).", "",
                f"| slice | both | only `{a.a}` | only `{a.b}` | neither |", "|---|---|---|---|---|"]
        out += [f"| {s} | {x.both} | {x.only_a} | {x.only_b} | {x.neither} |" for s, x in a.by_slice.items()]
        if not a.rules:
            out += ["", "No rule names either metric: the verdict does not depend on which one scores it."]
        else:
            out += ["", "Rules applied to the other metric: "
                    + "; ".join(f"`{r.rule}` [{r.scope}] {r.state} on `{r.metric}`, {r.swapped_state or 'not checked'} "
                                f"on `{r.applied_to}`" for r in a.rules)
                    + f". Head verdict {a.head_state} as run, {a.swapped_head_state} swapped: "
                    + ("**the verdict changes**." if a.verdict_changes else "the verdict does not change.")]
        out += ["", f"_{a.estimand}._", ""]
    return "\n".join(out).rstrip() + "\n"


def _papers_rubric(run: FairnessRun) -> bool:
    from fairness.score._compiled import PAPER_RUBRIC_FILE

    return run.rubric is None or run.rubric.source == PAPER_RUBRIC_FILE


def _fairness_scope(run: FairnessRun) -> dict[str, Any]:
    """The harms the rubric measures: the paper's, or each harm metric of the suite's own rubric."""
    excluded = ["Downstream allocative harms (jobs, credit, services).", "Long-term feedback effects.", "Multi-turn dynamics."]
    if _papers_rubric(run) or run.rubric is None:
        return {
            "representational_harms": [
                "Stereotype-keyword presence in generated text.",
                "Demeaning-keyword presence in generated text.",
                "Title-mention asymmetry across slices.",
                "Identity-salience rate (when the model surfaces the protected attribute).",
            ],
            "access_harms": ["Per-slice refusal and deflection rates (kept-and-scored, not dropped)."],
            "excluded": excluded,
        }
    harms = [f"`{d.name}`: {d.description}" if d.description else f"`{d.name}`" for d in run.rubric.metrics if d.higher_is_worse]
    return {"representational_harms": harms or ["None: the suite's rubric marks no metric as a harm."],
            "access_harms": ["Not measured separately: every output is kept and scored by the suite's rubric."],
            "excluded": excluded}


def _refusal_handling(run: FairnessRun) -> dict[str, Any]:
    """How refusals count: the paper's regexes, or the suite's own refusal metric if it has one."""
    if _papers_rubric(run) or run.rubric is None:
        return {
            "refusal_definition": "Output matches any refusal regex of the rubric (word-boundary, case-insensitive), e.g. \"i can't\", \"i cannot\", \"sorry\".",
            "deflection_definition": "Output matches any deflection regex of the rubric, e.g. \"it depends\", \"avoid stereotypes\".",
            "retention_policy": "kept-and-scored",
        }
    refusal = next((d for d in run.rubric.metrics if "refusal" in d.name), None)
    return {"refusal_definition": definition_text(refusal) if refusal is not None else
            "Not measured: the suite's rubric has no refusal metric; refusals are kept and scored like any other output.",
            "retention_policy": "kept-and-scored"}


def rubric_source(run: FairnessRun) -> str:
    """Where the run's rubric is written: the built-in file, the suite's rubric file, or the suite itself."""
    from fairness.score._rubric import INLINE, PAPER_RUBRIC_FILE

    source = run.rubric.source if run.rubric is not None else PAPER_RUBRIC_FILE
    return "inline in the suite (its `rubric:` key)" if source == INLINE else source


def definition_text(d: MetricDefinition) -> str:
    """One metric's definition in words: what it counts and exactly how it was matched."""
    unit = "share of outputs where" if d.kind == "flag" else "mean per output of"
    if d.source == "list":
        what = "patterns" if d.match == "regex" else "terms"
        how = {"substring": "substrings (non-overlapping occurrences)", "word": "whole words",
               "regex": "Python regexes"}.get(d.match or "", d.match or "")
        listed = ", ".join(json.dumps(t, ensure_ascii=False) for t in d.terms or [])
        core = (f"{'any of' if d.kind == 'flag' else 'the matches of'} list `{d.of[0]}` matches; {what} matched as "
                f"{how}, case-{d.case}: {listed}")
    elif d.source in ("any_of", "all_of"):
        core = f"{'any' if d.source == 'any_of' else 'all'} of the flags {', '.join(f'`{x}`' for x in d.of)} fire"
    elif d.source == "builtin":
        core = f"the built-in column `{d.of[0]}`"
    else:
        core = f"the scores of scorer plug-in `{d.of[0]}`"
    return f"{d.description + ' ' if d.description else ''}Counted as the {unit} {core}."


def card_metrics(run: FairnessRun) -> list[dict[str, Any]]:
    """The card's `metrics`: each metric's definition, with its source, terms, match mode and case rule."""
    if run.rubric is None:  # results of schema < 2.2: the descriptions only
        return [{"name": m.metric, "definition": m.description, "unit": m.kind} for m in run.metrics]
    out = []
    for d in run.rubric.metrics:
        item: dict[str, Any] = {"name": d.name, "definition": definition_text(d), "unit": d.unit, "kind": d.kind,
                                "source": d.source, "of": list(d.of)}
        if d.source == "list":
            item.update({"match": d.match, "case": d.case, "terms": list(d.terms or [])})
        item["higher_is_worse"] = d.higher_is_worse
        out.append(item)
    return out


def _rule_text(rule) -> str:
    return f"Flag when {rule.describe()}."


_DUMPER = getattr(yaml, "CSafeDumper", yaml.SafeDumper)
"""libyaml's emitter where PyYAML has it (same text for the card's plain data, a tenth of the CPU)."""


def card_yaml(card_data: dict[str, Any]) -> str:
    return yaml.dump(card_data, Dumper=_DUMPER, sort_keys=False, allow_unicode=True, width=100)


def card_md(c: dict[str, Any]) -> str:
    s = c["system"]
    ar = c["audit_result"]
    out = [f"# Fairness Card — {s['name']}", "", f"**Verdict:** {ICONS[ar['gate']]} {ar['verdict']}", ""]
    out += [f"- {r}" for r in ar["reasons"][:20]] + ([f"- … {len(ar['reasons']) - 20} more in results.json"] if len(ar["reasons"]) > 20 else [])
    if "base_vs_head" in ar:
        bvh = ar["base_vs_head"]
        if not bvh["compared"]:
            out += ["", f"**Base vs head:** skipped — {bvh['note']}"]
        else:
            out += ["", f"**Base vs head** ({bvh['base']}): `{bvh['state']}`", "",
                    "| rule | scope | worst slice (head) | change [CI] | threshold | state |", "|---|---|---|---|---|---|"]
            for r in bvh["regression_checks"]:
                ci = _ci(r["interval"])
                change = "n/a" if r["change"] is None else f"{r['change']:+.3f}"
                out.append(f"| {r['rule']} | {r['scope']} | {r['worst_slice'] or 'n/a'} | {change}{ci} | {r['threshold']:g} | {r['state']} |")
    if ar["caveats"]:
        out += ["", "**Caveats:**"] + [f"- {x}" for x in ar["caveats"]]
    out += ["", f"_Card version `{c['card_version']}`, modality `{c['modality']}`._",
            f"_Evaluation date: {c['evaluation_date']}._", "", "## System identification",
           f"- **Model / version:** `{s['name']}`, {s['version']}", f"- **Surface:** `{s['surface']}`"]
    if "checkpoint_url" in s:
        out.append(f"- **Checkpoint:** <{s['checkpoint_url']}>")
    out += [f"- **Description:** {s['description']}", f"- **Notes:** {s['notes']}", f"- **Contact:** {c['contact']}",
            "", "## Intended use", "**In-scope:**"] + [f"- {x}" for x in c["intended_use"]["in_scope"]]
    out += ["", "**Out-of-scope:**"] + [f"- {x}" for x in c["intended_use"]["out_of_scope"]]
    fs = c["fairness_scope"]
    out += ["", "## Fairness scope", "**Representational harms:**"] + [f"- {x}" for x in fs["representational_harms"]]
    out += ["", "**Access harms:**"] + [f"- {x}" for x in fs["access_harms"]] + ["", "**Excluded:**"] + [f"- {x}" for x in fs["excluded"]]
    pa = c["protected_attributes"]
    out += ["", "## Protected attributes", f"**Slices ({len(pa['slices'])}):**"]
    out += ["- " + ", ".join(f"`{k}={v}`" for k, v in sl.items()) for sl in pa["slices"]]
    out += ["", f"**Operationalisation:** {pa['operationalisation']}", "", "## Prompt suite", f"**Suite name:** `{c['prompt_suite']['suite_name']}`"]
    for f in c["prompt_suite"]["families"]:
        out += ["", f"### {f['id']} — {f['name']}", f"_{f['description']}_", "", f"Canonical template: `{f['template']}`", "",
                f"Paraphrases ({len(f['paraphrases'])}):"] + [f"- `{p}`" for p in f["paraphrases"]]
    if "occupations" in c["prompt_suite"]:
        out += ["", f"**Occupations:** {', '.join(c['prompt_suite']['occupations'])}"]
    out += [f"**Total prompts:** {c['prompt_suite']['total_prompts']}", "", "## Decoding", "| Regime | Temperature | top_p | max_new_tokens |", "|---|---|---|---|"]
    out += [f"| {g['name']} | {g['temperature']} | {g['top_p']} | {g['max_new_tokens']} |" for g in c["decoding"]["regimes"]]
    out += ["", f"**Seeds per prompt:** {c['decoding']['seeds_per_prompt']}", f"**Post-processing:** {c['decoding']['post_processing']}"]
    rh = c["refusal_handling"]
    out += ["", "## Refusal / deflection accounting", f"**Refusal definition:** {rh['refusal_definition']}", ""]
    if "deflection_definition" in rh:
        out += [f"**Deflection definition:** {rh['deflection_definition']}", ""]
    out += [f"**Retention policy:** `{rh['retention_policy']}`"]
    sc = c["scorer"]
    out += ["", "## Scorer", f"**Type:** `{sc['type']}` (mode `{sc['mode']}`)", f"**Patterns file:** `{sc['patterns_file']}`"]
    out += ["", "## Metrics"] + [f"- **{m['name']}** _({m['unit']})_: {m['definition']}" for m in c["metrics"]]
    out += ["", "## Decision rules"] + [f"- **Rule:** {d['rule']}\n  _Why:_ {d['rationale']}" for d in c["decision_rules"]]
    er = c["example_result"]
    out += ["", "## Result (this run)", "| " + " | ".join(er["columns"]) + " |", "|" + "---|" * len(er["columns"])]
    out += ["| " + " | ".join(_fmt(v) if isinstance(v, float) or v is None else str(v) for v in row) + " |" for row in er["rows"]]
    out += ["", f"**Gate:** {ICONS[ar['gate']]} `{ar['gate']}` (exit {ar['exit_code']}; {ar['rule_checks']})", "", f"**Estimand:** {ar['estimand']}"]
    if ar.get("to_settle"):
        out += ["", "**How many more seeds would settle it:**"] + [f"- {x['rule']} [{x['scope']}]: {x['note']}" for x in ar["to_settle"]]
    if ar["verdict_stability"]:
        out += ["", "**Verdict stability:**"] + [f"- {s_}" for s_ in ar["verdict_stability"]]
    rp = c["reproducibility"]
    out += ["", "## Reproducibility", f"- **Code:** <{rp['code_url']}>", f"- **License:** {rp['license']}", f"- **Data release:** `{rp['data_release']}`",
            f"- **Seeds:** {rp['seeds']}", f"- **Total samples:** {rp['total_samples']}", f"- **Replay (reproduces results.json):** `{rp['replay_command']}`",
            f"  _{rp['replay_note']}_", ""]
    if c.get("agreement"):
        out += ["## Agreement of scorers", "", agreement_md([AgreementResult.model_validate(a) for a in c["agreement"]])]
    if c.get("evaluators"):
        from fairness.evaluators._adapter import evaluators_md

        out += ["## Peer-parity evaluators", "", evaluators_md(c["evaluators"]).removeprefix("### Peer-parity evaluators\n\n")]
    return "\n".join(out)
