"""Production-log monitoring: the grid audit's scorers, intervals and gate applied to logged outputs.

`monitor_logs` (the job, `_job`) reads log files through an engine (`_duckdb` by default), keeps
a deterministic 1/N sample, scores each Arrow batch (`_score`), reduces it to the per-cell
aggregate table of the engine contract (`_engine`), and computes every statistic from that table
(`_stats`, `_drift`) into the typed `MonitorRun` (`_results`).
"""
