"""The GitHub Action: inputs from the environment → audit → outputs, summary, annotations.

action.yml passes every input through `env:` (FAIRNESS_*) and never interpolates one
into a script, so no input is ever seen by a shell. The engine runs in-process; its log
is printed between `::stop-commands::` markers, and everything else this module prints
is escaped, so no input or model output can issue a workflow command.
"""

from __future__ import annotations

import http.client
import json
import os
import re
import sys
import traceback
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO, cast

from fairness._util.errors import FairnessError
from fairness.action import _commands as _gha
from fairness.action._artifact import artifact_name
from fairness.action._env import input_value
from fairness.audit._gate import ACTION_FAIL_ON, FAIL_ON_CHOICES, FailOn
from fairness.audit._options import DEFAULT_PERMUTATIONS, AuditOptions
from fairness.audit._stats import DEFAULT_B
from fairness.github._comment import write_payload
from fairness.github._names import check_login, check_tag, default_tag

if TYPE_CHECKING:
    from fairness.audit._results import FairnessRun
    from fairness.pipeline._options import RunOptions
    from fairness.pipeline._run import RunOutputs

ENV = {
    "suite": "FAIRNESS_SUITE",
    "recordings": "FAIRNESS_RECORDINGS",
    "out-dir": "FAIRNESS_OUT_DIR",
    "mode": "FAIRNESS_MODE",
    "model": "FAIRNESS_MODEL",
    "provider": "FAIRNESS_PROVIDER",
    "threshold": "FAIRNESS_THRESHOLD",
    "regression-threshold": "FAIRNESS_REGRESSION_THRESHOLD",
    "fail-on": "FAIRNESS_FAIL_ON",
    "min-group-size": "FAIRNESS_MIN_GROUP_SIZE",
    "allow-incomplete": "FAIRNESS_ALLOW_INCOMPLETE",
    "bootstrap": "FAIRNESS_BOOTSTRAP",
    "permutations": "FAIRNESS_PERMUTATIONS",
    "baseline": "FAIRNESS_BASELINE",
    "baseline-ref": "FAIRNESS_BASELINE_REF",
    "comment-on-pr": "FAIRNESS_COMMENT_ON_PR",
    "python-version": "FAIRNESS_PYTHON_VERSION",
    "github-token": "FAIRNESS_GITHUB_TOKEN",
    "comment-tag": "FAIRNESS_COMMENT_TAG",
    "comment-author": "FAIRNESS_COMMENT_AUTHOR",
    "upload-artifact": "FAIRNESS_UPLOAD_ARTIFACT",
    "mlflow-tracking-uri": "FAIRNESS_MLFLOW_TRACKING_URI",
}
"""Action input → environment variable. Composite actions get no INPUT_* variables; a container
started as a Docker action (or by `docker run -e INPUT_...`) does: `_env.input_value` reads both."""

DEFAULT_SUITE = "fairness-cards/qwen-v0.1"
NO_RECORDINGS = (
    "input `recordings` is required: the directory of your model's recorded answers, committed to your repository; "
    "create it with `llm-fairness-check init` and `llm-fairness-check generate --live --model <your model> --out <dir>`"
)
PROVIDERS = ("transformers", "llamacpp", "openai", "anthropic")
MAX_ANNOTATIONS = 10
"""GitHub shows at most 10 annotations of each level per step."""
ERROR_EXIT = 2
"""Any error, bad input or a bug alike: outputs say `gate-status: error`, and the step fails with 2."""
_TRUE = {"true", "True", "TRUE"}
_FALSE = {"false", "False", "FALSE", ""}
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


@dataclass(frozen=True)
class Inputs:
    suite: str
    recordings: str
    out_dir: str
    mode: str
    model: str
    provider: str
    threshold: float | None
    fail_on: FailOn
    min_group_size: int | None
    allow_incomplete: bool
    bootstrap: int
    permutations: int
    baseline: str | None
    baseline_ref: str | None
    comment_on_pr: bool
    python_version: str
    github_token: str
    comment_tag: str = "default"
    comment_author: str = ""
    upload_artifact: bool = True
    regression_threshold: float | None = None
    mlflow_tracking_uri: str = ""


# -- inputs ---------------------------------------------------------------------------


def _raw(env: Mapping[str, str], name: str, default: str = "") -> str:
    given = input_value(env, name, ENV[name])
    value = (default if given is None else given).strip()
    if name != "github-token" and _CONTROL.search(value):
        raise FairnessError(f"input `{name}` contains a line break or control character")
    return value


def _number(name: str, raw: str, kind: type[int] | type[float]) -> Any:
    """The input's text as a number; ranges are the library's to check (`AuditOptions`)."""
    try:
        return kind(raw)
    except ValueError:
        raise FairnessError(f"input `{name}` must be {'an integer' if kind is int else 'a number'}, got {raw!r}") from None


def _choice(name: str, raw: str, choices: tuple[str, ...]) -> str:
    if raw not in choices:
        shown = ", ".join(c or "(empty)" for c in choices)
        raise FairnessError(f"input `{name}` must be one of {shown}; got {raw!r}")
    return raw


def _bool(name: str, raw: str) -> bool:
    if raw in _TRUE:
        return True
    if raw in _FALSE:
        return False
    raise FairnessError(f"input `{name}` must be true or false, got {raw!r}")


def _comment_tag(env: Mapping[str, str]) -> str:
    """The given tag (checked, naming the input), else the job id, else `default`."""
    given = _raw(env, "comment-tag")
    if given:
        try:
            check_tag(given)
        except FairnessError as exc:
            raise FairnessError(f"input `comment-tag`: {exc}") from None
    return default_tag(env, given)


def read_inputs(env: Mapping[str, str]) -> Inputs:
    """Parse and validate every input; a FairnessError names the first bad one."""
    mode = _choice("mode", _raw(env, "mode", "replay") or "replay", ("replay", "live"))
    provider = _raw(env, "provider")
    model = _raw(env, "model")
    if mode == "live":
        provider = _choice("provider", provider or "transformers", PROVIDERS)
        if not model:
            raise FairnessError("input `model` is required when `mode` is live")
    threshold = _raw(env, "threshold")
    rthreshold = _raw(env, "regression-threshold")
    mgs = _raw(env, "min-group-size")
    baseline = _raw(env, "baseline")
    baseline_ref = _raw(env, "baseline-ref")
    if baseline and baseline_ref:
        raise FairnessError("inputs `baseline` and `baseline-ref` exclude each other: compare with a run or a revision")
    recordings = _raw(env, "recordings")
    if not recordings and mode == "replay":
        raise FairnessError(NO_RECORDINGS)
    if baseline_ref and mode == "live":
        raise FairnessError("input `baseline-ref` compares committed recordings; it needs `mode: replay`")
    inputs = Inputs(
        suite=_raw(env, "suite") or DEFAULT_SUITE,
        recordings=recordings,
        out_dir=_raw(env, "out-dir") or "fairness-out",
        mode=mode,
        model=model,
        provider=provider,
        threshold=_number("threshold", threshold, float) if threshold else None,
        # The Action's default policy (`ACTION_FAIL_ON`): an inconclusive result is a ::warning and the step passes.
        fail_on=cast("FailOn", _choice("fail-on", _raw(env, "fail-on"), ("", *FAIL_ON_CHOICES)) or ACTION_FAIL_ON),
        min_group_size=_number("min-group-size", mgs, int) if mgs else None,
        allow_incomplete=_bool("allow-incomplete", _raw(env, "allow-incomplete")),
        bootstrap=_number("bootstrap", _raw(env, "bootstrap") or str(DEFAULT_B), int),
        permutations=_number("permutations", _raw(env, "permutations") or str(DEFAULT_PERMUTATIONS), int),
        baseline=baseline or None,
        baseline_ref=baseline_ref or None,
        comment_on_pr=_bool("comment-on-pr", _raw(env, "comment-on-pr")),
        python_version=_raw(env, "python-version"),
        github_token=(input_value(env, "github-token", ENV["github-token"]) or "").strip(),
        comment_tag=_comment_tag(env),
        comment_author=check_login(_raw(env, "comment-author"), "input `comment-author`"),
        upload_artifact=_bool("upload-artifact", _raw(env, "upload-artifact", "true")),
        regression_threshold=_number("regression-threshold", rthreshold, float) if rthreshold else None,
        mlflow_tracking_uri=_raw(env, "mlflow-tracking-uri"),
    )
    if inputs.mlflow_tracking_uri:
        from fairness.tracking import require_mlflow

        require_mlflow(inputs.mlflow_tracking_uri, "input `mlflow-tracking-uri`")  # bad input, before any work
    audit_options(inputs)  # the library validates every range before anything runs
    return inputs


def audit_options(inputs: Inputs) -> AuditOptions:
    """The typed audit options these inputs ask for (a FairnessError names a bad one)."""
    return AuditOptions(
        bootstrap=inputs.bootstrap, permutations=inputs.permutations, threshold=inputs.threshold,
        regression_threshold=inputs.regression_threshold, fail_on=inputs.fail_on, min_group_size=inputs.min_group_size,
    )


# -- engine ---------------------------------------------------------------------------


def generate_recordings(inputs: Inputs, out: Path) -> None:
    """Live mode: record the suite's grid with the chosen provider into `out`."""
    from fairness.generate._factory import run_generate
    from fairness.generate._options import EngineOptions

    run_generate(inputs.suite, EngineOptions(engine=inputs.provider, model=inputs.model), out, progress=False)


def run_options(inputs: Inputs, recordings: Path, out: Path, workspace: str | None = None) -> RunOptions:
    """The main job these inputs ask for (the comparison included); JUnit goes next to results.json."""
    from fairness.pipeline._options import RunOptions

    return RunOptions(suite=inputs.suite, recordings=recordings, out=out, allow_incomplete=inputs.allow_incomplete,
                      junit=out / "junit.xml", audit=audit_options(inputs), baseline_ref=inputs.baseline_ref,
                      baseline=inputs.baseline, workspace=workspace if inputs.baseline_ref else None)


# -- reporting ------------------------------------------------------------------------


def worst_slices(run: FairnessRun) -> list[dict[str, Any]]:
    """Per rule check: where the metric is worst, its value and the check's state."""
    return [{"rule": c.rule, "scope": c.scope, "metric": c.metric, "worst_slice": c.worst_slice, "value": c.value,
             "interval": c.interval, "threshold": c.threshold, "state": c.state} for c in run.rules]


def annotate(run: FairnessRun, out: TextIO) -> None:
    """`::error` per failed check (rule or regression), `::warning` per inconclusive check and per
    caveat, 10 of each at most; each names its rule, scope and worst slice."""
    comp = run.comparison
    regressions = comp.checks if comp is not None and comp.ran else []
    failed = [c for c in run.rules if c.state == "fail"]
    failed_regressions = [c for c in regressions if c.state == "fail"]
    for c in failed[:MAX_ANNOTATIONS]:
        where = f"; worst slice {c.worst_slice}" if c.worst_slice else ""
        _gha.command("error", f"{c.reason}{where}", out, title=f"Fairness rule {c.rule} failed [{c.scope}]")
    for r in failed_regressions[:MAX_ANNOTATIONS]:
        where = f"; worst slice (head) {r.slice}" if r.slice else ""
        _gha.command("error", f"{r.reason}{where} (against {comp.base if comp else 'the base'})", out,
                     title=f"Fairness regression {r.rule} [{r.scope}{f', slice {r.slice}' if r.slice else ''}]")
    unsettled = [c for c in run.rules if c.state == "inconclusive"]
    unsettled_regressions = [c for c in regressions if c.state == "inconclusive"]
    for c in unsettled[:MAX_ANNOTATIONS]:
        _gha.command("warning", c.reason, out, title=f"Fairness rule {c.rule} inconclusive [{c.scope}]")
    for r in unsettled_regressions[:MAX_ANNOTATIONS]:
        _gha.command("warning", r.reason, out,
                     title=f"Fairness regression {r.rule} inconclusive [{r.scope}{f', slice {r.slice}' if r.slice else ''}]")
    for cv in run.caveats[:MAX_ANNOTATIONS]:
        scope = " ".join(x for x in (cv.metric, cv.scope) if x)
        _gha.command("warning", cv.message, out, title=f"Fairness caveat: {cv.code}{' ' + scope if scope else ''}")
    hidden = sum(max(0, len(x) - MAX_ANNOTATIONS)
                 for x in (failed, failed_regressions, unsettled, unsettled_regressions, run.caveats))
    if hidden:
        _gha.log(f"{hidden} more failed checks or caveats are listed in results.json", out)


def _comment(markdown: str, inputs: Inputs, env: Mapping[str, str], out: TextIO) -> None:
    """After the verdict, which nothing here may change: a refusal is a notice, any other failure
    (the API down, an answer we cannot use: a GitHubError) a warning."""
    from fairness.github._comment import CommentSkipped, upsert_comment

    try:
        what = upsert_comment(markdown, env, inputs.github_token, inputs.comment_tag, inputs.comment_author)
        _gha.log(f"pull-request comment {what}", out)
    except CommentSkipped as exc:
        _gha.command("notice", f"skipping the pull-request comment: {exc}", out, title="llm-fairness-check")
    except (FairnessError, OSError, http.client.HTTPException, ValueError) as exc:
        _gha.command("warning", f"could not write the pull-request comment: {exc}", out, title="llm-fairness-check")


def _emit_outputs(env: Mapping[str, str], outputs: dict[str, str], out: TextIO) -> None:
    path = env.get("GITHUB_OUTPUT")
    if path:
        _gha.write_outputs(path, outputs)
    with _gha.group("Outputs", out):
        for name, value in outputs.items():
            _gha.log(f"{name} = {value}", out)


def _error(message: str, env: Mapping[str, str], out: TextIO, *, title: str = "llm-fairness-check: bad input") -> int:
    """Any failure: one `::error`, the outputs action.yml promises, a one-line step summary, exit 2.

    Each step is guarded on its own, so a broken GITHUB_OUTPUT or summary file still leaves
    the error in the log and the exit code."""
    line = " ".join(message.split())
    _gha.command("error", line, out, title=title)
    outputs = {"gate-status": "error", "passed": "false", "exit-code": str(ERROR_EXIT)}
    try:
        _emit_outputs(env, outputs, out)
    except (OSError, ValueError) as exc:
        _gha.log(f"could not write the step outputs: {exc}", out)
    summary = env.get("GITHUB_STEP_SUMMARY")
    if summary:
        try:
            _gha.append_summary(summary, f"**llm-fairness-check: error** — {line}")
        except OSError as exc:
            _gha.log(f"could not write the step summary: {exc}", out)
    return ERROR_EXIT


# -- main -----------------------------------------------------------------------------


def _log_inputs(inputs: Inputs, out: TextIO) -> None:
    with _gha.group("Inputs", out):
        for name, value in inputs.__dict__.items():
            shown = "***" if name == "github_token" and value else value
            _gha.log(f"{name.replace('_', '-')} = {json.dumps(shown)}", out)


def check_paths(inputs: Inputs, env: Mapping[str, str] | None = None) -> None:
    """`out-dir` (named as the input) and the runner's output and summary files, checked before any
    work; the run's other paths and options are the library's to resolve (`fairness.pipeline._run.resolve`)."""
    from fairness._util.files import check_output_dir, check_output_file

    check_output_dir(inputs.out_dir, "input `out-dir`")
    for name in ("GITHUB_OUTPUT", "GITHUB_STEP_SUMMARY"):
        if (env or {}).get(name):
            check_output_file(str((env or {})[name]), name)


def _engine(inputs: Inputs, env: Mapping[str, str], out: TextIO) -> RunOutputs:
    """Resolve every option, generate in live mode, then audit (and compare) in one library call."""
    from fairness.pipeline._run import print_outcome, resolve, run_audit

    check_paths(inputs, env)
    dest = Path(inputs.out_dir)
    live = inputs.mode == "live"
    recordings = dest / "recordings" if live else Path(inputs.recordings)  # the Action's own recordings are no fallback
    options = run_options(inputs, recordings, dest, env.get("GITHUB_WORKSPACE") or None)
    resolve(options, recordings_ready=not live)  # a bad option is refused before a model is loaded
    if live:
        with _gha.group(f"Generate live with {inputs.provider}", out), _gha.stop_commands(out):
            generate_recordings(inputs, recordings)
    title = f"Audit (against the base revision `{inputs.baseline_ref}`)" if inputs.baseline_ref else "Audit"
    with _gha.group(title, out), _gha.stop_commands(out):
        result = run_audit(options)
        print_outcome(result, out=out, err=out)
    comp = result.run.comparison
    if comp is not None and not comp.ran:
        _gha.command("notice", f"base vs head skipped: {comp.note}", out, title="llm-fairness-check")
    return result


def _report(result: RunOutputs, inputs: Inputs, env: Mapping[str, str], out: TextIO) -> None:
    """Everything after the verdict renders `result.run.gate`; a failure here (a PR comment) is a warning."""
    run, dest = result.run, result.out
    markdown = (dest / "summary.md").read_text(encoding="utf-8")
    if env.get("GITHUB_STEP_SUMMARY"):
        _gha.append_summary(env["GITHUB_STEP_SUMMARY"], markdown)
    annotate(run, out)
    _gha.command("notice", f"gate {run.gate.state}, exit code {run.gate.exit_code}", out, title="Fairness gate")
    write_payload(dest, markdown, env, inputs.comment_tag)  # for the fork (workflow_run) recipe
    if inputs.comment_on_pr:
        _comment(markdown, inputs, env, out)
    if inputs.mlflow_tracking_uri:  # after every output is written; a failure is a warning
        from fairness.tracking import log_run

        with _gha.stop_commands(out):  # the server's text reaches the log, never the runner's command parser
            log_run(inputs.mlflow_tracking_uri, run, dest, env=env, err=out)
    outputs = {
        "gate-status": run.gate.state,
        "passed": "true" if run.gate.passed else "false",
        "exit-code": str(run.gate.exit_code),
        "worst-slices": json.dumps(worst_slices(run), ensure_ascii=False),
        "results-path": str((dest / "results.json").resolve()),
        "card-path": str((dest / "card.yaml").resolve()),
        "summary-path": str((dest / "summary.md").resolve()),
        "junit-path": str((dest / "junit.xml").resolve()),
    }
    if inputs.upload_artifact:
        outputs["artifact-name"] = artifact_name(env, inputs.suite, inputs.comment_tag)
    comp = run.comparison
    if comp is not None and comp.ran and comp.state is not None:
        outputs["diff-status"] = comp.state
        outputs["diff-path"] = str((dest / "diff" / "diff.json").resolve())
    _emit_outputs(env, outputs, out)


def main(env: Mapping[str, str] | None = None, out: TextIO | None = None) -> int:
    """Run the Action; returns the process exit code (the gate's, mapped per fail-on)."""
    env = os.environ if env is None else env
    out = out or sys.stdout
    _gha.add_masks(env, out)
    try:
        inputs = read_inputs(env)
        _log_inputs(inputs, out)
        result = _engine(inputs, env, out)
        _report(result, inputs, env, out)
        return result.run.gate.exit_code
    except FairnessError as exc:
        return _error(str(exc), env, out)
    except OSError as exc:  # the environment (a path, a device, the runner's files), not a bug
        where = f" `{exc.filename}`" if exc.filename else ""
        return _error(f"{exc.strerror or exc}{where}", env, out, title="llm-fairness-check: error")
    except (Exception, KeyboardInterrupt) as exc:  # noqa: BLE001 - a bug: traceback folded and inert
        with _gha.group("Internal error (traceback)", out), _gha.stop_commands(out):
            print(traceback.format_exc(), file=out)
        return _error(f"internal error in llm-fairness-check ({type(exc).__name__}); the traceback is in the log",
                      env, out, title="llm-fairness-check: internal error")
