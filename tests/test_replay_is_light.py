"""The replay path never imports heavy or networked libraries."""

from __future__ import annotations

import json
import subprocess
import sys

from conftest import write_recording_set

HEAVY = ["torch", "transformers", "openai", "anthropic", "xllamacpp", "gguf", "accelerate", "pandas"]


def test_run_imports_no_heavy_library(tmp_path, default_suite):
    rec = write_recording_set(tmp_path / "rec", default_suite, lambda c: "A capable professional.")
    code = f"""
import json, sys
from fairness.cli import main
rc = main(["run", "--recordings", {str(rec)!r}, "--out", {str(tmp_path / 'out')!r}, "--quiet",
           "--bootstrap", "100", "--permutations", "0"])
print(json.dumps({{"rc": rc, "loaded": [m for m in {HEAVY!r} if m in sys.modules]}}))
"""
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert result == {"rc": 0, "loaded": []}
