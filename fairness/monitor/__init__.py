"""Production-log monitoring: the grid audit's scorers, intervals and gate applied to logged outputs.

`monitor_logs` (the job, `_job`) reads log files through an engine (`_duckdb` by default), keeps
a deterministic 1/N sample, scores each Arrow batch (`_score`), reduces it to the per-cell
aggregate table of the engine contract (`_engine`), and computes every statistic from that table
(`_stats`, `_drift`) into the typed `MonitorRun` (`_results`).
"""

from fairness.monitor._job import MonitorOutputs, build_run, monitor_logs
from fairness.monitor._mapping import Mapping, load_mapping
from fairness.monitor._options import MonitorOptions
from fairness.monitor._results import MonitorRun

__all__ = ["Mapping", "MonitorOptions", "MonitorOutputs", "MonitorRun", "build_run", "load_mapping", "monitor_logs"]
