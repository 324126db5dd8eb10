"""What an audit logs to a tracker: parameters, metrics and tags, from its typed record alone.

Pure (no MLflow, no network): `run_payload` reads a `FairnessRun`, `diff_payload` a `DiffResult`,
`monitor_payload` a `MonitorRun` (its windows as the steps of each per-window metric's series).
Metrics cover the metrics the gate's rules read, in the scopes the gate judges (`overall` and
each family): every slice's rate, the pooled rate, the worst slice and the max−min gap, each with
its interval ends; then each rule check's value and interval, the verdict code and check counts.
Names are made valid tracker keys by `metric_key`, deterministically.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from fairness.recordings._git import head_commit

if TYPE_CHECKING:
    from fairness.audit._diff import DiffResult
    from fairness.audit._gate import Gate
    from fairness.audit._results import (
        Estimate,
        FairnessRun,
        RegressionCheck,
        RuleCheck,
        ScorerInfo,
        SuiteInfo,
        ToolInfo,
    )
    from fairness.monitor._results import MonitorRun

STATES = ("pass", "fail", "inconclusive", "undefined")
_UNSAFE = re.compile(r"[^A-Za-z0-9_.\-]")
_PR_REF = re.compile(r"^refs/pull/(\d+)/")


@dataclass(frozen=True)
class Payload:
    """One tracker run: its name, parameters, metrics and tags (values as the tracker stores them)."""

    name: str
    """The run's display name, e.g. `run fairness-cards/qwen-v0.1 SmolLM2-135M-Instruct-Q4_1`."""
    params: dict[str, str]
    """Parameter → value: what was audited and how (fixed for a given input)."""
    metrics: dict[str, float]
    """Metric key (valid for MLflow) → value; null values are left out."""
    tags: dict[str, str] = field(default_factory=dict)
    """Tag → value: the verdict, its parts, the git commit and pull request when known."""
    series: dict[str, list[tuple[int, float]]] = field(default_factory=dict)
    """Metric key → (step, value) points: a monitor's per-window values, the window's index as the step."""


def metric_key(*parts: str) -> str:
    """A valid MLflow key from name parts: characters other than letters, digits, `_`, `-` and `.`
    become `_`, and the parts are joined with `.` (`family=F1` → `family_F1`)."""
    return ".".join(_UNSAFE.sub("_", p) for p in parts)


class _Metrics:
    """Metric keys in insertion order; a key that sanitises onto an earlier one gets `_2`, `_3` …"""

    def __init__(self) -> None:
        self.values: dict[str, float] = {}

    def add(self, key: str, value: float | int | None) -> None:
        if value is None:
            return
        unique, n = key, 1
        while unique in self.values:
            n += 1
            unique = f"{key}_{n}"
        self.values[unique] = float(value)

    def estimate(self, key: str, est: Estimate | None, name: str = "") -> None:
        if est is None:
            return
        self.add(metric_key(key, name) if name else key, est.value)
        ci = est.ci or [None, None]
        self.add(metric_key(key, name, "ci_low") if name else metric_key(key, "ci_low"), ci[0])
        self.add(metric_key(key, name, "ci_high") if name else metric_key(key, "ci_high"), ci[1])

    def interval(self, key: str, interval: list[float | None] | None) -> None:
        lo, hi = interval if interval else (None, None)
        self.add(metric_key(key, "ci_low"), lo)
        self.add(metric_key(key, "ci_high"), hi)


def _judged(scope: str) -> bool:
    """The scopes the gate judges: `overall` and each family alone."""
    return scope == "overall" or (scope.startswith("family=") and "," not in scope)


def run_payload(run: FairnessRun, env: Mapping[str, str], *, cwd: Path | None = None) -> Payload:
    """Parameters, metrics and tags of one `run` (the gate's record, never recomputed)."""
    comp = run.comparison
    params = {
        **_suite_params("run", run.suite, run.scorer),
        "model_id": run.recordings.model_id,
        "recordings_manifest_sha256": run.recordings.manifest_sha256,
        "alpha": str(run.options.alpha),
        "fail_on": run.gate.fail_on,
        "gate_on": run.gate.gate_on,
        "min_group_size": str(run.options.min_group_size),
        "seed": str(run.options.seed),
        "n_rows": str(run.n_rows),
        "tool_version": run.tool.version,
    }
    if comp is not None:
        params["baseline"] = comp.base
    m = _Metrics()
    m.add("verdict_code", run.gate.exit_code)
    _check_counts(m, "rule_checks", run.rules)
    m.add("rule_checks.fired", sum(c.fired for c in run.rules))
    regressions = comp.checks if comp is not None and comp.ran else []
    if regressions:
        _check_counts(m, "regression_checks", regressions)
    read = list(dict.fromkeys([c.metric for c in run.rules] + [c.metric for c in regressions]))
    by_name = {r.metric: r for r in run.metrics}
    for name in read:
        result = by_name.get(name)
        for scope, sr in (result.scopes.items() if result is not None else ()):
            if not _judged(scope):
                continue
            _slices(m, metric_key(name, scope), sr.by_slice, sr.pooled, sr.worst_slice, sr.max_minus_min)
    for c in run.rules:
        _rule(m, c)
    for r in regressions:
        _regression(m, r)
    tags = {**_gate_tags(run.gate, run.tool), **source_tags(env, cwd)}
    return Payload(f"run {run.suite.name} {run.recordings.model_id}", params, m.values, tags)


def diff_payload(d: DiffResult, env: Mapping[str, str], *, cwd: Path | None = None) -> Payload:
    """Parameters, metrics and tags of one `diff`: the regression checks and their changes."""
    params = {
        "command": "diff",
        "suite": str(d.head.get("suite", "")),
        "suite_hash": str(d.head.get("suite_hash", "")),
        "model_id": str(d.head.get("model_id", "")),
        "base_suite_hash": str(d.base.get("suite_hash", "")),
        "base_model_id": str(d.base.get("model_id", "")),
        "paired": "true" if d.paired else "false",
        "bootstrap": str(d.bootstrap),
        "seed": str(d.seed),
    }
    m = _Metrics()
    m.add("verdict_code", d.exit_code)
    _check_counts(m, "regression_checks", d.checks)
    for r in d.checks:
        _regression(m, r)
    tags = {
        "verdict": d.state,
        "head_state": str(d.head.get("gate", "")),
        "base_state": str(d.base.get("gate", "")),
        "regression_state": d.state,
        **source_tags(env, cwd),
    }
    return Payload(f"diff {params['suite']} {params['model_id']}", params, m.values, tags)


def monitor_payload(run: MonitorRun, env: Mapping[str, str], *, cwd: Path | None = None) -> Payload:
    """Parameters, metrics and tags of one `monitor`: totals as metrics, and each window's values of the
    metrics the rules read (every slice, pooled, worst slice and gap, with interval ends), its records and
    its drift flag as series whose step is the window's index in time order."""
    src = run.source
    params = {
        **_suite_params("monitor", run.suite, run.scorer),
        "format": src.format,
        "files": str(src.files),
        "sample": str(src.sample),
        "window": src.window,
        "reference": run.reference.kind if run.reference.window is None else f"window:{run.reference.window}",
        "text_field": src.mapping.text,
        "unit_field": src.mapping.unit or "",
        "alpha": str(run.alpha),
        "fail_on": run.gate.fail_on,
        "gate_on": run.gate.gate_on,
        "min_group_size": str(run.min_group_size),
        "tool_version": run.tool.version,
    }
    m = _Metrics()
    m.add("verdict_code", run.gate.exit_code)
    m.add("rows_read", src.rows_read)
    m.add("rows_sampled", src.rows_sampled)
    m.add("windows", len(run.windows))
    m.add("drift_windows", len(run.drift))
    _check_counts(m, "rule_checks", run.rules)
    _check_counts(m, "regression_checks", run.regressions)
    read = list(dict.fromkeys([c.metric for c in run.rules] + [c.metric for c in run.regressions]))
    series: dict[str, list[tuple[int, float]]] = {}
    drifted = set(run.drift)
    for step, w in enumerate(run.windows):
        points = _Metrics()
        points.add("window.n", w.n)
        points.add("window.units", w.units)
        points.add("window.drift", int(w.window in drifted))
        for wm in w.metrics:
            if wm.metric not in read:
                continue
            _slices(points, wm.metric, wm.by_slice, wm.pooled, wm.worst_slice, wm.max_minus_min)
        for key, value in points.values.items():
            series.setdefault(key, []).append((step, value))
    tags = {**_gate_tags(run.gate, run.tool), "drift": ",".join(run.drift) or "none", **source_tags(env, cwd)}
    return Payload(f"monitor {run.suite.name} {src.window}", params, m.values, tags, series)


def _suite_params(command: str, suite: SuiteInfo, scorer: ScorerInfo) -> dict[str, str]:
    """The parameters every audited record shares: the command, the suite and its rubric."""
    return {"command": command, "suite": suite.name, "suite_version": suite.version, "suite_hash": suite.hash,
            "rubric_version": scorer.rubric_version, "scorer_mode": scorer.mode}


def _gate_tags(gate: Gate, tool: ToolInfo) -> dict[str, str]:
    """The verdict and its parts, as tags."""
    return {"verdict": gate.state, "head_state": gate.head_state, "regression_state": gate.regression_state or "none",
            "passed": "true" if gate.passed else "false", "tool": f"{tool.name} {tool.version}"}


def _slices(m: _Metrics, base: str, by_slice: Mapping[str, Estimate], pooled: Estimate | None,
            worst: Estimate | None, gap: Estimate | None) -> None:
    """One metric in one scope (or window): every slice, the pooled value, the worst slice and the gap."""
    for slice_name, est in by_slice.items():
        m.estimate(metric_key(base, "slice", slice_name), est)
    m.estimate(metric_key(base, "pooled"), pooled)
    m.estimate(metric_key(base, "worst_slice"), worst)
    m.estimate(metric_key(base, "gap"), gap)


def _check_counts(m: _Metrics, prefix: str, checks: list[RuleCheck] | list[RegressionCheck]) -> None:
    for state in STATES:
        m.add(metric_key(prefix, state), sum(c.state == state for c in checks))


def _rule(m: _Metrics, c: RuleCheck) -> None:
    key = metric_key("rule", c.rule, c.scope)
    m.add(key, c.value)
    m.interval(key, c.interval)


def _regression(m: _Metrics, r: RegressionCheck) -> None:
    key = metric_key("regression", r.rule, r.scope)
    m.add(metric_key(key, "base"), r.base)
    m.add(metric_key(key, "head"), r.head)
    m.add(metric_key(key, "change"), r.change)
    m.interval(metric_key(key, "change"), r.ci)


def source_tags(env: Mapping[str, str], cwd: Path | None = None) -> dict[str, str]:
    """`git_sha` (GITHUB_SHA, else `git rev-parse HEAD` where git answers) and `pr_number` (from
    GITHUB_REF `refs/pull/N/…`, else the event payload's pull request), each only when known."""
    tags: dict[str, str] = {}
    sha = env.get("GITHUB_SHA") or head_commit(cwd if cwd is not None else Path.cwd())
    if sha and re.fullmatch(r"[0-9a-f]{40}|[0-9a-f]{64}", sha):
        tags["git_sha"] = sha
        tags["mlflow.source.git.commit"] = sha
    pr = _pr_number(env)
    if pr is not None:
        tags["pr_number"] = str(pr)
    return tags


def _pr_number(env: Mapping[str, str]) -> int | None:
    match = _PR_REF.match(env.get("GITHUB_REF") or "")
    if match:
        return int(match.group(1))
    path = env.get("GITHUB_EVENT_PATH")
    if not path:
        return None
    try:
        event = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError):
        return None
    pr = event.get("pull_request") if isinstance(event, dict) else None
    number = pr.get("number") if isinstance(pr, dict) else None
    return number if isinstance(number, int) and not isinstance(number, bool) and number > 0 else None
