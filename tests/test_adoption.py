"""The whole adoption, as a new user plays it, in an empty git repository.

`init` → edit the suite copy down → record it from an OpenAI-compatible server on
127.0.0.1 with the printed command → commit with the printed command → the pull-request
workflow's Action step, run by a runner stand-in over action.yml's composite steps (the
workspace is the user's repository, not the Action's checkout) → pass; then a second
commit whose recordings regress for one slice → the step fails on the regression against
`baseline-ref`, although the head passes its absolute rule on its own.

The recorded texts come from the local test server (a fixture, not a committed recording).
"""

from __future__ import annotations

import json
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from conftest import REPO
from runner_standin import interpolate, python_shim, run_composite
from test_hosted import FakeAPI

from fairness.cli import _init
from fairness.cli import _main as cli

MODEL = "adopt-model"
RECORDINGS = f"fairness-check/recordings/{MODEL}"
STEREOTYPED = "  A quiet, traditional candidate.\n"


@pytest.fixture
def api():
    fake = FakeAPI()
    yield fake
    fake.close()


@pytest.fixture
def adopter(tmp_path, monkeypatch) -> Path:
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    repo = tmp_path / "adopter"
    repo.mkdir()
    for var in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "FAIRNESS_ALLOW_LIVE"):
        monkeypatch.delenv(var, raising=False)
    for var, value in {"GIT_AUTHOR_NAME": "Ada", "GIT_AUTHOR_EMAIL": "ada@example.com",
                       "GIT_COMMITTER_NAME": "Ada", "GIT_COMMITTER_EMAIL": "ada@example.com"}.items():
        monkeypatch.setenv(var, value)
    monkeypatch.chdir(repo)
    git("init", "-q", "-b", "main")
    Path("README.md").write_text("# A product built on an LLM\n")
    git("add", "README.md")
    git("commit", "-q", "-m", "Initial commit")
    return repo


def git(*args: str) -> str:
    return subprocess.run(["git", *args], capture_output=True, text=True, check=True).stdout.strip()


def edit_suite_down(path: Path) -> None:
    """One family, two occupations, one regime, one seed: 5 × 2 × 4 slices = 40 rows (10 per slice).

    The absolute threshold is made lenient (0.6), so that what fails the second pull request
    is the regression rule alone."""
    suite = yaml.safe_load(path.read_text())
    suite["families"] = suite["families"][:1]
    suite["placeholders"]["OCC"]["values"] = ["nurse", "engineer"]
    suite["regimes"] = suite["regimes"][:1]
    suite["seeds"] = [1]
    absolute = next(r for r in suite["rules"] if r.get("kind", "absolute") == "absolute")
    absolute["threshold"] = 0.6
    path.write_text(yaml.safe_dump(suite, sort_keys=False))


def record(command: str) -> None:
    argv = shlex.split(command)
    assert argv[0] == "llm-fairness-check"
    assert cli.main([*argv[1:], "--no-progress"]) == 0


def action_step(workspace: Path, temp: Path, base_sha: str):
    """The scaffolded workflow's Action step, with its `with:` as GitHub would evaluate it for a pull request."""
    workflow = yaml.safe_load((workspace / _init.PR_WORKFLOW).read_text())
    step = next(s for s in workflow["jobs"]["fairness"]["steps"] if "checkout" not in s["uses"])
    pr_context = {"github": {"event": {"pull_request": {"base": {"sha": base_sha}}}}}
    inputs = {k: interpolate(str(v), pr_context) for k, v in step["with"].items()}
    assert inputs["baseline-ref"] == base_sha
    inputs["bootstrap"] = "500"
    # this machine cannot install as a fresh runner does: the install step reuses the test environment
    shim = python_shim(temp / "shim")
    return run_composite(REPO, workspace, temp / "runner", inputs, uses_outputs={"python": {"python-path": str(shim)}},
                         extra_env={"FAIRNESS_PREINSTALLED_PYTHON": sys.executable})


def test_adopt_record_gate_and_fail_on_a_regression(adopter, api, tmp_path, capsys):
    initial = git("rev-parse", "HEAD")

    # init: the workflows and an editable suite, then three commands to finish
    assert cli.main(["init", "--provider", "openai-compatible", "--base-url", f"{api.url}/v1", "--model", MODEL,
                     "--with-suite", "--action-ref", f"acme/llm-fairness-check@{'a' * 40}"]) == 0
    printed = capsys.readouterr().out.splitlines()
    record_cmd, commit_cmd, push_cmd = (ln.split(":", 1)[1].strip() for ln in printed[-3:])
    assert push_cmd == "git push"
    edit_suite_down(adopter / _init.SUITE_COPY)

    # record and commit, as printed
    record(record_cmd)
    manifest = json.loads((adopter / RECORDINGS / "manifest.json").read_text())
    assert (manifest["rows"], manifest["complete"], manifest["backend"]["engine"]) == (40, True, "openai")
    assert len(api.requests) == 40
    subprocess.run(commit_cmd, shell=True, check=True, capture_output=True)
    adopted = git("rev-parse", "HEAD")
    assert git("show", "--stat", "--format=", "HEAD").count("|") == 5  # 2 workflows, suite, manifest, records

    # the pull request that adopts the check: its base has no recordings yet
    first = action_step(adopter, tmp_path / "pr1", base_sha=initial)
    assert first.code == 0, first.log
    assert (first.outputs["gate-status"], first.outputs["passed"], first.outputs["exit-code"]) == ("pass", "true", "0")
    assert first.outputs["diff-status"] == ""  # skipped
    assert f"the base revision commit `{initial[:12]}` has no recordings at `{RECORDINGS}`" in first.log
    assert first.summary.startswith(f"## Fairness audit: `{adopter.name}/fairness-suite` on `{MODEL}`\n\n✅ **PASS**")
    results = json.loads(Path(first.outputs["results-path"]).read_text())
    assert results["recordings"]["model_id"] == MODEL
    assert Path(first.outputs["results-path"]).is_relative_to(adopter)  # written in the user's workspace

    # a change that makes the model stereotype one slice: re-record, commit
    api.text_for = lambda body: (STEREOTYPED if "a woman who is Muslim" in body["messages"][-1]["content"]
                                 and "nurse" in body["messages"][-1]["content"] else FakeAPI.text_for(body))
    shutil.rmtree(adopter / RECORDINGS)
    record(record_cmd)
    git("add", RECORDINGS)
    git("commit", "-q", "-m", "Re-record after the prompt change")

    second = action_step(adopter, tmp_path / "pr2", base_sha=adopted)
    assert second.code == 1, second.log
    assert (second.outputs["gate-status"], second.outputs["diff-status"], second.outputs["passed"]) == ("fail", "fail", "false")
    head = json.loads(Path(second.outputs["results-path"]).read_text())
    # on its own: worst slice 0.5 against 0.6 on 10 rows, not settled; the regression decides
    assert (head["gate"]["state"], head["gate"]["head_state"], head["gate"]["regression_state"]) == ("fail", "inconclusive", "fail")
    diff = json.loads((adopter / "fairness-out" / "diff" / "diff.json").read_text())
    (check,) = diff["checks"]
    assert (check["rule"], check["scope"], check["state"], check["change"]) == ("stereotype-regression", "family=F1", "fail", 0.5)
    assert check["ci"][0] > 0.02
    assert second.summary.splitlines()[2].startswith(f"❌ **FAIL** — a confident regression against commit `{adopted[:12]}`")
    assert "::error title=Fairness regression stereotype-regression [family=F1%2C slice woman_Muslim]::" in second.log


def test_runner_standin_evaluates_expressions_as_github_does():
    from runner_standin import _condition, evaluate

    ctx = {"inputs": {"mode": "Replay", "upload-artifact": "true"}, "runner": {"os": "Linux"},
           "steps": {"cache": {"outputs": {}}, "fairness": {"outputs": {"artifact-name": "card"}}}, "job_failed": False}
    assert evaluate("inputs.mode", ctx) == "Replay"  # a bare value keeps its case
    assert evaluate("inputs.mode == 'replay'", ctx) is True  # comparisons ignore case
    assert evaluate("steps.cache.outputs.cache-hit != 'true' && runner.os != 'Windows'", ctx) is True
    assert interpolate("venv-${{ runner.os }}-${{ steps.missing.outputs.x }}", ctx) == "venv-Linux-"
    assert _condition("inputs.mode != 'live'", ctx) is True
    ctx["job_failed"] = True  # after a failed step only always() / failure() steps run
    assert _condition("inputs.mode != 'live'", ctx) is False
    assert _condition("always() && steps.fairness.outputs.artifact-name != ''", ctx) is True
    assert _condition("${{ failure() }}", ctx) is True
    with pytest.raises(ValueError, match="does not support"):
        evaluate("hashFiles('x')", ctx)
