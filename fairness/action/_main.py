"""The GitHub Action: inputs from the environment → audit → outputs, summary, annotations.

action.yml passes every input through `env:` (FAIRNESS_*) and never interpolates one
into a script, so no input is ever seen by a shell. The engine runs in-process; its log
is printed between `::stop-commands::` markers, and everything else this module prints
is escaped, so no input or model output can issue a workflow command.
"""

from __future__ import annotations

import argparse
import http.client
import json
import math
import os
import re
import sys
import traceback
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from fairness._util.errors import FairnessError
from fairness.action import _commands as _gha
from fairness.action._env import input_value
from fairness.audit._gate import EXIT_CODES, exit_code

ENV = {
    "suite": "FAIRNESS_SUITE",
    "recordings": "FAIRNESS_RECORDINGS",
    "out-dir": "FAIRNESS_OUT_DIR",
    "mode": "FAIRNESS_MODE",
    "model": "FAIRNESS_MODEL",
    "provider": "FAIRNESS_PROVIDER",
    "threshold": "FAIRNESS_THRESHOLD",
    "fail-on": "FAIRNESS_FAIL_ON",
    "min-group-size": "FAIRNESS_MIN_GROUP_SIZE",
    "allow-incomplete": "FAIRNESS_ALLOW_INCOMPLETE",
    "bootstrap": "FAIRNESS_BOOTSTRAP",
    "baseline": "FAIRNESS_BASELINE",
    "comment-on-pr": "FAIRNESS_COMMENT_ON_PR",
    "python-version": "FAIRNESS_PYTHON_VERSION",
    "github-token": "FAIRNESS_GITHUB_TOKEN",
}
"""Action input → environment variable. Composite actions get no INPUT_* variables; a container
started as a Docker action (or by `docker run -e INPUT_...`) does: `_env.input_value` reads both."""

DEFAULT_SUITE = "fairness-cards/qwen-v0.1"
DEFAULT_RECORDINGS = "recordings/fairness-cards/qwen-v0.1/SmolLM2-135M-Instruct-Q4_1"
PROVIDERS = ("transformers", "llamacpp", "openai", "anthropic")
MAX_ANNOTATIONS = 10
"""GitHub shows at most 10 annotations of each level per step."""
INTERNAL_ERROR = 70
"""A bug, not a verdict: distinct from the gate's 0-4."""
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
    fail_on: str | None
    min_group_size: int | None
    allow_incomplete: bool
    bootstrap: int
    baseline: str | None
    comment_on_pr: bool
    python_version: str
    github_token: str


# -- inputs ---------------------------------------------------------------------------


def _raw(env: Mapping[str, str], name: str, default: str = "") -> str:
    given = input_value(env, name, ENV[name])
    value = (default if given is None else given).strip()
    if name != "github-token" and _CONTROL.search(value):
        raise FairnessError(f"input `{name}` contains a line break or control character")
    return value


def _number(name: str, raw: str, kind: type, *, positive: bool = True) -> Any:
    try:
        value = kind(raw)
    except ValueError:
        raise FairnessError(f"input `{name}` must be {'an integer' if kind is int else 'a number'}, got {raw!r}") from None
    if kind is float and not math.isfinite(value):
        raise FairnessError(f"input `{name}` must be a finite number, got {raw!r}")
    if positive and kind is int and value < 1:
        raise FairnessError(f"input `{name}` must be a positive integer, got {raw!r}")
    return value


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
    mgs = _raw(env, "min-group-size")
    baseline = _raw(env, "baseline")
    return Inputs(
        suite=_raw(env, "suite") or DEFAULT_SUITE,
        recordings=_raw(env, "recordings") or DEFAULT_RECORDINGS,
        out_dir=_raw(env, "out-dir") or "fairness-out",
        mode=mode,
        model=model,
        provider=provider,
        threshold=_number("threshold", threshold, float) if threshold else None,
        fail_on=_choice("fail-on", _raw(env, "fail-on"), ("", "fail", "illustrative")) or None,
        min_group_size=_number("min-group-size", mgs, int) if mgs else None,
        allow_incomplete=_bool("allow-incomplete", _raw(env, "allow-incomplete")),
        bootstrap=_number("bootstrap", _raw(env, "bootstrap") or "2000", int),
        baseline=baseline or None,
        comment_on_pr=_bool("comment-on-pr", _raw(env, "comment-on-pr")),
        python_version=_raw(env, "python-version"),
        github_token=(input_value(env, "github-token", ENV["github-token"]) or "").strip(),
    )


def resolve_recordings(value: str, action_path: str | None) -> Path:
    """A relative path is looked up in the workspace, then in the Action's own checkout.

    The default points at recordings committed with the Action, which are not in the
    caller's repository.
    """
    path = Path(value)
    if path.is_absolute() or path.exists() or not action_path:
        return path
    bundled = Path(action_path) / path
    return bundled if bundled.exists() else path


# -- engine ---------------------------------------------------------------------------


def _subcommands() -> dict[str, argparse.ArgumentParser]:
    from fairness.cli._main import build_parser

    for action in build_parser()._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def run_cli(argv: list[str]) -> int:
    """Run one CLI command in-process; a FairnessError propagates to the caller."""
    from fairness.cli._main import COMMANDS, build_parser

    args = build_parser().parse_args(argv)
    handler = COMMANDS.get(args.command) or args.handler
    return int(handler(args))


def generate_argv(inputs: Inputs, out: Path) -> list[str]:
    return ["generate", "--suite", inputs.suite, "--engine", inputs.provider, "--model", inputs.model,
            "--out", str(out), "--live", "--no-progress"]


def audit_argv(inputs: Inputs, recordings: Path, out: Path) -> list[str]:
    argv = ["run", "--suite", inputs.suite, "--recordings", str(recordings), "--out", str(out),
            "--bootstrap", str(inputs.bootstrap)]
    if inputs.threshold is not None:
        argv += ["--threshold", repr(inputs.threshold)]
    if inputs.fail_on:
        argv += ["--fail-on", inputs.fail_on]
    if inputs.min_group_size is not None:
        argv += ["--min-group-size", str(inputs.min_group_size)]
    if inputs.allow_incomplete:
        argv.append("--allow-incomplete")
    return argv


def diff_argv(inputs: Inputs, out: Path) -> list[str]:
    return ["diff", str(inputs.baseline), str(out), "--suite", inputs.suite, "--out", str(out / "diff"),
            "--bootstrap", str(inputs.bootstrap)]


# -- reporting ------------------------------------------------------------------------


def worst_slices(results: dict[str, Any]) -> list[dict[str, Any]]:
    """Per rule check: where the metric is worst, its value and the check's state."""
    keys = ("rule", "scope", "metric", "worst_slice", "value", "interval", "threshold", "state")
    return [{k: c.get(k) for k in keys} for c in results.get("rules") or []]


def annotate(results: dict[str, Any], out: TextIO) -> None:
    """`::error` per failed rule check, `::warning` per caveat, 10 of each at most."""
    failed = [c for c in results.get("rules") or [] if c.get("state") == "fail"]
    for c in failed[:MAX_ANNOTATIONS]:
        where = f"; worst slice {c['worst_slice']}" if c.get("worst_slice") else ""
        _gha.command("error", f"{c.get('reason')}{where}", out, title=f"Fairness rule {c.get('rule')} failed [{c.get('scope')}]")
    caveats = results.get("caveats") or []
    for cv in caveats[:MAX_ANNOTATIONS]:
        scope = " ".join(x for x in (cv.get("metric"), cv.get("scope")) if x)
        _gha.command("warning", cv.get("message", ""), out, title=f"Fairness caveat: {cv.get('code')}{' ' + scope if scope else ''}")
    hidden = max(0, len(failed) - MAX_ANNOTATIONS) + max(0, len(caveats) - MAX_ANNOTATIONS)
    if hidden:
        _gha.log(f"{hidden} more failed rule checks or caveats are listed in results.json", out)


def _comment(markdown: str, inputs: Inputs, env: Mapping[str, str], out: TextIO) -> None:
    from fairness.action._pr_comment import CommentSkipped, upsert_comment

    try:
        what = upsert_comment(markdown, env, inputs.github_token)
        _gha.log(f"pull-request comment {what}", out)
    except CommentSkipped as exc:
        _gha.command("notice", f"skipping the pull-request comment: {exc}", out, title="llm-fairness-check")
    except (OSError, http.client.HTTPException, ValueError) as exc:  # URLError is an OSError
        _gha.command("warning", f"could not write the pull-request comment: {exc}", out, title="llm-fairness-check")


def _emit_outputs(env: Mapping[str, str], outputs: dict[str, str], out: TextIO) -> None:
    path = env.get("GITHUB_OUTPUT")
    if path:
        _gha.write_outputs(path, outputs)
    with _gha.group("Outputs", out):
        for name, value in outputs.items():
            _gha.log(f"{name} = {value}", out)


def _bad_input(message: str, code: int, env: Mapping[str, str], out: TextIO) -> int:
    _gha.command("error", message, out, title="llm-fairness-check: bad input")
    _emit_outputs(env, {"gate-status": "error", "passed": "false", "exit-code": str(code)}, out)
    return code


# -- main -----------------------------------------------------------------------------


@dataclass
class _Run:
    inputs: Inputs
    out: Path
    code: int
    results: dict[str, Any]
    extra_md: list[str]
    diff_state: str | None = None


def _log_inputs(inputs: Inputs, out: TextIO) -> None:
    with _gha.group("Inputs", out):
        for name, value in inputs.__dict__.items():
            shown = "***" if name == "github_token" and value else value
            _gha.log(f"{name.replace('_', '-')} = {json.dumps(shown)}", out)


def _engine(inputs: Inputs, env: Mapping[str, str], out: TextIO) -> _Run:
    dest = Path(inputs.out_dir)
    recordings = resolve_recordings(inputs.recordings, env.get("FAIRNESS_ACTION_PATH"))
    if inputs.mode == "live":
        recordings = dest / "recordings"
        with _gha.group(f"Generate live with {inputs.provider}", out), _gha.stop_commands(out):
            run_cli(generate_argv(inputs, recordings))
    with _gha.group("Audit", out), _gha.stop_commands(out):
        run_cli(audit_argv(inputs, recordings, dest))
    results = json.loads((dest / "results.json").read_text(encoding="utf-8"))
    code = int(results["gate"]["exit_code"])
    run = _Run(inputs, dest, code, results, [])
    if inputs.baseline:
        _diff(run, out)
    return run


def _diff(run: _Run, out: TextIO) -> None:
    """Compare with the baseline run: a regression fails a passing gate.

    Skipped with a notice on a version of the engine without `diff`.
    """
    if "diff" not in _subcommands():
        _gha.command("notice", "this version has no `diff` command; skipping the baseline comparison", out, title="llm-fairness-check")
        return
    with _gha.group("Diff against the baseline", out), _gha.stop_commands(out):
        run_cli(diff_argv(run.inputs, run.out))
    data = json.loads((run.out / "diff" / "diff.json").read_text(encoding="utf-8"))
    run.diff_state = str(data.get("state", "undefined"))
    run.extra_md.append((run.out / "diff" / "diff.md").read_text(encoding="utf-8"))
    if run.code == 0 and run.diff_state in EXIT_CODES:
        run.code = exit_code(run.diff_state, run.inputs.fail_on)  # type: ignore[arg-type]


def _report(run: _Run, env: Mapping[str, str], out: TextIO) -> None:
    from fairness.recordings._store import write_atomic
    from fairness.report._junit import junit_xml

    dest = run.out
    write_atomic(dest / "junit.xml", junit_xml(run.results))
    markdown = "\n\n".join([(dest / "summary.md").read_text(encoding="utf-8"), *run.extra_md])
    if env.get("GITHUB_STEP_SUMMARY"):
        _gha.append_summary(env["GITHUB_STEP_SUMMARY"], markdown)
    gate = run.results.get("gate") or {}
    annotate(run.results, out)
    _gha.command("notice", f"gate {gate.get('state')}, exit code {run.code}", out, title="Fairness gate")
    if run.inputs.comment_on_pr:
        _comment(markdown, run.inputs, env, out)
    outputs = {
        "gate-status": str(gate.get("state")),
        "passed": "true" if run.code == 0 else "false",
        "exit-code": str(run.code),
        "worst-slices": json.dumps(worst_slices(run.results), ensure_ascii=False),
        "results-path": str((dest / "results.json").resolve()),
        "card-path": str((dest / "card.yaml").resolve()),
        "summary-path": str((dest / "summary.md").resolve()),
        "junit-path": str((dest / "junit.xml").resolve()),
    }
    if run.diff_state is not None:
        outputs["diff-status"] = run.diff_state
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
        run = _engine(inputs, env, out)
        _report(run, env, out)
        return run.code
    except FairnessError as exc:
        return _bad_input(str(exc), exc.exit_code, env, out)
    except Exception:  # noqa: BLE001 - a bug: keep the traceback, but inert
        with _gha.stop_commands(out):
            print(traceback.format_exc(), file=out)
        _gha.command("error", "internal error in llm-fairness-check (a bug); the traceback is in the log", out)
        return INTERNAL_ERROR
