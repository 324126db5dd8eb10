"""`llm-fairness-check init`: what it scaffolds, what it refuses, and lint-clean workflows."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml
from conftest import REPO

from fairness.cli import _init
from fairness.cli import _main as cli
from fairness.suite._suite import load_suite

SHA = "0123456789abcdef0123456789abcdef01234567"
REF = f"acme/llm-fairness-check@{SHA}"
PROVIDERS = {
    "openai": ["--provider", "openai", "--model", "gpt-4o-mini"],
    "anthropic": ["--provider", "anthropic", "--model", "claude-3-5-haiku-latest", "--secret", "CLAUDE_KEY"],
    "openai-compatible": ["--provider", "openai-compatible", "--model", "meta-llama/Llama-3.1-8B-Instruct",
                          "--base-url", "https://llm.example.com/v1"],
    "local": ["--provider", "local", "--model", "Qwen/Qwen2.5-7B-Instruct", "--runner", "self-hosted-gpu"],
}


def init(tmp_path, *argv: str) -> int:
    return cli.main(["init", "--dir", str(tmp_path), "--action-ref", REF, *argv])


def workflows(tmp_path) -> tuple[dict, dict]:
    wf = tmp_path / ".github" / "workflows"
    return (yaml.safe_load((wf / "fairness-check.yml").read_text()), yaml.safe_load((wf / "fairness-regenerate.yml").read_text()))


def test_pr_workflow_pins_the_action_read_only_fork_safe_full_history(tmp_path, capsys):
    assert init(tmp_path, *PROVIDERS["openai"]) == 0
    text = (tmp_path / _init.PR_WORKFLOW).read_text()
    pr, _ = workflows(tmp_path)
    assert list(pr[True]) == ["pull_request"]  # YAML 1.1 reads the key `on` as True
    assert pr["permissions"] == {} and pr["jobs"]["fairness"]["permissions"] == {"contents": "read"}
    checkout, action = pr["jobs"]["fairness"]["steps"]
    assert checkout["with"] == {"fetch-depth": 0, "persist-credentials": False}
    assert action["uses"] == REF
    assert re.search(rf"uses: \"{re.escape(REF)}\" # v\d+\.\d+\.\d+\n", text)
    assert action["with"] == {"suite": "fairness-cards/qwen-v0.1", "recordings": "fairness-check/recordings/gpt-4o-mini",
                              "baseline-ref": "${{ github.event.pull_request.base.sha }}"}
    assert "secrets." not in text.split("\nname:", 1)[1]  # no secret reaches a pull request from a fork
    out = capsys.readouterr().out.splitlines()
    assert out[-4:] == [
        "next:",
        "  record: llm-fairness-check generate --suite fairness-cards/qwen-v0.1 --engine openai --model gpt-4o-mini "
        "--live --out fairness-check/recordings/gpt-4o-mini  (with OPENAI_API_KEY set)",
        "  commit: git add .github/workflows/fairness-check.yml .github/workflows/fairness-regenerate.yml "
        "fairness-check/recordings/gpt-4o-mini && git commit -m 'Add the fairness check with the recordings of gpt-4o-mini'",
        "  push:   git push",
    ]


def steps_named(job: dict) -> dict:
    return {s.get("name", s.get("uses")): s for s in job["steps"]}


@pytest.mark.parametrize("provider", list(PROVIDERS))
def test_regeneration_workflow_per_provider(tmp_path, provider):
    assert init(tmp_path, *PROVIDERS[provider]) == 0
    _, regen = workflows(tmp_path)
    assert set(regen[True]) == {"workflow_dispatch", "schedule"} and regen[True]["schedule"] == [{"cron": "17 4 * * 1"}]
    job = regen["jobs"]["regenerate"]
    assert job["permissions"] == {"contents": "read"}  # the PR is opened with secrets.FAIRNESS_PR_TOKEN
    assert "llm-fairness-check open-pr" in steps_named(job)["Open a pull request with the new recordings"]["run"]
    steps = {s.get("name", s.get("uses")): s for s in job["steps"]}
    pinned = steps["Check out llm-fairness-check at the pinned commit"]["with"]
    assert (pinned["repository"], pinned["ref"]) == ("acme/llm-fairness-check", SHA)
    record = steps["Record"]
    secrets = {k: v for k, v in record["env"].items() if k not in ("FAIRNESS_ALLOW_LIVE", "MODEL_REVISION")}
    assert ("MODEL_REVISION" in record["env"]) == (provider == "local")
    assert "llm-fairness-check regenerate" in record["run"] and '--out "$RECORDINGS"' in record["run"]
    expected = {
        "openai": ("ubuntu-latest", {"OPENAI_API_KEY": "${{ secrets.OPENAI_API_KEY }}"}, "--engine openai", "hosted"),
        "anthropic": ("ubuntu-latest", {"ANTHROPIC_API_KEY": "${{ secrets.CLAUDE_KEY }}"}, "--engine anthropic", "hosted"),
        "openai-compatible": ("ubuntu-latest", {}, '--engine openai --model "$MODEL" --base-url "https://llm.example.com/v1"', "hosted"),
        "local": (["self-hosted", "gpu"], {}, "--engine transformers", "live"),
    }[provider]
    assert job["runs-on"] == expected[0]
    assert secrets == expected[1]
    assert expected[2] in record["run"]
    assert f"--require-hashes --only-binary :all: \\\n  -r ./.llm-fairness-check/requirements/{expected[3]}.lock\n" in (
        steps["Install llm-fairness-check"]["run"])
    assert job["environment"] == "fairness-regenerate"  # it holds secrets.FAIRNESS_PR_TOKEN
    assert (tmp_path / _init.ACTIONLINT_CONFIG).is_file() == (provider == "local")


def test_with_suite_writes_an_editable_copy_the_workflows_use(tmp_path):
    assert init(tmp_path, *PROVIDERS["openai"], "--with-suite") == 0
    copy = load_suite(tmp_path / _init.SUITE_COPY)
    builtin = load_suite("fairness-cards/qwen-v0.1")
    assert copy.expand() == builtin.expand() and copy.rules == builtin.rules
    assert copy.name == f"{tmp_path.name}/fairness-suite"
    pr, regen = workflows(tmp_path)
    assert pr["jobs"]["fairness"]["steps"][1]["with"]["suite"] == _init.SUITE_COPY
    assert regen["jobs"]["regenerate"]["env"]["SUITE"] == _init.SUITE_COPY


def test_refuses_to_overwrite_without_force(tmp_path, capsys):
    existing = tmp_path / _init.REGEN_WORKFLOW
    existing.parent.mkdir(parents=True)
    existing.write_text("mine\n")
    assert init(tmp_path, *PROVIDERS["openai"]) == 2
    assert capsys.readouterr().err == f"error: `{existing}` already exists; pass --force to overwrite it\n"
    assert existing.read_text() == "mine\n" and not (tmp_path / _init.PR_WORKFLOW).exists()  # nothing written
    assert init(tmp_path, *PROVIDERS["openai"], "--force") == 0
    assert existing.read_text().startswith("# Scaffolded by `llm-fairness-check init`")


@pytest.mark.parametrize(("argv", "message"), [
    (["--provider", "openai-compatible", "--model", "m"],
     "`--provider openai-compatible` needs `--base-url` (the server's URL, e.g. https://host/v1)"),
    (["--provider", "openai", "--model", "m", "--base-url", "https://x/v1"], "`--base-url` is for `--provider openai-compatible` only"),
    (["--provider", "local", "--model", "m", "--runner", "ubuntu-latest"],
     "`--provider local` runs the model on a GPU: use `--runner self-hosted-gpu`"),
    (["--provider", "openai", "--model", "${{ github.event.issue.title }}"],
     "`--model` '${{ github.event.issue.title }}' must be one line without `${{` (GitHub would evaluate it)"),
    (["--provider", "openai-compatible", "--model", "m", "--base-url", "https://user:pw@host/v1"],
     "`--base-url` 'https://host/v1' must not carry credentials (user:password@): the key goes in a repository secret "
     "(--secret)"),
    (["--provider", "openai-compatible", "--model", "m", "--base-url", "ftp://user:pw@host/v1"],
     "`--base-url` 'ftp://host/v1' must be an http(s) URL without spaces"),
    (["--provider", "openai-compatible", "--model", "m", "--base-url", "http://tok3n@[::1"],
     "`--base-url` 'http://[::1' must be an http(s) URL without spaces"),
])
def test_bad_flags_are_one_line_exit_2(tmp_path, capsys, argv, message):
    assert init(tmp_path, *argv) == 2
    assert capsys.readouterr().err == f"error: {message}\n"
    assert not (tmp_path / ".github").exists()


def test_action_ref_must_be_a_full_sha(tmp_path, capsys):
    assert cli.main(["init", "--dir", str(tmp_path), "--action-ref", "acme/llm-fairness-check@v1", *PROVIDERS["openai"]]) == 2
    assert "must be OWNER/REPO@<40-hex commit sha>" in capsys.readouterr().err


def test_default_action_ref_is_the_commit_of_this_checkout(tmp_path):
    if not (REPO / ".git").exists() or shutil.which("git") is None:
        pytest.skip("not running from a git checkout of llm-fairness-check")
    head = subprocess.run(["git", "-C", str(REPO), "rev-parse", "HEAD"], capture_output=True, text=True, check=True).stdout.strip()
    assert _init.action_ref(None, REPO) == (_init.ACTION_REPO, head)
    with pytest.raises(_init.FairnessError, match="pass --action-ref"):
        _init.action_ref(None, tmp_path)  # not a checkout: no commit to pin


def _tool(name: str) -> str:
    path = shutil.which(name)
    if not path:
        pytest.skip(f"`{name}` is not installed (pip install '.[test]')")
    return path


@pytest.mark.parametrize("provider", list(PROVIDERS))
def test_scaffolded_workflows_pass_actionlint_and_zizmor(tmp_path, provider):
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    assert init(tmp_path, *PROVIDERS[provider], "--with-suite") == 0
    lint = subprocess.run([_tool("actionlint")], cwd=tmp_path, capture_output=True, text=True, check=False, timeout=120)
    assert (lint.returncode, lint.stdout + lint.stderr) == (0, "")
    audit = subprocess.run([_tool("zizmor"), "--offline", "--no-progress", "."], cwd=tmp_path, capture_output=True,
                           text=True, check=False, timeout=120)
    assert audit.returncode == 0, audit.stdout + audit.stderr
    assert "No findings to report" in audit.stdout


# -- issue 19: symlinks, a scaffold replaced whole or not at all, quoted YAML, no credentials --------------


@pytest.mark.parametrize("link", [".github", ".github/workflows"])
def test_refuses_a_symlink_that_leads_out_of_the_repository(tmp_path, capsys, link):
    repo, outside = tmp_path / "repo", tmp_path / "outside"
    repo.mkdir()
    outside.mkdir()
    (repo / link).parent.mkdir(parents=True, exist_ok=True)
    (repo / link).symlink_to(outside, target_is_directory=True)
    assert init(repo, *PROVIDERS["openai"]) == 2
    assert capsys.readouterr().err == (f"error: `{repo / link}` is a symbolic link leading out of the repository "
                                       f"(to `{outside}`); refusing to write through it\n")
    assert list(outside.iterdir()) == [] and sorted(p.name for p in repo.iterdir()) == [".github"]


def test_a_symlink_inside_the_repository_is_followed(tmp_path):
    (tmp_path / "ci").mkdir()
    (tmp_path / ".github").symlink_to(tmp_path / "ci", target_is_directory=True)
    assert init(tmp_path, *PROVIDERS["openai"]) == 0
    assert (tmp_path / "ci" / "workflows" / "fairness-check.yml").is_file()


def _scaffold(tmp_path) -> dict[str, str]:
    assert init(tmp_path, *PROVIDERS["openai"], "--with-suite") == 0
    return {rel: (tmp_path / rel).read_text() for rel in (_init.PR_WORKFLOW, _init.REGEN_WORKFLOW, _init.SUITE_COPY)}


def _leftovers(tmp_path) -> list[str]:
    return sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*") if p.name.startswith(".") and p.name != ".github")


def test_force_refuses_before_replacing_anything(tmp_path, capsys):
    before = _scaffold(tmp_path)
    (tmp_path / _init.SUITE_COPY).unlink()
    (tmp_path / _init.SUITE_COPY).mkdir()  # the last file's place is taken by a directory
    capsys.readouterr()
    assert init(tmp_path, *PROVIDERS["anthropic"], "--with-suite", "--force") == 2
    assert capsys.readouterr().err == f"error: `{tmp_path / _init.SUITE_COPY}` is a directory; refusing to replace it\n"
    assert {rel: (tmp_path / rel).read_text() for rel in before if rel != _init.SUITE_COPY} == {
        rel: text for rel, text in before.items() if rel != _init.SUITE_COPY}
    (tmp_path / _init.SUITE_COPY).rmdir()
    (tmp_path / "fairness-check").rmdir()
    (tmp_path / "fairness-check").write_text("a file where the suite's directory goes")
    assert init(tmp_path, *PROVIDERS["anthropic"], "--with-suite", "--force") == 2
    assert capsys.readouterr().err == (f"error: `{tmp_path / 'fairness-check'}` is not a directory; cannot write "
                                       f"`{tmp_path / _init.SUITE_COPY}`\n")
    assert (tmp_path / _init.REGEN_WORKFLOW).read_text() == before[_init.REGEN_WORKFLOW] and _leftovers(tmp_path) == []


def test_force_puts_the_previous_scaffold_back_when_a_move_fails(tmp_path, capsys, monkeypatch):
    import errno
    import os

    before = _scaffold(tmp_path)
    real, failed = os.replace, []

    def replace(src, dst):  # the disk fails once, moving the last file into place
        if Path(dst) == tmp_path / _init.SUITE_COPY and not failed:
            failed.append(src)
            raise OSError(errno.EIO, "Input/output error", str(src))
        return real(src, dst)

    monkeypatch.setattr(os, "replace", replace)
    capsys.readouterr()
    assert init(tmp_path, *PROVIDERS["anthropic"], "--with-suite", "--force") == 2
    err = capsys.readouterr().err
    assert err == (f"error: cannot write `{tmp_path / _init.SUITE_COPY}`: Input/output error; "
                   "the previous files are back in place\n")
    assert {rel: (tmp_path / rel).read_text() for rel in before} == before
    assert _leftovers(tmp_path) == []


@pytest.mark.parametrize("model", ["null", "1.10", "a: b", "yes", "~", "0x1F", "#x", "'q'"])
def test_every_rendered_yaml_value_is_a_string(tmp_path, model):
    assert init(tmp_path, "--provider", "openai", "--model", model, "--recordings", "1.10", "--suite", "true") == 0
    pr, regen = workflows(tmp_path)
    assert regen["jobs"]["regenerate"]["env"] == {"SUITE": "true", "MODEL": model, "RECORDINGS": "1.10"}
    assert pr["jobs"]["fairness"]["steps"][1]["with"] == {
        "suite": "true", "recordings": "1.10", "baseline-ref": "${{ github.event.pull_request.base.sha }}"}
    title = steps_named(regen["jobs"]["regenerate"])["Open a pull request with the new recordings"]["run"]
    assert model not in title and '"Fairness: new recordings of $MODEL"' in title  # reaches the shell as a variable


def test_a_numeric_action_sha_stays_a_string(tmp_path):
    sha = "1234567890" * 4
    assert cli.main(["init", "--dir", str(tmp_path), "--action-ref", f"acme/x@{sha}", *PROVIDERS["openai"]]) == 0
    pr, regen = workflows(tmp_path)
    pinned = steps_named(regen["jobs"]["regenerate"])["Check out llm-fairness-check at the pinned commit"]["with"]
    assert pinned["ref"] == sha and pr["jobs"]["fairness"]["steps"][1]["uses"] == f"acme/x@{sha}"
