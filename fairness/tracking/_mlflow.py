"""Log an audit to an MLflow tracking server: the only module that imports mlflow (lazily).

`require_mlflow` runs before any work when `--mlflow` is given (a missing package is bad input:
exit 2, naming the extra). `log_run` / `log_diff` run after every output is written; anything the
server does wrong (down, refusing, answering garbage) is one warning line on stderr and never
changes the audit's exit code. The token comes from the environment (MLFLOW_TRACKING_TOKEN, read
by MLflow itself), never from an argument, and is masked in any message.
"""

from __future__ import annotations

import contextlib
import importlib.util
import logging
import os
import sys
import time
import warnings
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from fairness._util.errors import FairnessError
from fairness.tracking._payload import Payload, diff_payload, monitor_payload, run_payload

if TYPE_CHECKING:
    from fairness.audit._diff import DiffResult
    from fairness.audit._results import FairnessRun
    from fairness.monitor._results import MonitorRun

MLFLOW_EXTRA = "pip install 'llm-fairness-check[mlflow]'"
DEFAULT_EXPERIMENT = "llm-fairness-check"
"""The experiment runs go to unless MLFLOW_EXPERIMENT_NAME names another."""
RUN_ARTIFACTS = ("results.json", "card.html", "card.yaml", "summary.md")
MONITOR_ARTIFACTS = ("monitor.json", "summary.md", "junit.xml")
HTTP_DEFAULTS = {"MLFLOW_HTTP_REQUEST_MAX_RETRIES": "2", "MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR": "1",
                 "MLFLOW_HTTP_REQUEST_TIMEOUT": "30"}
"""Bounded retries unless the user sets them: MLflow's own defaults wait minutes for a server that is down."""
_BATCH_METRICS, _BATCH_PARAMS = 1000, 100
"""MLflow's log_batch limits."""
_MAX_MESSAGE = 300


def require_mlflow(uri: str, what: str = "`--mlflow`") -> None:
    """Refuse `what` (the flag or the Action input) before any work: an empty URI, or mlflow not installed
    (naming the extra to install)."""
    if not uri.strip() or any(ch in uri for ch in "\r\n\t"):
        raise FairnessError(f"{what} needs a tracking URI, e.g. http://127.0.0.1:5000")
    if importlib.util.find_spec("mlflow") is None:
        raise FairnessError(f"{what} needs the mlflow package: {MLFLOW_EXTRA}")


def log_run(uri: str, run: FairnessRun, out: Path, *, env: Mapping[str, str] | None = None,
            err: TextIO | None = None) -> str | None:
    """Log one `run` (its outputs in `out` as artifacts); the MLflow run id, or None after a warning."""
    env = os.environ if env is None else env
    files = [out / name for name in RUN_ARTIFACTS if (out / name).is_file()]
    return _log(uri, run_payload(run, env), files, {}, env, err or sys.stderr)


def log_diff(uri: str, d: DiffResult, markdown: str, *, env: Mapping[str, str] | None = None,
             err: TextIO | None = None) -> str | None:
    """Log one `diff` (diff.json and diff.md as artifacts); the MLflow run id, or None after a warning."""
    env = os.environ if env is None else env
    texts = {"diff.json": d.model_dump_json(indent=1) + "\n", "diff.md": markdown}
    return _log(uri, diff_payload(d, env), [], texts, env, err or sys.stderr)


def log_monitor(uri: str, run: MonitorRun, out: Path, *, env: Mapping[str, str] | None = None,
                err: TextIO | None = None) -> str | None:
    """Log one `monitor` (its outputs in `out` as artifacts, its windows as steps); the MLflow run id, or
    None after a warning."""
    env = os.environ if env is None else env
    files = [out / name for name in MONITOR_ARTIFACTS if (out / name).is_file()]
    return _log(uri, monitor_payload(run, env), files, {}, env, err or sys.stderr)


def _log(uri: str, payload: Payload, files: list[Path], texts: dict[str, str], env: Mapping[str, str],
         err: TextIO) -> str | None:
    for name, value in HTTP_DEFAULTS.items():
        os.environ.setdefault(name, value)
    try:
        with _quiet():
            run_id, experiment = _send(uri, payload, files, texts, env)
    except Exception as exc:  # noqa: BLE001 - whatever the server or client does, the audit's verdict stands
        print(f"warning: could not log to MLflow at {uri}: {_message(exc, env)} (the outputs are written)", file=err)
        return None
    print(f"mlflow: logged run {run_id} to experiment {experiment!r} at {uri}", file=err)
    return run_id


def _send(uri: str, payload: Payload, files: list[Path], texts: dict[str, str],
          env: Mapping[str, str]) -> tuple[str, str]:
    import mlflow
    from mlflow.tracking import MlflowClient

    # MLflow before 3.x's later releases resolves `mlflow-artifacts:` with the global tracking URI, not the
    # client's: set it for this call and put the previous one back.
    previous = mlflow.get_tracking_uri()
    mlflow.set_tracking_uri(uri)
    try:
        return _send_with(MlflowClient(tracking_uri=uri), payload, files, texts, env)
    finally:
        mlflow.set_tracking_uri(previous)


def _send_with(client: Any, payload: Payload, files: list[Path], texts: dict[str, str],
               env: Mapping[str, str]) -> tuple[str, str]:
    from mlflow.entities import Metric, Param

    name = env.get("MLFLOW_EXPERIMENT_NAME") or DEFAULT_EXPERIMENT
    exp = client.get_experiment_by_name(name)
    exp_id = exp.experiment_id if exp is not None else client.create_experiment(name)
    run = client.create_run(str(exp_id), run_name=payload.name, tags=payload.tags)
    run_id = run.info.run_id
    try:
        params = [Param(k, v) for k, v in payload.params.items()]
        for i in range(0, len(params), _BATCH_PARAMS):
            client.log_batch(run_id, params=params[i:i + _BATCH_PARAMS])
        now = int(time.time() * 1000)
        metrics = [Metric(k, v, now, 0) for k, v in payload.metrics.items()]
        metrics += [Metric(k, v, now, step) for k, points in payload.series.items() for step, v in points]
        for i in range(0, len(metrics), _BATCH_METRICS):
            client.log_batch(run_id, metrics=metrics[i:i + _BATCH_METRICS])
        for path in files:
            client.log_artifact(run_id, str(path))
        for file_name, text in texts.items():
            client.log_text(run_id, text, file_name)
    except BaseException:
        with contextlib.suppress(Exception):
            client.set_terminated(run_id, "FAILED")
        raise
    client.set_terminated(run_id, "FINISHED")
    return run_id, name


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    """MLflow's and urllib3's own log lines and warnings stay out of stderr: the outcome is one line of ours."""
    loggers = [logging.getLogger(n) for n in ("mlflow", "urllib3")]
    levels = [lg.level for lg in loggers]
    for lg in loggers:
        lg.setLevel(logging.CRITICAL)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            yield
    finally:
        for lg, level in zip(loggers, levels, strict=True):
            lg.setLevel(level)


def _message(exc: BaseException, env: Mapping[str, str]) -> str:
    text = " ".join(str(exc).split()) or type(exc).__name__
    token = env.get("MLFLOW_TRACKING_TOKEN")
    if token:
        text = text.replace(token, "***")
    return text if len(text) <= _MAX_MESSAGE else text[:_MAX_MESSAGE] + "…"


