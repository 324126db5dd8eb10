"""The hashed locks under requirements/: they resolve, their pairings hold, and vLLM takes our flags.

What bit the nightly: the live image paired torch 2.5.1 with a transformers that disables
PyTorch below 2.6, and the vLLM venv paired vllm 0.8.5 with a transformers 5 it cannot use.
CI has no Docker and no GPU, so this checks what it can from the registry:

- every lock resolves, dependencies included and every hash required, for the platform its
  installs target (`uv pip install --dry-run`, uv from requirements/installer.lock: pip cannot
  resolve a hashed lock for another platform without downloading every wheel, several GB of
  CUDA libraries here);
- `pip install --dry-run --report` on the pinned transformers and vLLM wheels (hash checked,
  cached) gives their declared requirements: the live lock's torch meets transformers' own
  minimum (its `torch` extra, cross-checked with the check in `transformers/utils/
  import_utils.py`), and vllm.lock's transformers lies in the pinned vLLM's declared range;
- the live environment, built from live.lock in a venv on the CPU, runs the Dockerfile's
  build-time check and loads `TransformersEngine` on the SmolLM2 test model;
- every flag the nightly workflow, the README and the GPU benchmark pass to `vllm serve` is one
  the pinned vLLM defines (requirements/vllm-serve-flags.json, parsed from its wheel by
  scripts/vllm_flags.py; the drift test re-parses the wheel).

The registry tests skip, with the reason, when the package index cannot be reached; the wheels
and uv's metadata are cached under `$XDG_CACHE_HOME/llm-fairness-check/` so reruns are cheap.
"""

from __future__ import annotations

import ast
import json
import os
import re
import shutil
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

REPO = Path(__file__).resolve().parents[1]
LOCKS = REPO / "requirements"
sys.path.insert(0, str(REPO / "scripts"))

import lock_wheels  # noqa: E402
import vllm_flags  # noqa: E402
from conftest import mlflow_client  # noqa: E402
from standin_vllm import unknown_options  # noqa: E402

FLAGS_JSON = LOCKS / "vllm-serve-flags.json"
INDEX = os.environ.get("PIP_INDEX_URL", "https://pypi.org/simple/")

# lock -> the (Python, uv platform) pairs its installs target
TARGETS = {
    "replay.lock": [("3.10", "x86_64-manylinux_2_28"), ("3.12", "x86_64-manylinux_2_36")],
    "monitor.lock": [("3.10", "x86_64-manylinux_2_28"), ("3.12", "x86_64-manylinux_2_36")],
    "hosted.lock": [("3.10", "x86_64-manylinux_2_28"), ("3.12", "x86_64-manylinux_2_36")],
    "tracking.lock": [("3.10", "x86_64-manylinux_2_28"), ("3.12", "x86_64-manylinux_2_36")],
    "live.lock": [("3.10", "x86_64-manylinux_2_28"), ("3.12", "x86_64-manylinux_2_36")],
    "build.lock": [("3.12", "x86_64-manylinux_2_36")],
    "lint.lock": [("3.12", "x86_64-manylinux_2_36")],
    "installer.lock": [("3.12", "x86_64-manylinux_2_36")],
    "vllm.lock": [("3.12", "x86_64-manylinux_2_36")],
}


def _registry_or_skip() -> None:
    try:
        urllib.request.urlopen(INDEX + "pip/", timeout=15).close()
    except OSError as exc:
        pytest.skip(f"the package index {INDEX} is unreachable ({exc}); the lock checks need it")


@pytest.fixture(scope="session")
def registry() -> None:
    _registry_or_skip()


@pytest.fixture(scope="session")
def uv(registry, tmp_path_factory) -> Path:
    """uv at its locked version (requirements/installer.lock), in a venv of its own."""
    venv = tmp_path_factory.mktemp("uv-venv")
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    subprocess.run([venv / "bin" / "python", "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
                    "--require-hashes", "--only-binary", ":all:", "-r", LOCKS / "installer.lock"], check=True)
    return venv / "bin" / "uv"


def _report(pins: list[lock_wheels.Pin], tmp: Path) -> dict[str, dict]:
    """pip's `--dry-run --report` for these pins (their cached wheels, hashes required): name -> metadata."""
    wheels = {p.name: lock_wheels.fetch(p) for p in pins}
    req = tmp / "pins.txt"
    req.write_text("".join(p.requirement_lines() for p in pins), encoding="utf-8")
    platforms = [a for plat in lock_wheels.IMAGE_PLATFORMS for a in ("--platform", plat)]
    report = tmp / "report.json"
    subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", "--dry-run",
                    "--ignore-installed", "--no-deps", "--no-index", "--find-links", str(lock_wheels.cache_dir()),
                    "--require-hashes", "--only-binary", ":all:", *platforms, "--python-version",
                    lock_wheels.IMAGE_PYTHON, "--implementation", "cp", "--target", str(tmp / "target"),
                    "--report", str(report), "-r", str(req)], check=True)
    got = {canonicalize_name(i["metadata"]["name"]): i["metadata"] for i in json.loads(report.read_text())["install"]}
    assert set(got) == set(wheels)
    return got


def _requirement(metadata: dict, name: str, extra: str | None = None) -> Requirement:
    """The one Requires-Dist entry for `name` (under `extra`, or unconditional)."""
    found = []
    for line in metadata.get("requires_dist", []):
        req = Requirement(line)
        if canonicalize_name(req.name) != name:
            continue
        in_extra = req.marker is not None and "extra" in str(req.marker)
        if (extra is None and not in_extra) or (extra is not None and req.marker is not None
                                                 and req.marker.evaluate({"extra": extra})):
            found.append(req)
    assert len(found) == 1, f"{metadata['name']} {metadata['version']}: {len(found)} requirements on {name}"
    return found[0]


def _source_min_torch(wheel: Path) -> Version:
    """The minimum `is_torch_available()` enforces, read from the transformers wheel's source."""
    import zipfile

    with zipfile.ZipFile(wheel) as zf:
        tree = ast.parse(zf.read("transformers/utils/import_utils.py").decode("utf-8"))
    func = next(n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == "is_torch_available")
    versions = {Version(n.args[0].value) for n in ast.walk(func)
                if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == "parse"
                and n.args and isinstance(n.args[0], ast.Constant) and isinstance(n.args[0].value, str)}
    assert len(versions) == 1, f"{wheel.name}: is_torch_available compares against {sorted(versions)}"
    return versions.pop()


# -- every lock resolves -------------------------------------------------------------------------
@pytest.mark.registry
@pytest.mark.parametrize(("lock", "python", "platform"), [(lock, py, plat) for lock, ts in TARGETS.items()
                                                          for py, plat in ts])
def test_the_lock_resolves_to_itself(uv, tmp_path, lock, python, platform):
    """Dependencies included and every hash required: a missing or conflicting pin fails here."""
    cache = lock_wheels.cache_dir().parent / "uv"
    res = subprocess.run([uv, "pip", "install", "--dry-run", "--no-config", "--cache-dir", str(cache),
                          "--target", str(tmp_path / "t"), "--python-version", python, "--python-platform", platform,
                          "--only-binary", ":all:", "--require-hashes", "-r", str(LOCKS / lock)],
                         check=False, capture_output=True, text=True, env={**os.environ, "NO_COLOR": "1"})
    assert res.returncode == 0, res.stderr[-3000:]
    would = set(re.findall(r"^ \+ (\S+)==(\S+)$", res.stderr + res.stdout, re.M))
    env = lock_wheels.environment(python)
    locked = {(p.name, p.version) for p in lock_wheels.parse_lock(LOCKS / lock) if p.applies(env)}
    assert {(canonicalize_name(n), v) for n, v in would} == locked


# -- the pairings that bit us ----------------------------------------------------------------------
@pytest.mark.registry
@pytest.mark.parametrize("python", ["3.10", "3.11", "3.12"])
def test_live_lock_torch_meets_the_locked_transformers_minimum(registry, tmp_path, python):
    live = LOCKS / "live.lock"
    transformers, torch = lock_wheels.pin(live, "transformers", python), lock_wheels.pin(live, "torch", python)
    meta = _report([transformers], tmp_path)["transformers"]
    declared = _requirement(meta, "torch", extra="torch").specifier
    source_min = _source_min_torch(lock_wheels.fetch(transformers))
    assert [(s.operator, Version(s.version)) for s in declared] == [(">=", source_min)]  # metadata == import check
    assert Version(torch.version) >= source_min, (
        f"live.lock pins torch {torch.version} for Python {python}; transformers {transformers.version} "
        f"disables PyTorch below {source_min}")


@pytest.mark.registry
def test_vllm_lock_transformers_is_in_the_pinned_vllms_range(registry, tmp_path):
    lock = LOCKS / "vllm.lock"
    vllm, transformers, torch = (lock_wheels.pin(lock, n) for n in ("vllm", "transformers", "torch"))
    meta = _report([vllm, transformers], tmp_path)
    wanted = _requirement(meta["vllm"], "transformers").specifier
    assert transformers.version in wanted, f"vllm {vllm.version} wants transformers{wanted}, locked {transformers.version}"
    assert any(s.operator in ("<", "<=", "==", "~=") for s in wanted), (
        f"vllm {vllm.version} declares no upper bound on transformers ({wanted}): the range cannot catch the break")
    assert torch.version in _requirement(meta["vllm"], "torch").specifier
    min_torch = _requirement(meta["transformers"], "torch", extra="torch").specifier
    assert torch.version in min_torch


# -- the live environment, built from the lock -----------------------------------------------------
_CUDA = re.compile(r"^(torch|triton|nvidia-.*|cuda-.*)$")


@pytest.fixture(scope="session")
def live_venv(uv, tmp_path_factory) -> Path:
    """live.lock for this Python, every hash checked (installed by the locked uv), in a fresh venv, with the
    package built from the checkout as the Dockerfile builds it (pip, offline, the locked setuptools).

    One substitution, stated: PyPI's Linux torch is the CUDA build (with nvidia-*, cuda-* and
    triton wheels, GBs), so those pins are left out and torch is the build this test session runs
    on (the README's command installs torch==2.13.0, here the CPU wheel of the machine's local
    wheel folder), installed with --no-deps. The test below asserts that torch still meets the
    locked transformers' minimum, so the pairing checked is no looser than the lock's.
    """
    import torch

    root = tmp_path_factory.mktemp("live-env")
    env = lock_wheels.environment(".".join(map(str, sys.version_info[:3])))
    pins = [p for p in lock_wheels.parse_lock(LOCKS / "live.lock") if p.applies(env) and not _CUDA.match(p.name)]
    req = root / "live-no-cuda.lock"
    req.write_text("".join(p.requirement_lines() for p in pins), encoding="utf-8")
    venv = root / "venv"
    py = venv / "bin" / "python"
    pip = [str(py), "-m", "pip", "install", "--quiet", "--disable-pip-version-check"]
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    # uv installs the hashed pins (in parallel, no bytecode compiling: ~4x faster than pip here)
    subprocess.run([uv, "pip", "install", "--quiet", "--no-config", "--cache-dir", str(lock_wheels.cache_dir().parent / "uv"),
                    "--python", str(py), "--no-deps", "--require-hashes", "--only-binary", ":all:", "-r", str(req)],
                   check=True)
    subprocess.run([*pip, "--no-deps", "--only-binary", ":all:", f"torch=={torch.__version__}"], check=True)
    src = root / "src"  # what the Dockerfile copies
    src.mkdir()
    for name in ("pyproject.toml", "README.md", "LICENSE", "entrypoint.py"):
        shutil.copy(REPO / name, src / name)
    shutil.copytree(REPO / "fairness", src / "fairness", ignore=shutil.ignore_patterns("__pycache__"))
    subprocess.run([*pip, "--no-deps", "--no-index", "--no-build-isolation", str(src)], check=True)
    return py


def _dockerfile_check() -> str:
    """The `python -c` program of the Dockerfile's live stage."""
    text = (REPO / "Dockerfile").read_text(encoding="utf-8")
    live = text.split("FROM base AS live", 1)[1].split("\nFROM ", 1)[0]
    found = re.findall(r'python -c "([^"]+)"', live)
    assert len(found) == 1
    return found[0]


@pytest.mark.live
@pytest.mark.registry
def test_the_dockerfiles_build_check_passes_in_the_locked_live_env(live_venv):
    res = subprocess.run([live_venv, "-c", _dockerfile_check()], check=False, capture_output=True, text=True, cwd=live_venv.parent)
    assert res.returncode == 0, res.stderr[-3000:]
    assert res.stdout.startswith("live engines load: torch ")


def test_the_dockerfiles_build_check_fails_on_a_torch_transformers_refuses(tmp_path):
    """The same program, where transformers' availability check says no, fails (the build stops)."""
    fake = tmp_path / "site"
    (fake / "transformers" / "utils").mkdir(parents=True)
    (fake / "torch").mkdir()
    (fake / "torch" / "__init__.py").write_text("__version__ = '2.5.1'\n")
    (fake / "transformers" / "__init__.py").write_text("__version__ = '5.24.0'\n")
    (fake / "transformers" / "utils" / "__init__.py").write_text("def is_torch_available():\n    return False\n")
    res = subprocess.run([sys.executable, "-c", _dockerfile_check()], check=False, capture_output=True, text=True,
                         env={**os.environ, "PYTHONPATH": str(fake)})
    assert res.returncode == 1
    assert "AssertionError: transformers 5.24.0 does not accept torch 2.5.1" in res.stderr


@pytest.mark.live
@pytest.mark.registry
def test_the_locked_live_env_loads_transformers_engine_on_the_test_model(live_venv):
    from fairness._util.errors import FairnessError
    from fairness.generate._model_fetch import locate

    try:
        model = locate("smollm2")
    except FairnessError as exc:
        pytest.skip(str(exc))
    program = f"""
import json, torch, transformers
from transformers.utils import is_torch_available
from fairness.generate.engines.transformers import TransformersEngine
from fairness.suite._case import SamplingParams
torch.set_num_threads(1)
eng = TransformersEngine({str(model.parent)!r}, gguf_file={model.name!r}, device="cpu", batch_size=1)
ids = eng.tokenizer("Hello", add_special_tokens=False)["input_ids"]
print(json.dumps({{"torch": torch.__version__, "transformers": transformers.__version__,
                  "sees_torch": is_torch_available(), "tokens": len(ids),
                  "greedy": eng.effective_sampling(SamplingParams(temperature=0, top_p=1, max_new_tokens=2))["do_sample"]}}))
eng.close()
"""
    res = subprocess.run([live_venv, "-c", program], check=False, capture_output=True, text=True, cwd=live_venv.parent,
                         env={**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": ""})
    assert res.returncode == 0, res.stderr[-3000:]
    got = json.loads(res.stdout.strip().splitlines()[-1])
    env = lock_wheels.environment(".".join(map(str, sys.version_info[:3])))
    assert got["transformers"] == lock_wheels.pin(LOCKS / "live.lock", "transformers", env["python_full_version"]).version
    assert got["sees_torch"] is True and got["tokens"] >= 1 and got["greedy"] is False


# -- vllm serve's flags ------------------------------------------------------------------------------
def _serve_flags_in_shell(text: str) -> list[str]:
    """The options of every `vllm serve` command line (backslash continuations joined) in a script."""
    joined = re.sub(r"\\\n\s*", " ", text)
    flags = []
    for m in re.finditer(r"""vllm"?\s+serve\s+([^\n&|>;]*)""", joined):
        flags += re.findall(r"(?<!\S)(--?[A-Za-z][\w-]*)", m[1])
    return flags


def _workflow_serve_flags() -> list[str]:
    import yaml

    doc = yaml.safe_load((REPO / ".github" / "workflows" / "nightly-regenerate.yml").read_text(encoding="utf-8"))
    runs = [s.get("run", "") for job in doc["jobs"].values() for s in job.get("steps", [])]
    return [f for run in runs for f in _serve_flags_in_shell(run)]


def _benchmark_serve_flags() -> list[str]:
    tree = ast.parse((REPO / "benchmarks" / "gpu_generation_check.py").read_text(encoding="utf-8"))
    flags = []
    for node in ast.walk(tree):
        if isinstance(node, ast.List):
            items = [e.value for e in node.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)]
            if items[:2] == ["vllm", "serve"]:
                flags += [i for i in items if i.startswith("-")]
    return flags


def _readme_serve_flags() -> list[str]:
    return _serve_flags_in_shell((REPO / "README.md").read_text(encoding="utf-8"))


SERVE_USES = {"nightly-regenerate.yml": _workflow_serve_flags, "README.md": _readme_serve_flags,
              "benchmarks/gpu_generation_check.py": _benchmark_serve_flags}


@pytest.mark.parametrize("where", sorted(SERVE_USES))
def test_every_vllm_serve_flag_we_pass_is_defined_by_the_pinned_vllm(where):
    committed = json.loads(FLAGS_JSON.read_text(encoding="utf-8"))
    used = SERVE_USES[where]()
    assert used, f"no `vllm serve` command found in {where}"
    undefined = [f for f in used if not vllm_flags.accepts(committed["flags"], f)]
    assert undefined == [], f"{where} passes {undefined} to `vllm serve`; vllm {committed['vllm']} does not define them"


def test_the_workflow_passes_the_flags_the_regeneration_relies_on():
    assert set(_workflow_serve_flags()) == {"--revision", "--host", "--port", "--seed", "--generation-config"}


def test_the_flag_list_is_for_the_locked_vllm():
    committed = json.loads(FLAGS_JSON.read_text(encoding="utf-8"))
    vllm = lock_wheels.pin(LOCKS / "vllm.lock", "vllm")
    assert committed["vllm"] == vllm.version and committed["sha256"] in vllm.hashes
    assert {"--host", "--port", "--revision", "--seed", "--generation-config", "--max-model-len"} <= set(committed["flags"])


@pytest.mark.registry
def test_the_committed_flag_list_is_what_the_pinned_wheel_defines(registry):
    """Drift: re-parse the locked wheel (downloaded once, hash checked, then cached)."""
    wheel = lock_wheels.fetch(lock_wheels.pin(LOCKS / "vllm.lock", "vllm"))
    assert vllm_flags.from_wheel(wheel) == json.loads(FLAGS_JSON.read_text(encoding="utf-8")), (
        "regenerate: python scripts/vllm_flags.py WHEEL > requirements/vllm-serve-flags.json")


def test_the_parser_collects_literal_and_dataclass_generated_options():
    sources = {"vllm/entrypoints/common/cli_args.py": '''
class BaseFrontendArgs:
    lora_modules: list[str] | None = None
    _private: int = 0
    @classmethod
    def add_cli_args(cls, parser):
        frontend_kwargs = get_kwargs(cls)
        for key, value in frontend_kwargs.items():
            group.add_argument(*value.pop("flags", []), f"--{key.replace('_', '-')}", **value)
class FrontendArgs(BaseFrontendArgs):
    host: str | None = None
    port: int = 8000
class Unused(BaseFrontendArgs):
    never_served: int = 1
def make_arg_parser(parser):
    parser.add_argument("--headless", "-hl", action="store_true")
    parser = FrontendArgs.add_cli_args(parser)
''', "vllm/engine/arg_utils.py": 'group.add_argument("--seed", **kw["seed"])\nx.add_argument(name, **k)\n'}
    assert vllm_flags.parse_sources(sources) == ["--headless", "--host", "--lora-modules", "--port", "--seed", "-hl"]
    assert vllm_flags.accepts(["--max-model-len"], "--max_model_len=4096")
    assert not vllm_flags.accepts(["--max-model-len"], "--max-model")


def test_the_standin_server_refuses_a_flag_the_pinned_vllm_does_not_define():
    res = subprocess.run([sys.executable, str(REPO / "tests" / "standin_vllm.py"), "serve", "m", "--port", "1",
                          "--disable-log-requests-typo"], check=False, capture_output=True, text=True, timeout=60)
    vllm = json.loads(FLAGS_JSON.read_text(encoding="utf-8"))["vllm"]
    assert res.returncode == 2
    assert res.stderr == ("vllm serve: error: unrecognized arguments: --disable-log-requests-typo "
                          f"(not defined by vllm {vllm})\n")
    assert unknown_options(["m", "--max_model_len", "8", "--seed=0"]) == []


_IMPORT_EVERY_TEST_MODULE = """
import importlib, json, sys, pathlib
import pytest
tests = pathlib.Path(sys.argv[1])
sys.path.insert(0, str(tests))
outcome = {}
for path in sorted(tests.glob("test_*.py")):
    try:
        importlib.import_module(path.stem)
        outcome[path.stem] = "imported"
    except pytest.skip.Exception as exc:
        outcome[path.stem] = "skipped: " + str(exc)
    except BaseException as exc:
        outcome[path.stem] = "failed: " + type(exc).__name__ + ": " + str(exc)
print(json.dumps(outcome))
"""


@pytest.mark.registry
def test_every_test_module_imports_in_a_venv_with_only_the_test_extra(uv, tmp_path_factory):
    """The `test` extra holds everything the tests import: in a fresh venv with the package and that
    extra alone (no `live`, no `hosted`), every test module imports, or skips itself with its reason
    (`pytest.importorskip` of an engine library) — none fails on a missing package."""
    venv = tmp_path_factory.mktemp("test-extra-venv")
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    python = venv / "bin" / "python"
    subprocess.run([str(uv), "pip", "install", "--quiet", "--python", str(python), "-e", f"{REPO}[test]"],
                   check=True, timeout=900)
    result = subprocess.run([str(python), "-c", _IMPORT_EVERY_TEST_MODULE, str(REPO / "tests")],
                            capture_output=True, text=True, timeout=600, cwd=REPO, check=False,
                            env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"})
    assert result.returncode == 0, result.stderr[-2000:]
    outcome = json.loads(result.stdout.strip().splitlines()[-1])
    # today every module imports (the engine libraries are imported inside the tests that need them);
    # a module that importorskips one at the top would show here as "skipped: <reason>"
    assert outcome == {p.stem: "imported" for p in sorted((REPO / "tests").glob("test_*.py"))}


# -- the MLflow client lock: what the Action installs for `mlflow-tracking-uri` ------------------


@pytest.mark.registry
def test_the_tracking_lock_logs_a_run_to_a_real_mlflow_server(uv, tmp_path, mlflow_server):
    """The Action's `mlflow-tracking-uri` on a plain runner: a venv built from tracking.lock alone (as
    scripts/install-env.sh builds it: hashes required, wheels only) runs the Action's entrypoint from
    its checkout, as action.yml's step does, and the audit is logged to a real `mlflow server`, read
    back here through MLflow's client."""
    venv = tmp_path / "venv"
    subprocess.run([str(uv), "venv", "--quiet", "--python", sys.executable, str(venv)], check=True)
    python = venv / "bin" / "python"
    subprocess.run([str(uv), "pip", "install", "--quiet", "--python", str(python), "--require-hashes",
                    "--only-binary", ":all:", "-r", str(LOCKS / "tracking.lock")], check=True, timeout=900)
    env = {k: v for k, v in os.environ.items()
           if k != "PYTHONPATH" and not k.startswith(("FAIRNESS_", "GITHUB_", "MLFLOW_", "INPUT_"))}
    env |= {"FAIRNESS_RECORDINGS": str(REPO / "recordings/fairness-cards/qwen-v0.1/SmolLM2-135M-Instruct-Q4_1"),
            "FAIRNESS_OUT_DIR": "fairness-out", "FAIRNESS_PERMUTATIONS": "0", "FAIRNESS_UPLOAD_ARTIFACT": "false",
            "FAIRNESS_MLFLOW_TRACKING_URI": mlflow_server, "GITHUB_REF": "refs/pull/9/merge"}
    result = subprocess.run([str(python), str(REPO / "entrypoint.py")], cwd=tmp_path, env=env,
                            capture_output=True, text=True, timeout=600, check=False)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]  # inconclusive: a warning
    (logged,) = [line for line in result.stdout.splitlines() if line.startswith("mlflow: logged run ")]
    run = mlflow_client(mlflow_server).get_run(logged.split()[3])
    results = json.loads((tmp_path / "fairness-out" / "results.json").read_text())
    assert (run.data.tags["verdict"], run.data.tags["pr_number"]) == (results["gate"]["state"], "9")
