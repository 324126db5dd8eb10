"""A stand-in for the GitHub runner that executes action.yml's composite steps as GitHub does.

Each `run:` step runs with `bash --noprofile --norc -eo pipefail` in GITHUB_WORKSPACE, with
the step's `env:` (expressions evaluated: `inputs.*`, `github.*`, `runner.*`, `steps.*`),
a fresh GITHUB_OUTPUT per step (read back into `steps.<id>.outputs`), GITHUB_STEP_SUMMARY,
RUNNER_TEMP and GITHUB_ACTION_PATH. `uses:` steps (setup-python, cache, upload-artifact)
are not run: their outputs come from `uses_outputs`, keyed by step id. A failed step fails the
action; later steps run only when their `if:` asks for it (`always()`, `failure()`).

Installing is the one thing a test machine cannot do as a runner does (no fresh download
of every dependency); `python_shim` gives setup-python's `python-path` an interpreter whose
`-m venv DIR` makes DIR/bin/python this test environment's interpreter and whose
`-m pip` / `uv pip` are no-ops: the package is already installed (editable) here.
"""

from __future__ import annotations

import itertools
import os
import re
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from test_action import parse_output_file

_EXPR = re.compile(r"\$\{\{\s*(.*?)\s*\}\}")
_STATUS = re.compile(r"\b(?:always|success|failure|cancelled)\(\)")
_TOKEN = re.compile(r"'(?:[^']|'')*'|(?:always|success|failure|cancelled)\(\)|&&|\|\||==|!=|!|\(|\)|[A-Za-z_][\w.-]*"
                    r"|\d+(?:\.\d+)?|\s+")


@dataclass
class StepResult:
    name: str
    code: int
    stdout: str
    stderr: str
    skipped: bool = False


@dataclass
class ActionResult:
    code: int
    outputs: dict[str, str]
    summary: str
    steps: list[StepResult] = field(default_factory=list)

    @property
    def log(self) -> str:
        return "\n".join(s.stdout + s.stderr for s in self.steps)


def _lookup(path: str, context: dict[str, Any]) -> Any:
    value: Any = context
    for part in path.split("."):
        if not isinstance(value, dict):
            return ""
        value = value.get(part, "")
    return value


def _value(tok: str, context: dict[str, Any]) -> Any:
    if _STATUS.fullmatch(tok):
        failed = bool(context.get("job_failed"))
        return {"always()": True, "success()": not failed, "failure()": failed, "cancelled()": False}[tok]
    if tok.startswith("'"):
        return tok[1:-1].replace("''", "'")
    if tok in ("true", "false"):
        return tok == "true"
    if re.fullmatch(r"\d+(?:\.\d+)?", tok):
        return float(tok)
    return _lookup(tok, context)


class _Text(str):
    """A string that compares case-insensitively, as GitHub's `==` and `!=` do, but keeps its case
    when `||` / `&&` return it (`vars.MODEL || 'Org/Model'` is the value, not its lower case)."""

    def __eq__(self, other: object) -> bool:
        return isinstance(other, str) and self.lower() == other.lower()

    def __ne__(self, other: object) -> bool:
        return not self == other

    __hash__ = str.__hash__


def evaluate(expr: str, context: dict[str, Any]) -> Any:
    """The subset of the expression language action.yml uses: context paths, string and number
    literals, `==`, `!=`, `!`, `&&`, `||` and parentheses (GitHub compares strings case-insensitively)."""
    tokens = []
    pos = 0
    for m in _TOKEN.finditer(expr):
        if m.start() != pos:
            break
        pos = m.end()
        if not m.group(0).isspace():
            tokens.append(m.group(0))
    if pos != len(expr) or not tokens:
        raise ValueError(f"the stand-in does not support the expression {expr!r}")
    calls = [t for t, nxt in itertools.pairwise(tokens) if nxt == "(" and t not in ("&&", "||", "!", "(", "==", "!=")]
    if calls:  # hashFiles(), format(), contains() … are not emulated
        raise ValueError(f"the stand-in does not support the function {calls[0]}() in {expr!r}")
    if len(tokens) == 1:
        return _value(tokens[0], context)
    ops = {"&&": " and ", "||": " or ", "!": " not ", "(": "(", ")": ")", "==": " == ", "!=": " != "}
    py, values = [], []
    for tok in tokens:
        if tok in ops:
            py.append(ops[tok])
            continue
        v = _value(tok, context)
        values.append(_Text(v) if isinstance(v, str) else v)
        py.append(f"_v[{len(values) - 1}]")
    result = eval("".join(py), {"__builtins__": {}}, {"_v": values})  # only whitelisted tokens reach it
    return str(result) if isinstance(result, _Text) else result


def interpolate(text: str, context: dict[str, Any]) -> str:
    def one(m: re.Match) -> str:
        value = evaluate(m.group(1), context)
        return ("true" if value else "false") if isinstance(value, bool) else str(value)

    return _EXPR.sub(one, text)


def _condition(cond: Any, context: dict[str, Any]) -> bool:
    """A step's `if:`; without a status function GitHub adds `success() &&`."""
    text = "success()" if cond is None else str(cond).strip()
    m = _EXPR.fullmatch(text)
    expr = m.group(1) if m else text
    if not _STATUS.search(expr):
        expr = f"success() && ({expr})"
    return bool(evaluate(expr, context))


def python_shim(directory: Path) -> Path:
    """An interpreter for setup-python's `python-path`: venvs and installs reuse this environment."""
    directory.mkdir(parents=True, exist_ok=True)
    venv_python = directory / "venv-python"
    venv_python.write_text(
        "#!/bin/bash\n"
        "# a stand-in venv interpreter: installing is a no-op, everything else is the test interpreter\n"
        'if [ "${1:-}" = "-m" ] && [ "${2:-}" = "pip" ]; then echo "stand-in: pip $*: already installed"; exit 0; fi\n'
        f'exec "{sys.executable}" "$@"\n'
    )
    shim = directory / "python"
    shim.write_text(
        "#!/bin/bash\n"
        'if [ "${1:-}" = "-m" ] && [ "${2:-}" = "venv" ]; then\n'
        '  for last in "$@"; do :; done\n'
        '  mkdir -p "$last/bin" && rm -f "$last/bin/python"\n'
        f'  ln -s "{venv_python}" "$last/bin/python" && ln -sf python "$last/bin/python3"\n'
        '  echo "stand-in: venv $last reuses the test environment"; exit 0\n'
        "fi\n"
        'if [ "${1:-}" = "-m" ] && [ "${2:-}" = "pip" ]; then echo "stand-in: pip: already installed"; exit 0; fi\n'
        f'exec "{sys.executable}" "$@"\n'
    )
    for p in (venv_python, shim):
        p.chmod(0o755)
    return shim


def run_composite(
    action_dir: Path,
    workspace: Path,
    temp: Path,
    inputs: dict[str, str],
    *,
    github: dict[str, Any] | None = None,
    uses_outputs: dict[str, dict[str, str]] | None = None,
    extra_env: dict[str, str] | None = None,
) -> ActionResult:
    """Run `action_dir/action.yml` with `inputs` (the caller's `with:`), as a job step would."""
    doc = yaml.safe_load((action_dir / "action.yml").read_text(encoding="utf-8"))
    temp.mkdir(parents=True, exist_ok=True)
    summary_file = temp / "step_summary.md"
    summary_file.write_text("")
    context: dict[str, Any] = {
        "github": {"action_path": str(action_dir), "workspace": str(workspace), "token": "", **(github or {})},
        "runner": {"temp": str(temp), "os": "Linux", "arch": "X64"},
        "steps": {},
        "env": {},
        "job_failed": False,
    }
    resolved: dict[str, str] = {}
    for name, spec in (doc.get("inputs") or {}).items():
        if name in inputs:
            resolved[name] = inputs[name]
        else:
            resolved[name] = interpolate(str(spec.get("default", "")), context)
    context["inputs"] = resolved
    base_env = {k: v for k, v in os.environ.items()
                if not k.startswith(("GITHUB_", "INPUT_", "FAIRNESS_", "RUNNER_")) and "proxy" not in k.lower()}
    base_env.update(GITHUB_ACTIONS="true", CI="true", GITHUB_WORKSPACE=str(workspace), GITHUB_ACTION_PATH=str(action_dir),
                    RUNNER_TEMP=str(temp), RUNNER_OS="Linux", GITHUB_STEP_SUMMARY=str(summary_file), **(extra_env or {}))
    steps: list[StepResult] = []
    code = 0
    for i, step in enumerate(doc["runs"]["steps"]):
        sid = step.get("id", f"__{i}")
        name = step.get("name") or step.get("uses") or sid
        if not _condition(step.get("if"), context):
            steps.append(StepResult(name, 0, "", "", skipped=True))
            continue
        if "uses" in step:
            context["steps"][sid] = {"outputs": dict((uses_outputs or {}).get(sid, {})), "outcome": "success"}
            steps.append(StepResult(name, 0, "", "", skipped=True))
            continue
        output_file = temp / f"output_{i}"
        output_file.write_text("")
        env = {**base_env, "GITHUB_OUTPUT": str(output_file)}
        env.update({k: interpolate(str(v), context) for k, v in (step.get("env") or {}).items()})
        script = temp / f"step_{i}.sh"
        script.write_text(interpolate(step["run"], context))
        if step.get("shell") != "bash":
            raise ValueError(f"step {name!r}: the stand-in runs shell: bash only")
        proc = subprocess.run(["bash", "--noprofile", "--norc", "-eo", "pipefail", str(script)], cwd=workspace, env=env,
                              capture_output=True, text=True, check=False, timeout=600)
        context["steps"][sid] = {"outputs": parse_output_file(output_file.read_text()),
                                 "outcome": "success" if proc.returncode == 0 else "failure"}
        steps.append(StepResult(name, proc.returncode, proc.stdout, proc.stderr))
        if proc.returncode != 0 and not code:
            code = proc.returncode  # later steps run only if their `if:` asks for it (always(), failure())
            context["job_failed"] = True
    outputs = {name: interpolate(str(spec.get("value", "")), context) for name, spec in (doc.get("outputs") or {}).items()}
    return ActionResult(code, outputs, summary_file.read_text(), steps)
