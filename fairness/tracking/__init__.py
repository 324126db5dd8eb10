"""Tracking: log an audit (`run`, `diff`, `monitor`) to an experiment tracker (MLflow) after its outputs are written.

`_payload` turns the one typed record (a `FairnessRun`, a `DiffResult` or a `MonitorRun`) into parameters, metrics
and tags, pure and without MLflow; `_mlflow` is the only module that imports mlflow, lazily, when
`--mlflow` (or the Action input `mlflow-tracking-uri`) is given. The replay path never imports it.
"""

from fairness.tracking._mlflow import MLFLOW_EXTRA, log_diff, log_monitor, log_run, require_mlflow
from fairness.tracking._payload import Payload, diff_payload, metric_key, monitor_payload, run_payload

__all__ = ["MLFLOW_EXTRA", "Payload", "diff_payload", "log_diff", "log_monitor", "log_run", "metric_key",
           "monitor_payload", "require_mlflow", "run_payload"]
