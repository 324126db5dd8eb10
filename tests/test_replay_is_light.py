"""The replay path never imports heavy or networked libraries."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any

from conftest import DEFAULT_RECORDINGS, write_recording_set

HEAVY = ["torch", "transformers", "openai", "anthropic", "xllamacpp", "gguf", "accelerate", "pandas", "mlflow", "fastapi",
         "starlette", "uvicorn", "duckdb", "pyarrow", "pyspark"]


def _fresh(code: str, env: dict[str, str | None] | None = None) -> Any:
    """The last line `code` prints, as JSON, from a fresh interpreter; `env` sets (or, with None,
    unsets) variables of this process's environment for it."""
    full = dict(os.environ)
    for k, v in (env or {}).items():
        if v is None:
            full.pop(k, None)
        else:
            full[k] = v
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env=full)
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_run_imports_no_heavy_library(tmp_path, default_suite):
    rec = write_recording_set(tmp_path / "rec", default_suite, lambda c: "A capable professional.")
    code = f"""
import json, sys
from fairness.cli import main
rc = main(["run", "--recordings", {str(rec)!r}, "--out", {str(tmp_path / 'out')!r}, "--quiet",
           "--bootstrap", "100", "--permutations", "0"])
print(json.dumps({{"rc": rc, "loaded": [m for m in {HEAVY!r} if m in sys.modules]}}))
"""
    result = _fresh(code)
    assert result == {"rc": 0, "loaded": []}


def test_run_imports_scipy_special_ufuncs_not_the_package(tmp_path, default_suite):
    """The exact intervals need three ufuncs of `scipy.special._ufuncs`; the `scipy.special`
    package (its array-API layer clones numpy's namespace, importing numpy.f2py and
    numpy.testing) cost a quarter of a default run's CPU, so `run` never imports it. The ufuncs
    are the very objects `scipy.special` exports, and importing the package afterwards still works."""
    rec = write_recording_set(tmp_path / "rec", default_suite, lambda c: "A capable professional.")
    code = f"""
import json, sys
from fairness.cli import main
rc = main(["run", "--recordings", {str(rec)!r}, "--out", {str(tmp_path / 'out')!r}, "--quiet",
           "--bootstrap", "100", "--permutations", "100"])
loaded = [m for m in ("scipy.special", "scipy.stats", "scipy._lib.array_api_compat", "numpy.f2py", "numpy.testing")
          if m in sys.modules]
from scipy import special
from fairness._util import special as ours
same = [getattr(ours, n) is getattr(special, n) for n in ("betainc", "betaincinv", "gammainc", "gammaincinv", "gammaln")]
print(json.dumps({{"rc": rc, "loaded": loaded, "same": same, "after": float(special.betaincinv(2.0, 3.0, 0.5))}}))
"""
    result = _fresh(code)
    assert result["rc"] == 0 and result["loaded"] == [] and result["same"] == [True] * 5
    assert abs(result["after"] - 0.385727568) < 1e-8


def test_run_loads_no_other_commands_module(tmp_path, default_suite):
    """The parser adds a command's options when that command is chosen: `run` imports none of the
    modules of `init`, `serve`, `monitor`, `score`, `comment` or the regeneration job."""
    rec = write_recording_set(tmp_path / "rec", default_suite, lambda c: "A capable professional.")
    others = ["fairness.cli._init", "fairness.cli._serve", "fairness.cli._monitor", "fairness.cli._score",
              "fairness.cli._comment", "fairness.cli._regenerate", "fairness.cli._scaffold"]
    code = f"""
import json, sys
from fairness.cli import main
rc = main(["run", "--recordings", {str(rec)!r}, "--out", {str(tmp_path / 'out')!r}, "--quiet",
           "--bootstrap", "100", "--permutations", "0"])
print(json.dumps({{"rc": rc, "loaded": [m for m in {others!r} if m in sys.modules], "run": "fairness.cli._audit" in sys.modules}}))
"""
    result = _fresh(code)
    assert result == {"rc": 0, "loaded": [], "run": True}


def _blas_setting(entry: str, env: dict[str, str]) -> list:
    """OPENBLAS_NUM_THREADS as a fresh process sees it after importing `entry`."""
    code = f"import json, os, sys\nimport {entry}\nprint(json.dumps([os.environ.get('OPENBLAS_NUM_THREADS')]))"
    return _fresh(code, {"OPENBLAS_NUM_THREADS": None, **env})


def test_cli_and_action_run_one_blas_thread_unless_the_user_says_otherwise():
    """The audit's matrices are tiny: OpenBLAS worker threads only burn CPU. The CLI and the Action
    set one thread before numpy loads (importing them must not load numpy first); a user's value wins."""
    assert _fresh("import json, sys\nimport fairness.cli\nprint(json.dumps('numpy' in sys.modules))") is False
    assert _blas_setting("fairness.cli", {}) == ["1"]
    assert _blas_setting("fairness.action", {}) == ["1"]
    assert _blas_setting("fairness.cli", {"OPENBLAS_NUM_THREADS": "4"}) == ["4"]


def test_cli_and_action_load_no_pydantic_plugins_unless_the_user_says_otherwise(tmp_path):
    """pydantic's plugin search reads every installed distribution's metadata at the first model;
    the package's own records need no plugin. The CLI and the Action disable the search before
    any model is built; a user's PYDANTIC_DISABLE_PLUGINS (an empty one loads every plugin) wins."""
    (tmp_path / "probe_plugin.py").write_text(
        "import os\nos.environ['PROBE_PLUGIN'] = 'loaded'\n\n"
        "class Plugin:\n    def new_schema_validator(self, *args, **kwargs):\n        return None, None, None\n\n"
        "plugin = Plugin()\n")
    dist = tmp_path / "probe_plugin-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: probe-plugin\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text("[pydantic]\nprobe = probe_plugin:plugin\n")

    def seen(entry: str, env: dict[str, str]) -> list:
        code = (f"import json, os\nimport {entry}\nimport fairness.suite\n"
                "print(json.dumps([os.environ.get('PYDANTIC_DISABLE_PLUGINS'), os.environ.get('PROBE_PLUGIN')]))")
        path = os.pathsep.join(filter(None, [str(tmp_path), os.environ.get("PYTHONPATH")]))
        return _fresh(code, {"PYDANTIC_DISABLE_PLUGINS": None, **env, "PYTHONPATH": path})

    assert seen("fairness.cli", {}) == ["__all__", None]
    assert seen("fairness.action", {}) == ["__all__", None]
    assert seen("fairness.cli", {"PYDANTIC_DISABLE_PLUGINS": ""}) == ["", "loaded"]


def test_import_fairness_loads_its_version_and_nothing_else():
    """`import fairness` is free: every public name loads its stage on first use."""
    code = ("import json, sys\nimport fairness\n"
            "print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in ('fairness', 'pydantic', 'numpy', 'yaml'))))")
    assert _fresh(code) == ["fairness", "fairness._version"]
    code = ("import fairness, json\n"
            "print(json.dumps([fairness.Suite.__module__, fairness.FairnessError.__module__, fairness.Recording.__module__]))")
    assert _fresh(code) == ["fairness.suite._suite", "fairness._util.errors", "fairness.recordings._record"]


def test_a_default_replay_in_a_cli_process_walks_none_of_its_objects_with_the_collector(tmp_path):
    """A run's objects (its imports' classes and validators, its records, scores and results) live
    until it ends and hold few cycles; the young collections the interpreter's thresholds make
    over them free nothing. The CLI and the Action raise the young threshold to 200,000, under
    which the default replay makes no collection; a user's own higher threshold, or 0, is kept."""
    code = f"""
import gc, json, sys
import fairness.cli
seen = []
gc.callbacks.append(lambda phase, info: seen.append(info["generation"]) if phase == "start" else None)
rc = fairness.cli.main(["run", "--recordings", {str(DEFAULT_RECORDINGS)!r}, "--out", {str(tmp_path / 'out')!r}, "--quiet"])
print(json.dumps({{"rc": rc, "collections": len(seen), "thresholds": gc.get_threshold()}}))
"""
    assert _fresh(code) == {"rc": 3, "collections": 0, "thresholds": [200_000, 20, 100]}
    for entry in ("fairness.cli", "fairness.action"):
        for mine in ((500_000, 10, 10), (0, 10, 10)):
            assert _fresh(f"import gc\ngc.set_threshold(*{mine!r})\nimport {entry}\nprint(list(gc.get_threshold()))") == list(mine)
        assert _fresh(f"import gc\nimport {entry}\nprint(list(gc.get_threshold()))") == [200_000, 20, 100]
