"""CLI command `monitor`: audit production logs (a thin adapter over `MonitorOptions`)."""

from __future__ import annotations

import argparse

from fairness.audit._gate import DEFAULT_FAIL_ON, FAIL_ON_CHOICES, FAIL_ON_HELP, GATE_ON_CHOICES
from fairness.cli._audit import add_mlflow


def add_arguments(m: argparse.ArgumentParser, add_suite) -> None:
    """The options of `monitor`."""
    m.add_argument("logs", nargs="+", help="log files, globs or directories: JSONL (plain or .gz), Parquet or CSV")
    m.add_argument("--mapping", required=True, help="mapping YAML: text, groups or slice, timestamp, unit, id "
                                                    "(`llm-fairness-check schema mapping`)")
    m.add_argument("--out", required=True, help="output directory: monitor.json, summary.md, junit.xml")
    add_suite(m)
    m.add_argument("--sample", type=int, default=1, metavar="N",
                   help="keep a deterministic 1/N of the records by the md5 of their id (default 1: all)")
    m.add_argument("--window", default="day", help="day (UTC), week (ISO) or N: runs of N sampled records (default day)")
    m.add_argument("--reference", default="previous",
                   help="compare each window with: previous (default), window:LABEL, or a grid audit's results.json "
                        "(or its run directory)")
    m.add_argument("--engine", choices=["duckdb", "spark"], default="duckdb",
                   help="duckdb (embedded, default) or spark (PySpark, at scale); both write the same monitor.json")
    m.add_argument("--spark-master", metavar="URL", help="Spark master for --engine spark (default local[2])")
    m.add_argument("--examples", type=int, default=0, metavar="N",
                   help="include N sampled records' texts in monitor.json (default 0: no log text is written)")
    m.add_argument("--gate-on", choices=GATE_ON_CHOICES, default="interval")
    m.add_argument("--fail-on", choices=FAIL_ON_CHOICES, default=DEFAULT_FAIL_ON,
                   help="; ".join(f"`{k}`: {v}" for k, v in FAIL_ON_HELP.items()) + f" (default: {DEFAULT_FAIL_ON})")
    m.add_argument("--quiet", action="store_true", help="print only the verdict line")
    add_mlflow(m)
    m.set_defaults(handler=cmd_monitor)


def cmd_monitor(args: argparse.Namespace) -> int:
    from fairness.monitor._job import check_options, monitor_logs
    from fairness.monitor._render import drift_line, verdict_line
    from fairness.report._render import plain

    if args.mlflow is not None:
        from fairness.tracking import require_mlflow

        require_mlflow(args.mlflow)
    options = check_options({
        "logs": args.logs, "mapping": args.mapping, "out": args.out, "suite": args.suite, "sample": args.sample,
        "window": args.window, "reference": args.reference, "engine": args.engine, "examples": args.examples, "spark_master": args.spark_master,
        "gate_on": args.gate_on, "fail_on": args.fail_on,
    })
    result = monitor_logs(options)
    run = result.run
    print(plain(verdict_line(run)))
    if not args.quiet:
        s = run.source
        print(f"{s.rows_sampled}/{s.rows_read} records sampled (1/{s.sample}) in {len(run.windows)} window(s) "
              f"by {s.window}, engine {result.engine}; {drift_line(run)}")
        print(f"wrote monitor.json, summary.md, junit.xml to {result.out}")
    if args.mlflow is not None:  # after every output is written; a failure is a warning
        from fairness.tracking import log_monitor

        log_monitor(args.mlflow, run, result.out)
    return run.gate.exit_code
