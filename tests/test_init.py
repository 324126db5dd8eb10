"""`llm-fairness-check init`: what it scaffolds, what it refuses, and lint-clean workflows."""

from __future__ import annotations

import importlib.util
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from conftest import REPO

from fairness import _release
from fairness._version import __version__
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
    assert f'uses: "{REF}" # pinned with --action-ref\n' in text
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


def test_without_a_ref_a_source_install_refuses_in_one_line(tmp_path, capsys):
    """A source checkout has no stamped release (fairness/_release.py), and a local commit exists nowhere else."""
    assert (_release.ACTION_REF, _release.ACTION_TAG) == (None, None)
    assert cli.main(["init", "--dir", str(tmp_path), *PROVIDERS["openai"]]) == 2
    assert capsys.readouterr().err == (
        "error: no Action commit to pin: this llm-fairness-check was not built by a release; pass --action-ref "
        "fairness-cards/llm-fairness-check@<40-hex sha> (the sha of `v1`: git ls-remote "
        "https://github.com/fairness-cards/llm-fairness-check refs/tags/v1)\n")
    assert list(tmp_path.iterdir()) == []


def test_a_release_build_pins_its_stamped_commit_and_tag(tmp_path, monkeypatch):
    monkeypatch.setattr(_release, "ACTION_REF", SHA)
    monkeypatch.setattr(_release, "ACTION_TAG", "v1.2.3")
    assert cli.main(["init", "--dir", str(tmp_path), *PROVIDERS["local"]]) == 0
    text = (tmp_path / _init.PR_WORKFLOW).read_text()
    assert f'uses: "fairness-cards/llm-fairness-check@{SHA}" # v1.2.3\n' in text
    pinned = steps_named(workflows(tmp_path)[1]["jobs"]["regenerate"])["Check out llm-fairness-check at the pinned commit"]
    assert pinned["with"] == {"repository": "fairness-cards/llm-fairness-check", "ref": SHA, "path": ".llm-fairness-check",
                              "persist-credentials": False}
    assert f'ref: "{SHA}" # v1.2.3\n' in (tmp_path / _init.REGEN_WORKFLOW).read_text()


def test_a_bare_sha_pins_the_upstream_repository():
    assert _init.action_ref(SHA) == ("fairness-cards/llm-fairness-check", SHA, "pinned with --action-ref")
    assert _init.action_ref(None, ("o/r", SHA, None)) == ("o/r", SHA, "release")


# -- the release stamp -------------------------------------------------------------------------


def _stamp_module():
    spec = importlib.util.spec_from_file_location("stamp_release", REPO / "scripts" / "stamp_release.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_release_stamp_sets_repository_commit_and_tag():
    stamp = _stamp_module()
    text = stamp.stamp((REPO / "fairness" / "_release.py").read_text(), "octo/fork", SHA, "v1.2.3", "1.2.3")
    values: dict = {}
    exec(compile(text, "_release.py", "exec"), values)
    assert (values["ACTION_REPOSITORY"], values["ACTION_REF"], values["ACTION_TAG"]) == ("octo/fork", SHA, "v1.2.3")
    assert values["CODE_URL"] == "https://github.com/octo/fork"


@pytest.mark.parametrize(("args", "message"), [
    (("o/r", "abc", "v1.2.3", "1.2.3"), "--ref 'abc' must be a 40-hex commit sha"),
    (("o/r", SHA, "v1.2", "1.2.3"), "--tag 'v1.2' must look like v1.2.3"),
    (("o r", SHA, "v1.2.3", "1.2.3"), "--repository 'o r' must be OWNER/NAME"),
    (("o/r", SHA, "v1.0.0", "0.1.0"), "tag v1.0.0 does not match the package version 0.1.0: set the version to 1.0.0 "
                                      "in pyproject.toml and fairness/_version.py, commit, and tag that commit"),
])
def test_the_release_stamp_refuses_bad_values(args, message):
    with pytest.raises(ValueError) as exc:
        _stamp_module().stamp((REPO / "fairness" / "_release.py").read_text(), *args)
    assert str(exc.value) == message


def test_the_stamp_script_is_one_line_exit_2_and_writes_nothing(tmp_path):
    target = tmp_path / "_release.py"
    target.write_text((REPO / "fairness" / "_release.py").read_text())
    proc = subprocess.run([sys.executable, str(REPO / "scripts" / "stamp_release.py"), "--repository", "o/r", "--ref", SHA,
                           "--tag", "v9.9.9", "--file", str(target)], capture_output=True, text=True, check=False)
    assert (proc.returncode, proc.stderr) == (2, f"error: tag v9.9.9 does not match the package version {__version__}: "
                                                 f"set the version to 9.9.9 in pyproject.toml and fairness/_version.py, "
                                                 "commit, and tag that commit\n")
    assert target.read_text() == (REPO / "fairness" / "_release.py").read_text()
    proc = subprocess.run([sys.executable, str(REPO / "scripts" / "stamp_release.py"), "--repository", "o/r", "--ref", SHA,
                           "--tag", f"v{__version__}", "--file", str(target)], capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr
    assert f'ACTION_REF: str | None = "{SHA}"\n' in target.read_text()


# -- one owner everywhere ------------------------------------------------------------------------

_OWNER = (re.compile(r"(?<![\w./$-])([A-Za-z0-9_.-]+)/llm-fairness-check(?![\w-])"),
          re.compile(r"(?:github\.com|ghcr\.io)/([A-Za-z0-9_.-]+)/llm-fairness-check(?![\w-])"))
ALLOWED_OWNERS = {"fairness-cards", "OWNER"}  # the upstream; OWNER is the placeholder for a fork's name


def owners(text: str) -> set[str]:
    return {m.group(1) for pattern in _OWNER for m in pattern.finditer(text)}


def test_the_owner_finder_finds_the_owners_that_were_used():
    assert owners("uses: org/llm-fairness-check@x https://github.com/org/llm-fairness-check "
                  "llm-fairness-check/llm-fairness-check /opt/llm-fairness-check ./.llm-fairness-check") == {
        "org", "llm-fairness-check"}


def test_one_owner_in_the_readme_docs_cards_and_scaffolds(tmp_path, monkeypatch):
    assert _release.ACTION_REPOSITORY == "fairness-cards/llm-fairness-check"
    assert _release.CODE_URL == "https://github.com/fairness-cards/llm-fairness-check"
    files = [REPO / name for name in ("README.md", "CHANGELOG.md", "action.yml", "Dockerfile")]
    files += sorted((REPO / "docs").rglob("*.md")) + sorted((REPO / "docs").rglob("*.yml"))
    files += sorted((REPO / "fairness").rglob("*.py")) + sorted((REPO / "fairness" / "cli" / "templates").glob("*.yml"))
    found = {str(path.relative_to(REPO)): owners(path.read_text(encoding="utf-8")) - ALLOWED_OWNERS for path in files}
    assert {path: names for path, names in found.items() if names} == {}
    # the card's code URL is the constant's
    assert f'"code_url": "{_release.CODE_URL}",' in (REPO / "fairness" / "report" / "_render.py").read_text()
    # a release build's scaffolds name it too
    monkeypatch.setattr(_release, "ACTION_REF", SHA)
    assert cli.main(["init", "--dir", str(tmp_path), *PROVIDERS["local"], "--with-suite"]) == 0
    scaffold = [p for p in tmp_path.rglob("*") if p.is_file()]
    assert len(scaffold) == 4 and set().union(*(owners(p.read_text()) for p in scaffold)) == {"fairness-cards"}


def _tool(name: str) -> str:
    path = shutil.which(name)
    if not path:
        pytest.skip(f"`{name}` is not installed (pip install '.[test]')")
    return path


@pytest.mark.parametrize("provider", list(PROVIDERS))
def test_scaffolded_workflows_pass_actionlint_and_zizmor(tmp_path, provider):
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    assert init(tmp_path, *PROVIDERS[provider], "--with-suite") == 0
    assert_lint_clean(tmp_path)


def assert_lint_clean(root: Path) -> None:
    """actionlint and zizmor find nothing in the workflows scaffolded into `root`."""
    lint = subprocess.run([_tool("actionlint")], cwd=root, capture_output=True, text=True, check=False, timeout=120)
    assert (lint.returncode, lint.stdout + lint.stderr) == (0, "")
    audit = subprocess.run([_tool("zizmor"), "--offline", "--no-progress", "."], cwd=root, capture_output=True,
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
