"""benchmarks/bench_monitor.py works end to end on a small log set (the 10,000,000-row figures are measured by hand).

Slow: it starts Spark twice (one `monitor --engine spark` process per sampling rate)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

pytest.importorskip("duckdb")
pytest.importorskip("pyspark")

from fairness.monitor._spark import _java

if _java() is None:
    pytest.skip("no Java runtime (JAVA_HOME or `java` on PATH): the Spark engine cannot start", allow_module_level=True)

_spec = importlib.util.spec_from_file_location("bench_monitor", Path(__file__).resolve().parents[1] / "benchmarks" / "bench_monitor.py")
assert _spec is not None and _spec.loader is not None
bench = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(bench)


@pytest.mark.slow
def test_both_engines_both_samplings_same_bytes_and_the_whole_tree_measured(tmp_path, capsys):
    results = bench.main(["--rows", "20000", "--data", str(tmp_path)])
    assert [(r["engine"], r["sample"]) for r in results] == [("duckdb", 10), ("spark", 10), ("duckdb", 1), ("spark", 1)]
    assert all(r["same_bytes"] for r in results)
    assert [r["procs"] for r in results if r["engine"] == "duckdb"] == [1, 1]
    assert all(r["procs"] >= 4 for r in results if r["engine"] == "spark")  # driver, JVM, daemon, ≥ 1 worker
    assert all(0 < r["pss_kib"] <= r["rss_kib"] for r in results)
    assert all(r["stderr"] == "" for r in results)
    out = capsys.readouterr().out
    assert "1/10: Spark ÷ DuckDB rows/s = " in out and "1/1: Spark ÷ DuckDB rows/s = " in out
    assert (tmp_path / "logs-20000" / "_complete").read_text(encoding="utf-8") == "20000"
