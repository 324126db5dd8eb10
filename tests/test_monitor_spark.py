"""The Spark engine gives the DuckDB engine's results: the same aggregate table and the same monitor.json bytes.

The log sets are tests/monitor_logs.py's (generated at test time, planted rates); Spark runs for
real in local mode, one session for the module. Skipped only when there is no Java runtime.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from monitor_logs import (
    CLEAN,
    EDGE_MAPPING,
    GLOB_NAMES,
    MAPPING,
    glob_named_logs,
    make_records,
    nanosecond_records,
    text_like_numbers,
    write_logs,
)

from fairness.cli import main
from fairness.monitor._engine import Aggregate, ScanJob, keep
from fairness.monitor._job import check_options, engine_for, monitor_logs

pytest.importorskip("duckdb")
pytest.importorskip("pyarrow")
pytest.importorskip("pyspark")

from fairness.monitor._duckdb import DuckDBEngine
from fairness.monitor._spark import CONF, MALLOC_ENV, SparkEngine, _java, start_session

if _java() is None:
    pytest.skip("no Java runtime (JAVA_HOME or `java` on PATH): the Spark engine cannot start", allow_module_level=True)

OUTPUTS = ("monitor.json", "summary.md", "junit.xml")
NO_UNIT = MAPPING.replace("unit: user\n", "")
NO_ID = NO_UNIT.replace("id: request_id\n", "")


@pytest.fixture(scope="module")
def spark():
    session, stop = start_session("local[2]", CONF)
    yield session
    stop()


@pytest.fixture(scope="module")
def logs(tmp_path_factory) -> tuple[Path, list[dict]]:
    root = tmp_path_factory.mktemp("spark-logs")
    records, _, _ = make_records(users_per_slice=12)
    for fmt in ("jsonl", "jsonl.gz", "parquet", "csv"):
        write_logs(root / fmt, records, fmt)
    for name, text in (("unit", MAPPING), ("no-unit", NO_UNIT), ("no-id", NO_ID)):
        (root / f"{name}.yaml").write_text(text, encoding="utf-8")
    return root, records


class Kept:
    """An engine that keeps the aggregate it returned (the real engine does the work)."""

    def __init__(self, engine):
        self.engine = engine
        self.agg: Aggregate | None = None

    def aggregate(self, job: ScanJob) -> Aggregate:
        self.agg = self.engine.aggregate(job)
        return self.agg


def run_both(spark, root: Path, out: Path, fmt: str, mapping: str, **options) -> tuple[Aggregate, Aggregate]:
    """The same options through DuckDB and Spark; every output file must be the same bytes."""
    aggs = []
    for name, engine in (("duckdb", DuckDBEngine()), ("spark", SparkEngine(session=spark))):
        kept = Kept(engine)
        opts = check_options({"logs": [str(root / fmt)], "mapping": str(root / f"{mapping}.yaml"),
                              "out": str(out / name), "engine": name, **options})
        monitor_logs(opts, engine=kept)
        assert kept.agg is not None
        aggs.append(kept.agg)
    for f in OUTPUTS:
        assert (out / "spark" / f).read_bytes() == (out / "duckdb" / f).read_bytes(), f
    return aggs[0], aggs[1]


CASES = [  # format, mapping, options: every window kind, with and without a unit and an id, 1/N sampling, examples
    ("jsonl", "unit", {"window": "day"}),
    ("jsonl.gz", "no-unit", {"window": "week", "sample": 3}),
    ("parquet", "unit", {"window": "500", "sample": 2, "examples": 4}),
    ("csv", "unit", {"window": "day", "sample": 5, "examples": 2}),
    ("parquet", "no-id", {"window": "day", "examples": 3}),
]


@pytest.mark.parametrize(("fmt", "mapping", "options"), CASES, ids=[f"{c[0]}-{c[1]}-{c[2]['window']}" for c in CASES])
def test_spark_gives_duckdbs_aggregate_and_bytes(spark, logs, tmp_path, fmt, mapping, options):
    root, records = logs
    duck, sp = run_both(spark, root, tmp_path, fmt, mapping, **options)
    assert sp.table.schema == duck.table.schema
    assert sp.table.equals(duck.table)
    sample = options.get("sample", 1)
    kept = [r for r in records if keep(r["request_id"], sample)]
    assert (sp.rows_read, sp.rows_sampled) == (duck.rows_read, duck.rows_sampled) == (len(records), len(kept))
    assert sum(sp.table.column("n").to_pylist()) == len(kept)
    assert sp.examples == duck.examples
    assert len(sp.examples) == options.get("examples", 0)
    units = set(sp.table.column("unit").to_pylist())
    assert units == ({r["user"] for r in kept} if mapping == "unit" else {None})


def test_cli_engine_spark_writes_duckdbs_outputs(spark, logs, tmp_path, capsys):
    root, _ = logs
    codes = {}
    for engine in ("duckdb", "spark"):
        codes[engine] = main(["monitor", str(root / "jsonl"), "--mapping", str(root / "unit.yaml"), "--out",
                              str(tmp_path / engine), "--engine", engine, "--sample", "2"])
    printed = capsys.readouterr()
    assert codes["spark"] == codes["duckdb"] == 1  # the planted drift fails the regression rule
    assert "engine spark;" in printed.out and "engine duckdb;" in printed.out
    assert printed.err == ""
    for f in OUTPUTS:
        assert (tmp_path / "spark" / f).read_bytes() == (tmp_path / "duckdb" / f).read_bytes(), f


@pytest.mark.parametrize(("mapping", "message"), [
    ("text: answer\ngroups: [gender]\ntimestamp: ts\n",
     "mapping `text`: field `answer` is not in the logs (fields: gender, output, religion, request_id, ts, user)"),
    (NO_ID, None),
])
def test_bad_input_is_duckdbs_exit_2_line(spark, logs, tmp_path, capsys, mapping, message):
    root, _ = logs
    (tmp_path / "m.yaml").write_text(mapping, encoding="utf-8")
    lines = []
    for engine in ("duckdb", "spark"):
        code = main(["monitor", str(root / "jsonl"), "--mapping", str(tmp_path / "m.yaml"), "--out",
                     str(tmp_path / engine), "--engine", engine, "--sample", "2", "--quiet"])
        assert code == 2
        lines.append(capsys.readouterr().err)
    expected = message or "mapping `id`: sampling (--sample above 1) needs a record id field"
    assert lines == [f"error: {expected}\n"] * 2


def test_unreadable_logs_are_exit_2_one_line(spark, tmp_path, capsys):
    (tmp_path / "logs").mkdir()
    (tmp_path / "logs" / "a.jsonl").write_text('{"output": "x", "gender": "man", "ts": "2026-03-02T00:00:00Z"}\n{oops\n',
                                                encoding="utf-8")
    (tmp_path / "m.yaml").write_text("text: output\ngroups: [gender]\ntimestamp: ts\n", encoding="utf-8")
    code = main(["monitor", str(tmp_path / "logs"), "--mapping", str(tmp_path / "m.yaml"), "--out",
                 str(tmp_path / "out"), "--engine", "spark", "--quiet"])
    err = capsys.readouterr().err
    assert code == 2
    assert err.count("\n") == 1 and err.startswith("error: cannot read the logs as jsonl: "), err
    assert not (tmp_path / "out" / "monitor.json").exists()


@pytest.mark.parametrize(("hide", "message"), [
    ("java", "error: the Spark engine needs a Java runtime (17 or 21, e.g. apt-get install openjdk-17-jre-headless): "
             "set JAVA_HOME or put `java` on PATH\n"),
    ("pyspark", "error: the Spark engine needs PySpark and a Java runtime: pip install 'llm-fairness-check[spark]'\n"),
    ("pandas", "error: the Spark engine needs pandas (PySpark's Arrow UDFs require it): "
               "pip install 'llm-fairness-check[spark]'\n"),
])
def test_missing_java_pyspark_or_pandas_is_exit_2_saying_what_to_install(logs, tmp_path, hide, message):
    root, _ = logs
    env = {k: v for k, v in os.environ.items() if k != "JAVA_HOME"}
    env["PATH"] = os.pathsep.join(p for p in env.get("PATH", "").split(os.pathsep) if not Path(p, "java").exists())
    env["PYTHONPATH"] = os.pathsep.join([str(Path(__file__).parents[1]), env.get("PYTHONPATH", "")])
    hider = f"import sys; sys.modules[{hide!r}] = None; " if hide != "java" else ""
    code = (f"{hider}from fairness.cli import main; raise SystemExit(main(['monitor', {str(root / 'jsonl')!r}, "
            f"'--mapping', {str(root / 'unit.yaml')!r}, '--out', {str(tmp_path / 'out')!r}, '--engine', 'spark']))")
    done = subprocess.run([sys.executable, "-c", code], check=False, env=env, capture_output=True, text=True, timeout=120)
    assert (done.returncode, done.stderr) == (2, message)
    assert not (tmp_path / "out").exists()


def test_spark_master_reaches_the_engine_and_only_spark_takes_it(logs, tmp_path, capsys):
    root, _ = logs
    assert engine_for("spark", "local[1]").master == "local[1]"
    assert engine_for("spark").master == "local[2]"
    code = main(["monitor", str(root / "jsonl"), "--mapping", str(root / "unit.yaml"), "--out", str(tmp_path / "out"),
                 "--spark-master", "local[1]"])
    assert code == 2
    assert capsys.readouterr().err.startswith("error: monitor: --spark-master is for --engine spark")


def test_workers_fork_from_the_monitor_daemon_that_imported_the_scoring_code(spark):
    """The workers share the daemon's imported pages (objects frozen before the fork are inherited frozen)."""

    def probe(batches):  # in a Python worker: the module its parent (the daemon) runs, and the objects frozen
        import gc
        import os
        from pathlib import Path

        import pyarrow as pa

        argv = Path(f"/proc/{os.getppid()}/cmdline").read_bytes().decode().split("\0")
        for _ in batches:
            yield pa.RecordBatch.from_pydict({"daemon": [argv[argv.index("-m") + 1]], "frozen": [gc.get_freeze_count()]})

    rows = spark.range(1).mapInArrow(probe, "daemon string, frozen bigint").collect()
    assert [r.daemon for r in rows] == ["fairness.monitor._spark_daemon"]
    assert all(r.frozen > 10_000 for r in rows)


def test_a_worker_finds_the_session_files_directory_on_its_path_and_keeps_the_daemons_zip_directory(spark):
    """PySpark's worker adds the session's files directory to sys.path and, if that changed it, invalidates the
    import caches: on Python 3.11 each zipimporter into pyspark.zip then reads the archive's directory again
    (~14 MB per worker). The daemon put the directory there first, so every importer still shares one copy."""

    def probe(batches):
        import sys
        import zipimport

        import pyarrow as pa
        from pyspark import SparkFiles

        zips = [imp for imp in sys.path_importer_cache.values()
                if isinstance(imp, zipimport.zipimporter) and imp.archive.endswith("pyspark.zip")]
        for _ in batches:
            yield pa.RecordBatch.from_pydict({"on_path": [sys.path.count(SparkFiles.getRootDirectory())],
                                              "importers": [len(zips)], "directories": [len({id(i._files) for i in zips})]})

    rows = spark.range(1).mapInArrow(probe, "on_path bigint, importers bigint, directories bigint").collect()
    assert [(r.on_path, r.directories) for r in rows] == [(1, 1)]
    assert all(r.importers > 10 for r in rows)


def test_the_daemon_imports_the_scoring_code_and_stays_one_thread_to_fork_safely():
    """In the environment the session gives it, the daemon has imported the scoring code and has no other thread."""
    code = ("import gc, os, sys; from fairness.monitor._spark_daemon import preload; preload(); "
            "print(len(os.listdir('/proc/self/task')), all(m in sys.modules for m in "
            "('pyarrow', 'pandas', 'numpy', 'pyspark.worker', 'fairness.monitor._engine')), gc.get_freeze_count() > 10_000)")
    given = {k.removeprefix("spark.executorEnv."): v for k, v in CONF.items() if k.startswith("spark.executorEnv.")}
    env = {**os.environ, **given,
           "PYTHONPATH": os.pathsep.join([str(Path(__file__).parents[1]), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run([sys.executable, "-c", code], check=True, env=env, capture_output=True, text=True, timeout=120)
    assert done.stdout == "1 True True\n"


def test_the_jvm_gets_the_allocator_settings_and_this_process_keeps_its_environment(spark):
    jvm = spark.sparkContext._gateway.proc.pid
    env = dict(e.split("=", 1) for e in Path(f"/proc/{jvm}/environ").read_bytes().decode().split("\0") if "=" in e)
    assert {k: env.get(k) for k in MALLOC_ENV} == {"MALLOC_ARENA_MAX": "2", "MALLOC_MMAP_THRESHOLD_": "131072"}
    assert [k for k in MALLOC_ENV if k in os.environ] == []


# -- issue 22: values an engine could spell differently, nanosecond timestamps, glob characters in names -----

GROUP_MAPPING = "text: output\ngroups: [g]\ntimestamp: ts\nid: request_id\n"
KEY_RULE = "group, slice, unit and id values must be strings, integers or booleans"


def both(logs: Path, mapping: str, tmp_path: Path, capsys, *args: str) -> tuple[int, str, dict | None]:
    """The CLI on the same logs with each engine: the same exit code and stderr, the same output bytes when
    written; the code, stderr and monitor.json."""
    (tmp_path / "m.yaml").write_text(mapping, encoding="utf-8")
    seen = []
    for engine in ("duckdb", "spark"):
        code = main(["monitor", str(logs), "--mapping", str(tmp_path / "m.yaml"), "--out", str(tmp_path / engine),
                     "--engine", engine, "--quiet", *args])
        seen.append((code, capsys.readouterr().err))
    assert seen[0] == seen[1]
    if seen[0][0] == 2:
        assert not (tmp_path / "duckdb").exists() and not (tmp_path / "spark").exists()
        return seen[0][0], seen[0][1], None
    for f in OUTPUTS:
        assert (tmp_path / "spark" / f).read_bytes() == (tmp_path / "duckdb" / f).read_bytes(), f
    return seen[0][0], seen[0][1], json.loads((tmp_path / "duckdb" / "monitor.json").read_text(encoding="utf-8"))


def slice_counts(data: dict) -> dict[str, int]:
    out: dict[str, int] = {}
    for w in data["windows"]:
        for s, e in w["metrics"][0]["by_slice"].items():
            out[s] = out.get(s, 0) + e["n"]
    return out


def test_both_read_csv_cells_as_written(spark, tmp_path, capsys):
    rows = text_like_numbers()
    write_logs(tmp_path / "csv", rows, "csv", parts=1)
    _, err, data = both(tmp_path / "csv", EDGE_MAPPING, tmp_path, capsys, "--sample", "3")
    assert err == "" and data is not None
    assert data["source"]["rows_sampled"] == len([r for r in rows if keep(r["request_id"], 3)]) == 86
    assert data["slices"] == ["1e3_(missing)", "1e3_FALSE", "1e3_TRUE", "2e3_(missing)", "2e3_FALSE", "2e3_TRUE"]
    assert [w["units"] for w in data["windows"]] == [3]  # users 7, 07 and 007


def row(i: int, g: object, ts: object = "2026-03-02T10:00:00Z") -> dict:
    return {"request_id": f"r{i}", "output": CLEAN, "g": g, "ts": ts}


@pytest.mark.parametrize(("fmt", "values", "message"), [
    ("jsonl", [1e10, 0.1, -0.0, 2], f"field `g` holds floating-point numbers; {KEY_RULE} (bucket numbers into labels "
                                    "in the logs)"),
    ("parquet", [1e10, 0.1, -0.0, float("nan")], f"field `g` holds floating-point numbers; {KEY_RULE} (bucket numbers "
                                                 "into labels in the logs)"),
    ("jsonl", ["a", 1.0e10, 7, 0.1, -0.0, [1], True, None, 2**64 - 1],
     f"field `g` holds a floating-point number, an object or an array in 5 record(s); {KEY_RULE}"),
])
def test_both_refuse_a_floating_point_group_value_in_one_line(spark, tmp_path, capsys, fmt, values, message):
    write_logs(tmp_path / "logs", [row(i, v) for i, v in enumerate(values)], fmt, parts=1)
    assert both(tmp_path / "logs", GROUP_MAPPING, tmp_path, capsys) == (2, f"error: mapping `groups`: {message}\n", None)


def test_both_spell_a_json_field_of_text_integers_and_booleans_alike(spark, tmp_path, capsys):
    values = ["a", 7, True, None, "7", -3, 2**63 - 1, False]
    write_logs(tmp_path / "logs", [row(i, v) for i, v in enumerate(values)], "jsonl", parts=1)
    _, err, data = both(tmp_path / "logs", GROUP_MAPPING, tmp_path, capsys)
    assert err == "" and data is not None
    assert slice_counts(data) == {"(missing)": 1, "-3": 1, "7": 2, "9223372036854775807": 1, "a": 1, "false": 1,
                                  "true": 1}


def test_both_refuse_an_integer_timestamp(spark, tmp_path, capsys):
    write_logs(tmp_path / "logs", [row(0, "a", 1772409600)], "jsonl", parts=1)
    assert both(tmp_path / "logs", GROUP_MAPPING, tmp_path, capsys) == (
        2, "error: mapping `timestamp`: field `ts` holds integers; it must hold ISO-8601 strings or timestamps\n", None)


@pytest.mark.parametrize("tz", [None, "UTC"])
@pytest.mark.parametrize(("window", "expected"), [
    ("day", {"2026-03-01": 30, "2026-03-02": 90}), ("week", {"2026-W09": 30, "2026-W10": 90}),
    ("50", {"r000000": 50, "r000001": 50, "r000002": 20})])
def test_both_read_nanosecond_timestamps_cut_to_the_microsecond_below(spark, tmp_path, capsys, tz, window, expected):
    import pyarrow.parquet as pq

    (tmp_path / "logs").mkdir()
    pq.write_table(nanosecond_records(tz), tmp_path / "logs" / "ns.parquet")
    _, err, data = both(tmp_path / "logs", GROUP_MAPPING, tmp_path, capsys, "--window", window)
    assert err == "" and data is not None
    assert {w["window"]: w["n"] for w in data["windows"]} == expected
    assert spark.conf.get("spark.sql.legacy.parquet.nanosAsLong", None) is None  # the session's setting put back


@pytest.mark.parametrize("name", ["logs[1].jsonl", "a*b.jsonl", "b{1,2}.jsonl", "q?.jsonl"])
def test_both_read_a_glob_named_file_alone(spark, tmp_path, capsys, name):
    logs = glob_named_logs(tmp_path / "logs")
    _, err, data = both(logs / name, GROUP_MAPPING, tmp_path, capsys)
    assert err == "" and data is not None
    assert (data["source"]["rows_read"], data["slices"]) == (GLOB_NAMES[name], [name])


def test_both_read_each_glob_named_file_of_a_directory_once(spark, tmp_path, capsys):
    logs = glob_named_logs(tmp_path / "logs [x]")
    _, err, data = both(logs, GROUP_MAPPING, tmp_path, capsys)
    assert err == "" and data is not None
    assert slice_counts(data) == GLOB_NAMES


def test_both_read_a_quoted_empty_csv_cell_as_missing(spark, tmp_path, capsys):
    (tmp_path / "logs").mkdir()
    (tmp_path / "logs" / "a.csv").write_text(
        "request_id,output,g,ts\n"
        f'001,{CLEAN},"",2026-03-02T10:00:00Z\n'
        f"002,{CLEAN},,2026-03-02T10:00:00Z\n"
        f'003,{CLEAN}," TRUE",2026-03-02T10:00:00Z\n'
        f"004,{CLEAN},0x1F,2026-03-02T10:00:00Z\n", encoding="utf-8")
    _, err, data = both(tmp_path / "logs", GROUP_MAPPING, tmp_path, capsys)
    assert err == "" and data is not None
    assert slice_counts(data) == {"(missing)": 2, " TRUE": 1, "0x1F": 1}


def test_spark_refuses_a_file_name_with_a_colon_naming_it_and_duckdb_reads_it(spark, tmp_path, capsys):
    """Timestamps in log file names (`app-2026-12-01T00:00:00.jsonl`) are common; Hadoop lists such a file
    but cannot open it, so the Spark engine names it before it starts and DuckDB reads it."""
    records, _, _ = make_records(users_per_slice=3)
    write_logs(tmp_path / "logs", records, "jsonl")
    for i, f in enumerate(sorted((tmp_path / "logs").iterdir())):
        f.rename(f.with_name(f"app-2026-12-01T00:00:0{i}.jsonl"))
    (tmp_path / "m.yaml").write_text(MAPPING, encoding="utf-8")
    args = [str(tmp_path / "logs"), "--mapping", str(tmp_path / "m.yaml"), "--quiet"]
    assert main(["monitor", *args, "--out", str(tmp_path / "spark"), "--engine", "spark"]) == 2
    first = tmp_path / "logs" / "app-2026-12-01T00:00:00.jsonl"
    assert capsys.readouterr().err == (f"error: the Spark engine cannot read `{first}`: Hadoop paths cannot hold ':'; "
                                       "rename the file or use --engine duckdb\n")
    assert not (tmp_path / "spark").exists()
    assert main(["monitor", *args, "--out", str(tmp_path / "duckdb")]) == 4
    source = json.loads((tmp_path / "duckdb" / "monitor.json").read_text())["source"]
    assert (source["files"], source["rows_read"]) == (2, len(records))
