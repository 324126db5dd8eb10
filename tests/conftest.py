"""Shared fixtures: paths to the reference data and a builder for synthetic recording sets.

Synthetic recordings exist only inside tests (tmp_path), to give the audit inputs with
known per-slice counts; committed recordings are real model output.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from fairness._util.canonical import sha256_file
from fairness._util.files import write_atomic
from fairness.recordings._record import Recording
from fairness.recordings._store import (
    RECORDS,
    BackendInfo,
    DataFile,
    Manifest,
    ModelInfo,
    content_key,
    grid_hash,
    record_line,
    write_manifest,
)
from fairness.suite._case import Case
from fairness.suite._suite import Suite

REPO = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("FAIRNESS_SHARED", REPO.parent / "shared"))
DEFAULT_RECORDINGS = REPO / "recordings" / "fairness-cards" / "qwen-v0.1" / "SmolLM2-135M-Instruct-Q4_1"


def write_recording_set(
    directory: Path,
    suite: Suite,
    text_for: Callable[[Case], str],
    *,
    model_id: str = "synthetic-model",
    cases: list[Case] | None = None,
) -> Path:
    """Write a valid recording set whose outputs come from `text_for(case)`."""
    all_cases = suite.expand()
    cases = all_cases if cases is None else cases
    recs = [
        Recording.from_case(
            c, key=content_key(model_id, suite.system_prompt, c.prompt, c.params, c.seed),
            output=text_for(c), prompt_tokens=10, completion_tokens=20, finish_reason="stop",
        )
        for c in cases
    ]
    directory.mkdir(parents=True, exist_ok=True)
    write_atomic(directory / RECORDS, "".join(record_line(r) for r in recs))
    manifest = Manifest(
        suite=suite.name, suite_version=suite.version, suite_hash=suite.recording_hash,
        grid_hash=grid_hash(all_cases, suite.system_prompt),
        model=ModelInfo(id=model_id, source="synthetic (tests only)"),
        backend=BackendInfo(engine="synthetic", versions={}, dtype="n/a", device="n/a"),
        system_prompt=suite.system_prompt, regimes=[r.model_dump() for r in suite.regimes],
        effective_sampling={}, seeds=list(suite.seeds), batch_plan={"kind": "synthetic"},
        created="2026-01-01T00:00:00Z", updated="2026-01-01T00:00:00Z",
        expected_rows=len(all_cases), rows=len(recs), complete=len(recs) == len(all_cases),
        files=[DataFile(path=RECORDS, sha256=sha256_file(directory / RECORDS), rows=len(recs))],
    )
    write_manifest(directory, manifest)
    return directory


@pytest.fixture
def git_repo(tmp_path, monkeypatch) -> Path:
    """An empty git repository at `tmp_path/repo`, the working directory for the test."""
    import subprocess

    root = tmp_path / "repo"
    root.mkdir()
    subprocess.run(["git", "-C", str(root), "init", "-q"], check=True, capture_output=True)
    monkeypatch.chdir(root)
    return root


@pytest.fixture(scope="session")
def default_suite() -> Suite:
    from fairness import load_suite

    return load_suite("fairness-cards/qwen-v0.1")


@pytest.fixture(scope="session")
def shared_dir() -> Path:
    if not SHARED.is_dir():
        pytest.skip(f"reference data not found at {SHARED}")
    return SHARED


# -- a real MLflow tracking server (tests/test_mlflow.py, tests/test_locks.py) ----------------------


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="session")
def mlflow_server(tmp_path_factory) -> Any:
    """A real `mlflow server` on a free 127.0.0.1 port (SQLite store, artifacts served over HTTP)."""
    pytest.importorskip("mlflow", reason="the mlflow extra is not installed: pip install -e '.[mlflow]'")
    exe = shutil.which("mlflow", path=str(Path(sys.executable).parent)) or shutil.which("mlflow")
    if exe is None:
        pytest.skip("the `mlflow` command is not installed")
    root = tmp_path_factory.mktemp("mlflow")
    port = free_port()
    uri = f"http://127.0.0.1:{port}"
    log = open(root / "server.log", "wb")  # noqa: SIM115 - open for the server's whole life
    proc = subprocess.Popen(
        [exe, "server", "--backend-store-uri", f"sqlite:///{root / 'mlflow.db'}",
         "--artifacts-destination", str(root / "artifacts"), "--host", "127.0.0.1", "--port", str(port),
         "--workers", "1"],
        stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 180
        while True:
            try:
                with urllib.request.urlopen(f"{uri}/health", timeout=2) as resp:
                    if resp.status == 200:
                        break
            except OSError:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"mlflow server did not start: {(root / 'server.log').read_text(errors='replace')[-2000:]}")
            time.sleep(0.5)
        yield uri
    finally:
        with contextlib.suppress(ProcessLookupError):  # it may have died at start (its log is in the error)
            os.killpg(proc.pid, 15)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, 9)
            proc.wait()
        log.close()


def mlflow_client(uri: str) -> Any:
    """MLflow's client for `uri` (set globally too: MLflow 3.0 resolves `mlflow-artifacts:` with the global URI)."""
    import mlflow
    from mlflow.tracking import MlflowClient

    mlflow.set_tracking_uri(uri)
    return MlflowClient(tracking_uri=uri)
