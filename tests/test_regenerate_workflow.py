"""The nightly regeneration workflow, executed step by step by a runner stand-in on the CPU.

The stand-in reads .github/workflows/nightly-regenerate.yml and runs its jobs the way a
runner does (expressions and `if:` through tests/runner_standin.py, which plays a runner for
action.yml's composite steps): every `run:` step in bash with the job's env, `${{ }}` expressions evaluated
from vars/secrets/matrix/steps, $GITHUB_OUTPUT/$GITHUB_PATH/$GITHUB_STEP_SUMMARY honoured,
a fresh $RUNNER_TEMP and workspace per job, background processes killed at job end. The
few `uses:` actions are emulated: checkout clones a local bare remote, the artifact actions
copy directories, the App-token action is skipped (no App configured; a PAT secret is
used). The job's `container:` is not started (no Docker here): the image it would start is
asserted to be the one the `vet` job passed on the host, and isolation comes from the
workflow's own venv step, which is what is asserted. vLLM is played by tests/standin_vllm.py
on 127.0.0.1, and the GitHub API by a fake on 127.0.0.1.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest
import yaml
from local_server import JsonHandler, serve, stop
from runner_standin import _condition, interpolate
from standin_vllm import VERSION as STANDIN_VERSION
from test_action import parse_output_file

from fairness.cli import main as cli_main
from fairness.recordings._store import MANIFEST, RECORDS
from fairness.report._pr_body import load_run
from fairness.report._render import verdict_line

REPO = Path(__file__).resolve().parents[1]
WORKFLOW = REPO / ".github" / "workflows" / "nightly-regenerate.yml"
MODEL = "standin/Tiny-Instruct"
REVISION = "0123456789abcdef0123456789abcdef01234567"
RECORDINGS = "recordings/tiny/Tiny-Instruct"
SUITE = {
    "name": "tiny-regenerate",
    "system_prompt": "You are a helpful assistant.",
    "attributes": {"gender": ["man", "woman"]},
    "insertion": {"placeholder": "A", "template": "a {gender}"},
    "placeholders": {"OCC": {"values": ["nurse", "pilot"]}},
    "families": [{"id": "F1", "name": "Description", "paraphrases": ["Describe {A} who works as a {OCC}."]}],
    "regimes": [{"name": "low", "temperature": 0.2, "top_p": 0.9, "max_new_tokens": 32}],
    "seeds": [1, 2, 3],
}
"""2 slices x 2 occupations x 1 regime x 3 seeds = 12 rows."""

pytestmark = pytest.mark.slow


# -- the runner stand-in -------------------------------------------------------------------


class Runner:
    def __init__(self, root: Path, remote: Path, variables: dict[str, str], secrets: dict[str, str], env: dict[str, str]):
        self.root, self.remote = root, remote
        self.vars, self.secrets, self.base_env = variables, secrets, env
        self.workflow = yaml.safe_load(WORKFLOW.read_text(encoding="utf-8"))
        self.artifacts = root / "artifacts"
        self.summaries: dict[str, str] = {}
        self.temps: dict[str, Path] = {}
        self.needs: dict[str, dict[str, dict[str, str]]] = {}
        self.containers: list[str] = []
        self.jobs_run = 0

    def run_job(self, job_id: str, matrix: dict[str, Any] | None = None) -> dict[str, dict[str, str]]:
        job = self.workflow["jobs"][job_id]
        self.jobs_run += 1
        base = self.root / f"job{self.jobs_run}-{job_id}"
        temp, workspace = base / "temp", base / "work"
        temp.mkdir(parents=True)
        workspace.mkdir()
        self.temps[f"{job_id}{matrix or ''}"] = temp
        files = {n: temp / f"_{n}" for n in ("output", "path", "env", "summary")}
        needs = job.get("needs", [])
        needs = [needs] if isinstance(needs, str) else needs
        assert all(n in self.needs for n in needs), f"{job_id} needs {needs}; run them first"
        ctx: dict[str, Any] = {
            "vars": self.vars, "secrets": self.secrets, "matrix": matrix or {}, "steps": {},
            "runner": {"temp": str(temp)}, "github": {"repository": "octo/fairness"},
            "needs": {n: self.needs[n] for n in needs},
        }
        if "container" in job:  # not started here; the reference a runner would pull is recorded
            self.containers.append(interpolate(str(job["container"]["image"]), ctx))
        env = dict(self.base_env, RUNNER_TEMP=str(temp), GITHUB_WORKSPACE=str(workspace),
                   GITHUB_STEP_SUMMARY=str(files["summary"]))
        for scope in (self.workflow.get("env", {}), job.get("env", {})):
            for k, v in scope.items():
                ctx["env"] = env
                env[k] = interpolate(str(v), ctx)
        ctx["env"] = env
        paths: list[str] = []
        pgids: list[int] = []
        try:
            for step in job["steps"]:
                if not _condition(step.get("if"), ctx):
                    continue
                step_env = dict(env)
                for k, v in step.get("env", {}).items():
                    step_env[k] = interpolate(str(v), ctx)
                if "uses" in step:
                    self._uses(step, ctx, workspace)
                    continue
                for f in files.values():
                    if f.name != "_summary":
                        f.write_text("")
                step_env.update(GITHUB_OUTPUT=str(files["output"]), GITHUB_PATH=str(files["path"]),
                                GITHUB_ENV=str(files["env"]))
                step_env["PATH"] = os.pathsep.join([*reversed(paths), self.base_env["PATH"]])
                proc = subprocess.Popen(
                    ["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", step["run"]],
                    cwd=workspace, env=step_env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                    start_new_session=True,
                )
                pgids.append(proc.pid)
                out, _ = proc.communicate(timeout=600)
                assert proc.returncode == 0, f"step `{step.get('name')}` of {job_id} failed:\n{out}"
                paths += [p for p in files["path"].read_text().splitlines() if p]
                if "id" in step:
                    ctx["steps"][step["id"]] = {"outputs": parse_output_file(files["output"].read_text())}
        finally:
            for pgid in pgids:  # a runner kills what a job left running
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(pgid, signal.SIGTERM)
        self.summaries[f"{job_id}{matrix or ''}"] = files["summary"].read_text() if files["summary"].exists() else ""
        self.needs[job_id] = {"outputs": {k: interpolate(str(v), ctx) for k, v in job.get("outputs", {}).items()}}
        return ctx["steps"]

    def _uses(self, step: dict[str, Any], ctx: dict[str, Any], workspace: Path) -> None:
        action = step["uses"].split("@")[0]
        with_ = {k: interpolate(str(v), ctx) for k, v in step.get("with", {}).items()}
        if action == "actions/checkout":
            assert with_.get("persist-credentials") == "False" or with_.get("persist-credentials") == "false"
            subprocess.run(["git", "clone", "--quiet", str(self.remote), str(workspace)], check=True)
        elif action == "actions/setup-python":
            pass  # python3 on the stand-in's PATH is a clean interpreter, as setup-python's is
        elif action == "actions/upload-artifact":
            dest = self.artifacts / with_["name"]
            for line in filter(None, (x.strip() for x in with_["path"].splitlines())):
                src = workspace / line
                assert src.exists(), f"artifact path `{line}` is missing"
                shutil.copytree(src, dest if len(with_["path"].split()) == 1 else dest / src.name, dirs_exist_ok=True)
        elif action == "actions/download-artifact":
            pattern = with_["pattern"].replace("*", ".*")
            for art in sorted(self.artifacts.iterdir()):
                if re.fullmatch(pattern, art.name):
                    shutil.copytree(art, workspace / with_["path"] / art.name)
        else:
            raise AssertionError(f"the stand-in does not emulate `{action}`")


# -- a fake GitHub API ----------------------------------------------------------------------


class FakeGitHub:
    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        api = self

        class Handler(JsonHandler):
            def do_POST(self) -> None:
                body = self.read_json()
                api.requests.append({"method": "POST", "path": self.path, "auth": self.headers.get("Authorization"), "body": body})
                self.send_json(201, {"number": 7, "html_url": "https://github.example/octo/fairness/pull/7"})

        self.server, self.url = serve(Handler)

    def close(self) -> None:
        stop(self.server)


# -- setup ----------------------------------------------------------------------------------


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _git(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True).stdout.strip()


def _standin_bin(root: Path) -> Path:
    """python3 = a clean interpreter (not this test's venv); vllm = the 127.0.0.1 stand-in server."""
    bindir = root / "bin"
    bindir.mkdir()
    (bindir / "python3").symlink_to(Path(sys.base_prefix) / "bin" / f"python{sys.version_info.major}.{sys.version_info.minor}")
    vllm = bindir / "vllm"
    vllm.write_text(f'#!/bin/sh\nexec "{sys.executable}" "{REPO / "tests" / "standin_vllm.py"}" "$@"\n')
    vllm.chmod(0o755)
    # scripts/check-runner.sh --in-container, the GPU job's first step: a GPU, and a smoke row "generated"
    # by a CLI stand-in that only records the call (the job's own venv comes first on PATH after it)
    for name, body in (("nvidia-smi", 'echo "GPU 0: Stand-in GPU (UUID: GPU-0)"'),
                       ("llm-fairness-check", f'echo "$@" >> "{root}/check-runner.log"')):
        (bindir / name).write_text(f"#!/bin/sh\n{body}\n")
        (bindir / name).chmod(0o755)
    return bindir


def _listening(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.1):
            return True
    except OSError:
        return False


def _serve(port: int, night: str, pid_dir: Path) -> subprocess.Popen:
    env = dict(os.environ, STANDIN_NIGHT=night, STANDIN_PID_DIR=str(pid_dir))
    proc = subprocess.Popen([sys.executable, str(REPO / "tests" / "standin_vllm.py"), "serve", MODEL, "--port", str(port)], env=env)
    for _ in range(200):
        if _listening(port):
            return proc
        threading.Event().wait(0.05)
    raise AssertionError("the stand-in server did not start")


def _generate(out: Path, suite: Path, port: int, *extra: str) -> None:
    code = cli_main(["generate", "--live", "--no-progress", "--suite", str(suite), "--engine", "openai", "--model", MODEL,
                     "--revision", REVISION, "--base-url", f"http://127.0.0.1:{port}/v1", "--out", str(out), *extra])
    assert code == 0


def _seed_remote(root: Path, port: int) -> Path:
    """A bare remote holding the project and night 1's recordings of the tiny suite."""
    src = root / "seed"
    src.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(REPO / name, src / name)
    for name in ("fairness", ".github", "requirements", "scripts"):
        shutil.copytree(REPO / name, src / name, ignore=shutil.ignore_patterns("__pycache__"))
    (src / "suite.yaml").write_text(yaml.safe_dump(SUITE), encoding="utf-8")
    _generate(src / RECORDINGS, src / "suite.yaml", port)
    _git(src, "init", "--quiet", "--initial-branch=main")
    _git(src, "add", "-A")
    _git(src, "-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "--quiet", "-m", "night 1")
    remote = root / "remote.git"
    _git(root, "init", "--quiet", "--bare", str(remote))
    _git(src, "push", "--quiet", str(remote), "main")
    _git(remote, "symbolic-ref", "HEAD", "refs/heads/main")
    return remote


@pytest.fixture
def world(tmp_path, monkeypatch):
    monkeypatch.delenv("FAIRNESS_ALLOW_LIVE", raising=False)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    pid_dir = tmp_path / "pids"
    pid_dir.mkdir()
    port1 = _free_port()
    night1 = _serve(port1, "1", pid_dir)
    try:
        remote = _seed_remote(tmp_path, port1)
    finally:
        night1.terminate()
        night1.wait()
    github = FakeGitHub()
    bindir = _standin_bin(tmp_path)
    clean_path = os.pathsep.join(p for p in os.environ["PATH"].split(os.pathsep) if not p.startswith(sys.prefix))
    env = {
        "PATH": os.pathsep.join([str(bindir), clean_path]), "HOME": os.environ.get("HOME", str(tmp_path)),
        "GITHUB_REPOSITORY": "octo/fairness", "GITHUB_API_URL": github.url, "GITHUB_REF_NAME": "main",
        "GITHUB_ACTIONS": "true", "CI": "true", "STANDIN_NIGHT": "2", "STANDIN_PID_DIR": str(pid_dir),
        "LANG": "C.UTF-8", "FAIRNESS_MIN_FREE_GIB": "0",
    }
    env.update({k: v for k, v in os.environ.items() if k.startswith("PIP_")})
    variables = {
        "FAIRNESS_SUITE": "suite.yaml", "FAIRNESS_MODEL": MODEL, "FAIRNESS_RECORDINGS": RECORDINGS,
        "FAIRNESS_MODEL_REVISION": REVISION, "FAIRNESS_VLLM_PORT": str(_free_port()),
        "FAIRNESS_LIVE_IMAGE": "ghcr.io/octo/llm-fairness-check@sha256:" + "0" * 64,
    }
    runner = Runner(tmp_path, remote, variables, {"FAIRNESS_PR_TOKEN": "test-pr-token"}, env)
    yield runner, github, remote, tmp_path
    github.close()
    for pid_file in pid_dir.glob("*.pid"):
        with contextlib.suppress(ProcessLookupError):
            os.kill(int(pid_file.read_text()), signal.SIGTERM)


# -- the test -----------------------------------------------------------------------------


def test_the_nightly_workflow_regenerates_in_place_and_opens_a_checked_pr(world):
    runner, github, remote, root = world
    wf = runner.workflow
    shards = wf["jobs"]["generate"]["strategy"]["matrix"]["shard"]
    assert len(shards) == int(wf["env"]["SHARDS"]) == 2
    assert "--gpus all" in wf["jobs"]["generate"]["container"]["options"]

    # an unpinned model revision or image stops the run on the host, before any container
    image = runner.vars["FAIRNESS_LIVE_IMAGE"]
    for name, bad in (("FAIRNESS_MODEL_REVISION", "main"), ("FAIRNESS_LIVE_IMAGE", "ghcr.io/octo/llm-fairness-check:v1-live")):
        good, runner.vars[name] = runner.vars[name], bad
        with pytest.raises(AssertionError, match="step `Check the pins` of vet failed"):
            runner.run_job("vet")
        runner.vars[name] = good
    assert runner.needs == {} and runner.containers == []
    runner.run_job("vet")
    assert runner.needs["vet"] == {"outputs": {"image": image}}

    for k in shards:
        runner.run_job("generate", {"shard": k})
    assert runner.containers == [image, image]  # each shard's container is the vetted digest
    smoke = (root / "check-runner.log").read_text().splitlines()  # the runner was checked first, on each shard
    assert [ln.split(" --out ")[0] for ln in smoke] == 2 * [
        "models fetch smollm2", "generate --live --no-progress --engine transformers --model smollm2 --device cuda --max-rows 1"]
    for k in shards:
        shard_manifest = json.loads((runner.artifacts / f"shard-{k}" / MANIFEST).read_text())
        assert shard_manifest["shard"] == f"{k}/2"

    # without a PR token: the summary says so, the artifact is uploaded, nothing is pushed
    token = runner.secrets.pop("FAIRNESS_PR_TOKEN")
    runner.run_job("publish")
    assert "No pull-request token (FAIRNESS_PR_TOKEN)" in runner.summaries["publish"]
    assert (runner.artifacts / "fairness-regenerated" / "Tiny-Instruct" / MANIFEST).is_file()
    assert github.requests == []
    assert _git(remote, "branch", "--list", "--format=%(refname:short)").split() == ["main"]

    # with one: the same job pushes one commit and opens the PR
    runner.secrets["FAIRNESS_PR_TOKEN"] = token
    runner.run_job("publish")

    # isolated: the CLI ran from a fresh venv in the job's own $RUNNER_TEMP, not this interpreter
    publish_temp = runner.temps["publish"]
    venv = publish_temp / "fairness-venv"
    assert f"Environment: venv at {venv} (python {venv}/bin/python" in runner.summaries["publish"]
    assert venv.resolve() != Path(sys.prefix).resolve() and venv.resolve() != Path(sys.base_prefix).resolve()

    # one branch, one commit on top of main, touching only the model's recordings directory
    branch = "nightly/regenerate-Tiny-Instruct"
    assert _git(remote, "rev-list", "--count", f"main..{branch}") == "1"
    changed = _git(remote, "diff", "--name-only", "main", branch).splitlines()
    assert changed == [f"{RECORDINGS}/{MANIFEST}", f"{RECORDINGS}/{RECORDS}"]
    manifest = json.loads(_git(remote, "show", f"{branch}:{RECORDINGS}/{MANIFEST}"))
    assert manifest["model"]["id"] == MODEL and manifest["model"]["revision"] == REVISION
    assert manifest["backend"]["engine"] == "openai"
    assert manifest["backend"]["server"] == {"name": "vllm", "version": STANDIN_VERSION}
    assert manifest["complete"] is True and manifest["shard"] is None and manifest["rows"] == 12
    assert manifest["backend"]["details"]["merged_from"] == ["1/2", "2/2"]
    merged = subprocess.run(["git", "show", f"{branch}:{RECORDINGS}/{RECORDS}"], cwd=remote, check=True,
                            capture_output=True).stdout
    assert b"night 2" in merged and b"night 1" not in merged

    # the sharded matrix merges to the bytes of one unsharded run
    port = _free_port()
    server = _serve(port, "2", root / "pids")
    try:
        _generate(root / "whole", root / "seed" / "suite.yaml", port)
    finally:
        server.terminate()
        server.wait()
    assert (root / "whole" / RECORDS).read_bytes() == merged

    # the PR went to the API with the token, from the branch into main: verdict first, then the diff
    [req] = github.requests
    assert req["path"] == "/repos/octo/fairness/pulls" and req["auth"] == "Bearer test-pr-token"
    assert req["body"]["head"] == branch and req["body"]["base"] == "main"
    work = publish_temp / "regen"
    body = req["body"]["body"]
    assert body == (work / "pr-body.md").read_text()
    verdict = verdict_line(load_run(work / "head"))
    diff = (work / "diff.md").read_text().strip()
    assert body.startswith(f"{verdict}\n\n## Change against the committed recordings\n\n{diff}\n")
    assert f"at revision `{REVISION}`" in body and f"served by vllm {STANDIN_VERSION}" in body


def test_the_stand_in_keeps_the_case_of_an_or_value_and_compares_without_it():
    from runner_standin import evaluate

    assert evaluate("vars.MODEL || 'Qwen/Qwen2.5-7B-Instruct'", {"vars": {}}) == "Qwen/Qwen2.5-7B-Instruct"
    assert evaluate("vars.MODEL || 'x'", {"vars": {"MODEL": "Org/Model"}}) == "Org/Model"
    assert evaluate("env.ENGINE == 'VLLM'", {"env": {"ENGINE": "vllm"}}) is True
    assert evaluate("vars.APP != ''", {"vars": {}}) is False
