"""What a release ships and how it is used: the container's inputs, the Dockerfile, Dependabot,
the release workflow, LICENSE, CHANGELOG, the README's generated inputs table and .ci/run."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from conftest import REPO, write_recording_set

from fairness._util.errors import FairnessError
from fairness.action._env import input_value, spellings
from fairness.action._main import ENV, read_inputs

# -- INPUT_* and FAIRNESS_* ---------------------------------------------------------------


def test_every_input_has_its_github_spellings():
    assert spellings("out-dir", ENV["out-dir"]) == ("FAIRNESS_OUT_DIR", "INPUT_OUT-DIR", "INPUT_OUT_DIR")
    assert spellings("suite", ENV["suite"]) == ("FAIRNESS_SUITE", "INPUT_SUITE")


def test_input_variables_are_read_like_fairness_variables():
    env = {"INPUT_RECORDINGS": "rec", "INPUT_OUT-DIR": "o", "INPUT_FAIL-ON": "fail", "INPUT_BOOTSTRAP": "300",
           "INPUT_MIN_GROUP_SIZE": "7", "INPUT_GITHUB-TOKEN": " tok ", "INPUT_THRESHOLD": ""}
    got = read_inputs(env)
    assert (got.recordings, got.out_dir, got.fail_on, got.bootstrap, got.min_group_size, got.github_token, got.threshold) == (
        "rec", "o", "fail", 300, 7, "tok", None,
    )


def test_an_empty_spelling_defers_to_a_set_one():
    assert input_value({"FAIRNESS_SUITE": "", "INPUT_SUITE": "mine"}, "suite", "FAIRNESS_SUITE") == "mine"
    assert input_value({"INPUT_SUITE": ""}, "suite", "FAIRNESS_SUITE") == ""
    assert input_value({}, "suite", "FAIRNESS_SUITE") is None


def test_two_different_values_for_one_input_are_bad_input():
    with pytest.raises(FairnessError) as exc:
        input_value({"FAIRNESS_OUT_DIR": "a", "INPUT_OUT-DIR": "b"}, "out-dir", "FAIRNESS_OUT_DIR")
    assert str(exc.value) == "input `out-dir` is set twice with different values (FAIRNESS_OUT_DIR, INPUT_OUT-DIR); set only one"
    assert input_value({"FAIRNESS_OUT_DIR": "a", "INPUT_OUT_DIR": "a"}, "out-dir", "FAIRNESS_OUT_DIR") == "a"


def _outputs(path: Path) -> dict[str, str]:
    """$GITHUB_OUTPUT as written by the entrypoint: `name<<DELIMITER` blocks."""
    return {m[0]: m[2] for m in re.findall(r"^([\w-]+)<<(\S+)\n(.*?)\n\2$", path.read_text(), re.MULTILINE | re.DOTALL)}


def _container_env(tmp_path: Path, inputs: dict[str, str]) -> tuple[dict[str, str], Path]:
    """The environment `docker run -e INPUT_...` gives the entrypoint: no FAIRNESS_* input at all."""
    output = tmp_path / "github_output"
    output.touch()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("FAIRNESS_", "GITHUB_", "INPUT_")) and "proxy" not in k.lower()}
    env.update(GITHUB_OUTPUT=str(output), **inputs)
    return env, output


def test_the_entrypoint_runs_on_input_variables_alone(tmp_path, default_suite):
    rec = write_recording_set(tmp_path / "workspace" / "rec", default_suite, lambda _case: "A capable professional.")
    env, output = _container_env(tmp_path, {"INPUT_RECORDINGS": "rec", "INPUT_OUT-DIR": "fairness-out", "INPUT_BOOTSTRAP": "100"})
    proc = subprocess.run([sys.executable, str(REPO / "entrypoint.py")], cwd=rec.parent, env=env,
                          capture_output=True, text=True, check=False, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert _outputs(output)["gate-status"] == "pass"
    assert (rec.parent / "fairness-out" / "card.html").is_file()


def test_conflicting_spellings_exit_2_with_one_error(tmp_path):
    env, output = _container_env(tmp_path, {"INPUT_RECORDINGS": "rec", "FAIRNESS_RECORDINGS": "other"})
    proc = subprocess.run([sys.executable, str(REPO / "entrypoint.py")], cwd=tmp_path, env=env,
                          capture_output=True, text=True, check=False, timeout=120)
    assert proc.returncode == 2
    errors = [ln for ln in proc.stdout.splitlines() if ln.startswith("::error")]
    assert len(errors) == 1 and "input `recordings` is set twice with different values" in errors[0]
    assert _outputs(output)["gate-status"] == "error"


# -- the image ---------------------------------------------------------------------------


def test_base_image_is_pinned_by_digest_and_documented():
    text = (REPO / "Dockerfile").read_text()
    bases = re.findall(r"^FROM (\S+)", text, re.MULTILINE)
    assert bases[0] == "python:3.12-slim@sha256:401f6e1a67dad31a1bd78e9ad22d0ee0a3b52154e6bd30e90be696bb6a3d7461"
    assert bases[1:] == ["base", "base"]
    assert "docker buildx imagetools inspect python:3.12-slim" in text


def test_the_image_runs_as_root_for_the_mounted_workspace_and_says_how_to_run_it():
    text = (REPO / "Dockerfile").read_text()
    assert not re.search(r"^USER ", text, re.MULTILINE)
    run_line = 'docker run --rm --user "$(id -u):$(id -g)" -v "$PWD:/github/workspace" -w /github/workspace'
    assert run_line in text and run_line in (REPO / "README.md").read_text()


def test_dependabot_watches_docker_actions_and_pip():
    doc = yaml.safe_load((REPO / ".github" / "dependabot.yml").read_text())
    assert [u["package-ecosystem"] for u in doc["updates"]] == ["github-actions", "docker", "pip", "npm"]
    assert next(u for u in doc["updates"] if u["package-ecosystem"] == "docker")["directory"] == "/"


# -- the release workflow ----------------------------------------------------------------


@pytest.fixture(scope="module")
def release() -> dict:
    return yaml.safe_load((REPO / ".github" / "workflows" / "release.yml").read_text())


def test_release_runs_on_v1_tags_with_least_privilege(release):
    assert release[True] == {"push": {"tags": ["v1.*.*"]}}  # YAML 1.1 reads the key `on` as True
    assert release["permissions"] == {}
    assert release["jobs"]["images"]["permissions"] == {"contents": "read", "packages": "write"}
    assert release["jobs"]["wheel"]["permissions"] == {"contents": "write"}
    assert release["jobs"]["major-tag"]["permissions"] == {}
    assert (release["jobs"]["wheel"]["needs"], release["jobs"]["major-tag"]["needs"]) == ("images", "wheel")
    assert release["jobs"]["major-tag"]["environment"] == "release"  # the App's key; deployment tags v1.*


def test_release_pushes_both_images_to_ghcr_and_records_their_digests(release):
    job = release["jobs"]["images"]
    assert job["strategy"]["matrix"]["target"] == ["replay", "live"]
    uses = {s["uses"].split("@")[0]: s for s in job["steps"] if "uses" in s}
    assert uses["docker/login-action"]["with"]["registry"] == "ghcr.io"
    build = uses["docker/build-push-action"]["with"]
    assert build["push"] is True and build["target"] == "${{ matrix.target }}"
    script = next(s["run"] for s in job["steps"] if s.get("id") == "names")
    assert '"${image}:${TAG}${suffix}"' in script and '"${image}:v1${suffix}"' in script
    record = next(s for s in job["steps"] if s.get("name") == "Record the digest")
    assert record["env"]["DIGEST"] == "${{ steps.push.outputs.digest }}"
    assert 'echo "${IMAGE}@${DIGEST}" > "digest/${TARGET}.txt"' in record["run"]
    assert uses["actions/upload-artifact"]["with"]["name"] == "digest-${{ matrix.target }}"


def test_release_stamps_the_commit_into_the_wheel_it_publishes(release):
    steps = release["jobs"]["wheel"]["steps"]
    build = next(s for s in steps if s.get("name", "").startswith("Stamp the release"))
    assert build["env"] == {"TAG": "${{ github.ref_name }}", "REPOSITORY": "${{ github.repository }}", "SHA": "${{ github.sha }}"}
    lines = build["run"].splitlines()
    stamp = lines.index('python scripts/stamp_release.py --repository "$REPOSITORY" --ref "$SHA" --tag "$TAG"')
    assert stamp < next(i for i, ln in enumerate(lines) if "pip wheel" in ln)  # stamped before the wheel is built
    publish = steps[-1]
    assert 'gh release create "$TAG" dist/*.whl --repo "$REPOSITORY" --verify-tag' in publish["run"]
    assert 'replay="$(cat digest/replay.txt)"' in publish["run"] and 'live="$(cat digest/live.txt)"' in publish["run"]


def test_release_moves_v1_with_the_app_token_not_github_token(release):
    job = release["jobs"]["major-tag"]
    mint, move = job["steps"]
    assert mint["uses"] == "actions/create-github-app-token@df432ceedc7162793a195dd1713ff69aefc7379e"
    assert mint["with"] == {"app-id": "${{ vars.FAIRNESS_RELEASE_APP_ID }}",
                            "private-key": "${{ secrets.FAIRNESS_RELEASE_APP_PRIVATE_KEY }}",
                            "permission-contents": "write", "permission-workflows": "write"}
    assert move["env"]["GH_TOKEN"] == "${{ steps.app-token.outputs.token }}" and mint["id"] == "app-token"
    assert move["env"]["SHA"] == "${{ github.sha }}"
    assert 'git/refs/tags/v1" -f sha="$SHA" -F force=true' in move["run"]
    assert "-f ref=refs/tags/v1" in move["run"]
    text = yaml.safe_dump(job)
    assert "GITHUB_TOKEN" not in text and "github.token" not in text


def test_the_app_action_is_pinned_like_the_nightlys():
    nightly = (REPO / ".github" / "workflows" / "nightly-regenerate.yml").read_text()
    release_text = (REPO / ".github" / "workflows" / "release.yml").read_text()
    pin = "actions/create-github-app-token@df432ceedc7162793a195dd1713ff69aefc7379e # v2.0.6"
    assert pin in nightly and pin in release_text


# -- release hygiene ---------------------------------------------------------------------


def test_license_is_mit_as_pyproject_says():
    text = (REPO / "LICENSE").read_text()
    assert text.startswith("MIT License\n\nCopyright (c) 2026 llm-fairness-check contributors\n")
    assert re.search(r'^license = \{ text = "MIT" \}$', (REPO / "pyproject.toml").read_text(), re.MULTILINE)


def test_changelog_keeps_a_changelog():
    text = (REPO / "CHANGELOG.md").read_text()
    assert text.startswith("# Changelog\n") and "[Keep a Changelog](https://keepachangelog.com/en/1.1.0/)" in text
    unreleased = text.split("## [Unreleased]", 1)[1]
    assert re.findall(r"^### (\w+)", unreleased, re.MULTILINE) == ["Changed", "Fixed", "Added"]
    for title in ("typed results schema", "Honest verdicts", "Hostile input", "at scale", "Adoption", "unattended"):
        assert title in unreleased, title


def test_readme_inputs_table_agrees_with_action_yml():
    proc = subprocess.run([sys.executable, str(REPO / "scripts" / "action_table.py"), "--check"],
                          capture_output=True, text=True, check=False, timeout=60)
    assert proc.returncode == 0, proc.stderr
    action = yaml.safe_load((REPO / "action.yml").read_text())
    block = (REPO / "README.md").read_text().split("<!-- inputs:start -->")[1].split("<!-- inputs:end -->")[0]
    assert [ln.split("`")[1] for ln in block.splitlines() if ln.startswith("| `")] == [*action["inputs"], *action["outputs"]]


def test_the_table_script_rewrites_only_its_block(tmp_path):
    readme = tmp_path / "README.md"
    readme.write_text("intro\n<!-- inputs:start -->\nstale\n<!-- inputs:end -->\noutro\n")
    action = tmp_path / "action.yml"
    action.write_text("inputs:\n  a-b:\n    description: 'x | y'\n    default: ''\n    required: true\noutputs:\n  o:\n    description: out\n")
    script = [sys.executable, str(REPO / "scripts" / "action_table.py"), "--readme", str(readme), "--action", str(action)]
    assert subprocess.run([*script, "--check"], capture_output=True, check=False).returncode == 1
    assert subprocess.run(script, check=False).returncode == 0
    assert readme.read_text() == (
        "intro\n<!-- inputs:start -->\nGenerated from `action.yml` by `python scripts/action_table.py`; do not edit by hand.\n\n"
        "| input | required | default | description |\n|---|---|---|---|\n| `a-b` | yes | _(empty)_ | x \\| y |\n\n"
        "| output | description |\n|---|---|\n| `o` | out |\n<!-- inputs:end -->\noutro\n"
    )


def test_ci_runs_the_readme_test_command_after_a_separate_setup():
    readme = (REPO / "README.md").read_text()
    (command,) = re.findall(r"^```bash\n(python3 -m venv [^\n]* python -m pytest -q)\n```$", readme, re.MULTILINE)
    assert "llm-fairness-check models fetch smollm2 && bash scripts/setup-browser.sh && " in command
    lines = [ln for ln in (REPO / ".ci" / "run").read_text().splitlines() if ln and not ln.startswith("#")]
    assert lines[-1] == command
    assert lines.index("bash scripts/setup-browser.sh") < len(lines) - 1
    script = (REPO / "scripts" / "setup-browser.sh").read_text()
    assert "DEBIAN_FRONTEND=noninteractive apt-get update -qq" in script and "apt-get install -y -qq chromium" in script
    assert "npm ci" in script
    assert "&& bash scripts/setup-java.sh && " in command
    assert lines.index("bash scripts/setup-java.sh") < len(lines) - 1
    java = (REPO / "scripts" / "setup-java.sh").read_text()
    assert "apt-get install -y -qq default-jre-headless" in java
