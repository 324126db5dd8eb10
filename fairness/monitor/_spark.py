"""The Spark engine: the same job as DuckDB's on PySpark, for logs at scale, with the same aggregate table.

Spark reads the files, samples with the contract's md5 rule in Spark SQL (and numbers the sampled
records for row windows), hands each Arrow batch to the shared `cells_of_batch` in `mapInArrow`
(its rows summed per (window, slice, unit) within the batch, so little leaves the Python worker),
sums the cells with `groupBy().agg(sum)`, collects that small table and passes it to `finish`.
Nothing else is computed here: the statistics come from the aggregate, so monitor.json is the
same bytes as DuckDB's.

The session is `local[2]` unless told otherwise; the JVM's own output (log4j, Java warnings, the
Python workers' stderr) goes to a temporary file, so the user's stderr only ever gets our one
line. A session already active in the process (a test's, a notebook's) is used and left running.
"""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import sys
import tempfile
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from fairness._util.errors import FairnessError
from fairness.monitor._duckdb import read_error
from fairness.monitor._engine import (
    HASH_HEX_DIGITS,
    ORDER_ONLY,
    Aggregate,
    ScanJob,
    agg_schema,
    cells_of_batch,
    check_field_kinds,
    check_key_values,
    check_mapped_fields,
    check_sampled_counts,
    example_rows,
    finish,
    key_fields,
)
from fairness.monitor._spark_daemon import FILES_DIR_ENV

DEFAULT_MASTER = "local[2]"
INSTALL = "pip install 'llm-fairness-check[spark]'"
JAVA_OPTIONS = (
    "-XX:+UseSerialGC", "-XX:MaxHeapFreeRatio=20", "-XX:MinHeapFreeRatio=5", "-XX:MaxNewSize=8m", "-Xms16m",
    "-XX:ReservedCodeCacheSize=64m", "-XX:MaxDirectMemorySize=128m", "-Djdk.nio.maxCachedBufferSize=262144",
    "-Xss512k", "-Duser.timezone=UTC",
)
"""The driver JVM (measured on 1,000,000 Parquet rows, peak of the JVM's RSS and its native memory tracking):
the serial collector, whose old generation grows only to what a full collection leaves live (G1 kept
~50 MB of its own bookkeeping and a larger heap: ~800 → ~680 MB); an 8 MB young generation (32 MB:
the JVM's peak ~40 MB higher, 1,000,000 rows, three runs each); small
code and direct-memory caps; and no per-thread cache of direct buffers above 256 KB (the JDK keeps a
temporary direct copy of each large socket write to the Python workers: ~100 → ~23 MB). The client
compiler alone (-XX:TieredStopAtLevel=1) saved ~50 MB but halved the scan's speed (no md5 intrinsic),
so both compilers run. The heap limit stays 512 MB: Spark refuses a driver under ~470 MB."""
MALLOC_ENV = {"MALLOC_ARENA_MAX": "2", "MALLOC_MMAP_THRESHOLD_": "131072"}
"""glibc's allocator in the JVM and the Python workers: blocks of 128 KB and more (Arrow buffers, Parquet
pages, direct buffers) are mapped and unmapped, never kept in a heap arena after they are freed (glibc
otherwise raises that threshold as such blocks are freed). 10,000,000 rows unsampled: the tree's peak
PSS 1,094 → 991 MB (the JVM ~760 → ~690 MB RSS, each worker ~85 → ~73 MB PSS)."""
DAEMON = "fairness.monitor._spark_daemon"
CONF = {
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.shuffle.partitions": "4",
    "spark.sql.session.timeZone": "UTC",
    "spark.driver.memory": "512m",
    "spark.memory.fraction": "0.2",
    "spark.driver.extraJavaOptions": " ".join(JAVA_OPTIONS),
    "spark.sql.parquet.columnarReaderBatchSize": "1024",
    "spark.sql.execution.arrow.maxRecordsPerBatch": "1024",
    "spark.python.daemon.module": DAEMON,
    "spark.python.worker.reuse": "false",
    "spark.executorEnv.ARROW_DEFAULT_MEMORY_POOL": "system",
    **{f"spark.executorEnv.{k}": v for k, v in MALLOC_ENV.items()},
    "spark.executorEnv.OPENBLAS_NUM_THREADS": "1",
    "spark.executorEnv.JE_ARROW_MALLOC_CONF": "background_thread:false",
}
"""Session settings: no UI or progress bar, few shuffle partitions for a small aggregate, UTC. Memory
(benchmarks/bench_monitor.py, the whole process tree): Spark's smallest driver heap, a fifth of what
is left of it above Spark's 300 MB reserve for execution (the default 0.6 lets each task's partial
aggregate grow to ~30 MB of live heap before it spills: the JVM's peak ~30 MB higher, three runs each), 1,024-row
Parquet and Arrow batches, the system allocator in the Python workers, and workers forked per task
from a daemon that imported the scoring code first (`_spark_daemon`): they share its pages, and none
outlives its task (a worker kept for reuse holds its scoring scratch until the session ends); the
daemon starts no thread before it forks (no BLAS pool, no jemalloc background thread: the Python
workers use the system allocator)."""


NANOS_AS_LONG = "spark.sql.legacy.parquet.nanosAsLong"
"""Spark's setting that reads a nanosecond Parquet timestamp as a long (set only while a Parquet job runs)."""
VARIANT_KEY_TYPES = "('STRING', 'BOOLEAN', 'VOID', 'BIGINT', 'INT', 'SMALLINT', 'TINYINT')"
"""The VARIANT value types a JSONL key field may mix (VOID: a JSON null)."""


def _q(name: str) -> str:
    """A Spark SQL identifier (mapping fields are letters, digits, `_` and `-`)."""
    return "`" + name.replace("`", "``") + "`"


def hash_sql(key: str) -> str:
    """The sampling hash of a string expression (the contract's rule, Spark SQL dialect)."""
    return f"CAST(conv(substr(md5({key}), 1, {HASH_HEX_DIGITS}), 16, 10) AS BIGINT)"


def _java() -> str | None:
    home = os.environ.get("JAVA_HOME")
    if home and Path(home, "bin", "java").is_file():
        return str(Path(home, "bin", "java"))
    return shutil.which("java")


class SparkEngine:
    """`Engine` over PySpark: `master` (default `local[2]`) and extra `conf`, or an existing `session`."""

    def __init__(self, master: str | None = None, conf: dict[str, str] | None = None, session: Any = None):
        self.master = master or DEFAULT_MASTER
        self.conf = {**CONF, **(conf or {})}
        self.session = session

    def aggregate(self, job: ScanJob) -> Aggregate:
        colon = next((f for f in job.files if ":" in f), None)
        if colon is not None:  # Hadoop lists such a file but fails to open it (HADOOP-3257)
            raise FairnessError(f"the Spark engine cannot read `{colon}`: Hadoop paths cannot hold ':'; "
                                "rename the file or use --engine duckdb")
        with warnings.catch_warnings():  # PySpark's notes on the pandas version: not the user's concern
            warnings.simplefilter("ignore", FutureWarning)
            spark, stop = self._session()
            try:
                return _aggregate(spark, job)
            finally:
                stop()

    def _session(self) -> tuple[Any, Any]:
        """The session to use and how to let go of it (stop only what this engine started)."""
        try:
            from pyspark.sql import SparkSession
        except ImportError:
            raise FairnessError(f"the Spark engine needs PySpark and a Java runtime: {INSTALL}") from None
        if importlib.util.find_spec("pandas") is None:  # mapInArrow runs through PySpark's pandas UDFs
            raise FairnessError(f"the Spark engine needs pandas (PySpark's Arrow UDFs require it): {INSTALL}")
        active = self.session or SparkSession.getActiveSession()
        if active is not None:
            return active, lambda: None
        if _java() is None:
            raise FairnessError("the Spark engine needs a Java runtime (17 or 21, e.g. apt-get install "
                                "openjdk-17-jre-headless): set JAVA_HOME or put `java` on PATH")
        return start_session(self.master, self.conf)


def start_session(master: str, conf: dict[str, str]) -> tuple[Any, Any]:
    """A new SparkSession whose JVM writes to a temporary log file, and the function that stops it."""
    from py4j.protocol import Py4JError
    from pyspark import SparkConf, SparkContext, SparkFiles
    from pyspark.java_gateway import launch_gateway
    from pyspark.sql import SparkSession

    spark_conf = SparkConf(loadDefaults=False).setMaster(master).setAppName("llm-fairness-check monitor")
    for key, value in conf.items():
        spark_conf.set(key, value)
    logdir = tempfile.mkdtemp(prefix="fairness-spark-")
    log_path = Path(logdir, "jvm.log")
    log = log_path.open("wb")
    try:
        with warnings.catch_warnings():  # PySpark's notes on the pandas version: not the user's concern
            warnings.simplefilter("ignore", FutureWarning)
            with _environment(MALLOC_ENV):  # the JVM's (launch_gateway passes it this process's environment)
                gateway = launch_gateway(spark_conf, popen_kwargs={"stdout": log, "stderr": log})
            sc = SparkContext(conf=spark_conf, gateway=gateway)
    except (RuntimeError, OSError, Py4JError) as exc:  # the JVM did not start: say why in one line, from its log if it wrote one
        log.close()
        said = [line for line in log_path.read_text(errors="replace").splitlines() if line.strip()]
        shutil.rmtree(logdir, ignore_errors=True)
        raise FairnessError(f"Spark did not start ({(said or [str(exc)])[-1].strip()})") from None
    sc.setLogLevel("ERROR")
    sc.pythonExec = os.environ.get("PYSPARK_PYTHON", sys.executable)  # workers run this Python, with its packages
    sc.environment[FILES_DIR_ENV] = SparkFiles.getRootDirectory()  # the Python daemon's (`_spark_daemon.preload`)
    spark = SparkSession(sc)

    def stop() -> None:
        spark.stop()
        gateway.shutdown()
        SparkContext._gateway = None  # the next session launches its own JVM
        SparkContext._jvm = None
        log.close()
        shutil.rmtree(logdir, ignore_errors=True)

    return spark, stop


@contextmanager
def _environment(values: dict[str, str]) -> Iterator[None]:
    """This process's environment with `values` added where not already set, restored after."""
    added = {k: v for k, v in values.items() if k not in os.environ}
    os.environ.update(added)
    try:
        yield
    finally:
        for key in added:
            os.environ.pop(key, None)


def literal_path(path: str) -> str:
    """A file path Hadoop reads as exactly that file: its glob characters escaped with a backslash."""
    return re.sub(r"([\\{}\[\]*?])", r"\\\1", path)


def _reader(spark: Any, job: ScanJob) -> Any:
    """The log files as one DataFrame (fields united by name, as DuckDB reads them; CSV cells as written).

    JSONL: a key field Spark types as a string (text, or values of mixed kinds, which Spark would
    spell as written, `1.0E10`, where DuckDB writes `10000000000.0`) is read as a VARIANT, whose
    type `check_key_values` checks value by value."""
    files = [literal_path(f) for f in job.files]
    if job.format == "jsonl":
        logs = spark.read.option("mode", "FAILFAST").json(files)
        keys = {col for _, col in key_fields(job.mapping)}
        if not any(f.name in keys and f.dataType.typeName() == "string" for f in logs.schema.fields):
            return logs
        from pyspark.sql.types import StructField, StructType, VariantType

        schema = StructType([StructField(f.name, VariantType()) if f.name in keys and f.dataType.typeName() == "string"
                             else f for f in logs.schema.fields])
        return spark.read.schema(schema).option("mode", "FAILFAST").json(files)
    if job.format == "parquet":
        return spark.read.option("mergeSchema", "true").parquet(*files)
    return spark.read.options(header="true", mode="FAILFAST", enforceSchema="false").csv(files)


def kind_of(data_type: Any) -> str:
    """A Spark type's kind (`_engine.check_field_kinds`); a VARIANT is a JSONL key field (see `_reader`)."""
    name = data_type.typeName()
    if name in ("string", "boolean", "variant"):
        return {"string": "string", "boolean": "boolean", "variant": "json"}[name]
    if name in ("byte", "short", "integer", "long"):
        return "integer"
    if name == "decimal":
        return "integer" if data_type.scale == 0 else "fraction"
    if name in ("float", "double"):
        return "float"
    if name in ("date", "timestamp", "timestamp_ntz"):
        return "time"
    return "nested" if name in ("struct", "array", "map") else "other"


def _kinds(logs: Any, job: ScanJob) -> dict[str, str]:
    """Each mapped field's kind; a Parquet timestamp Spark reads as a long (`NANOS_AS_LONG`) is `ns-time`."""
    types = {f.name: f.dataType for f in logs.schema.fields}
    kinds = {col: kind_of(types[col]) for col in job.mapping.fields()}
    ts = job.mapping.timestamp
    if job.format == "parquet" and kinds[ts] == "integer" and _nanosecond_field(job.files, ts):
        kinds[ts] = "ns-time"
    return kinds


def _nanosecond_field(files: tuple[str, ...], name: str) -> bool:
    """Whether the Parquet files store `name` as nanosecond timestamps (their footers, read by pyarrow)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    for path in files:
        schema = pq.read_schema(path)
        if name in schema.names:
            t = schema.field(name).type
            if pa.types.is_timestamp(t) and t.unit == "ns":
                return True
    return False


def _as_string(col: str, kind: str) -> str:
    """A field as a string (a VARIANT's string, integer or boolean value spelled as DuckDB spells it)."""
    return f"variant_get({_q(col)}, '$', 'string')" if kind == "json" else f"CAST({_q(col)} AS STRING)"


def _mixed_bad(col: str) -> str:
    """The records whose VARIANT key value is not a string, boolean or int64 integer (DuckDB's `_mixed_bad`)."""
    return f"count_if(schema_of_variant({_q(col)}) NOT IN {VARIANT_KEY_TYPES})"


def _timestamp(col: str, kind: str) -> str:
    """The timestamp; nanoseconds since the epoch (a long here) cut to the microsecond below, as DuckDB's."""
    if kind != "ns-time":
        return f"try_cast({_q(col)} AS TIMESTAMP)"
    return f"timestamp_micros(({_q(col)} - pmod({_q(col)}, 1000)) div 1000)"


def _cells_in_batches(job: ScanJob) -> Any:
    """The `mapInArrow` function: each batch's `cells_of_batch` rows summed per (window, slice, unit)."""
    names = agg_schema(job.rubric).names

    def run(batches: Iterator[Any]) -> Iterator[Any]:
        import pyarrow as pa

        for batch in batches:
            if batch.num_rows == 0:
                continue
            cells = pa.Table.from_batches([cells_of_batch(batch, job)])
            summed = cells.group_by(names[:3], use_threads=False).aggregate([(c, "sum") for c in names[3:]])
            summed = summed.rename_columns([n.removesuffix("_sum") for n in summed.column_names])
            yield from summed.select(names).to_batches()
    return run


def _aggregate(spark: Any, job: ScanJob) -> Aggregate:
    from pyspark.sql import functions as F

    errors = _spark_errors()
    m = job.mapping
    restore = _nanos_as_long(spark) if job.format == "parquet" else (lambda: None)
    try:
        logs = _reader(spark, job)
        check_mapped_fields(job, logs.columns)
        kinds = _kinds(logs, job)
        check_field_kinds(job, kinds)
        key = _as_string(m.id, kinds[m.id]) if m.id is not None else f"md5(CAST({_q(m.text)} AS STRING))"
        h = hash_sql(key)
        keep = "TRUE" if job.sample == 1 else f"(pmod({h}, {int(job.sample)}) = 0)"
        ts = _timestamp(m.timestamp, kinds[m.timestamp])
        mixed = [col for _, col in key_fields(m) if kinds[col] == "json"]
        checks = ["count(1)", f"count_if({keep})", f"count_if({keep} AND {_q(m.text)} IS NULL)",
                  f"count_if({keep} AND {ts} IS NULL)",
                  f"count_if({keep} AND {_as_string(m.unit, kinds[m.unit])} IS NULL)" if m.unit else "0",
                  f"count_if({key} IS NULL)" if m.id else "0", *(_mixed_bad(col) for col in mixed)]
        total, sampled, null_text, bad_ts, null_unit, null_ids, *bad = logs.selectExpr(*checks).collect()[0]
        check_key_values(job, null_ids, dict(zip(mixed, bad, strict=True)))
        check_sampled_counts(job, null_text, bad_ts, null_unit)
        sel = [f"CAST({_q(m.text)} AS STRING) AS _text", f"{ts} AS _ts", f"{h} AS _h", f"{key} AS _key"]
        if m.slice is not None:
            sel.append(f"{_as_string(m.slice, kinds[m.slice])} AS _slice")
        sel += [f"{_as_string(g, kinds[g])} AS _g{i}" for i, g in enumerate(m.groups or [])]
        if m.unit is not None:
            sel.append(f"{_as_string(m.unit, kinds[m.unit])} AS _unit")
        base = logs.where(keep).selectExpr(*sel)
        if job.window.kind == "rows":
            base = base.selectExpr("*", "CAST(row_number() OVER (ORDER BY _ts, _key) - 1 AS BIGINT) AS _rank")
        schema = agg_schema(job.rubric)
        ddl = ", ".join(f"`{f.name}` {'string' if f.name in ('window', 'slice', 'unit') else 'bigint'}" for f in schema)
        # mapInArrow hands its function every input column, which Spark cannot prune: the hash (an md5 per
        # record) and the key go only to the examples (`_examples` reads `base`)
        scored = base.select(*[c for c in base.columns if c not in ORDER_ONLY])
        cells = scored.mapInArrow(_cells_in_batches(job), ddl)
        keys = schema.names[:3]
        summed = cells.groupBy(*keys).agg(*[F.sum(c).cast("bigint").alias(c) for c in schema.names[3:]])
        table = _collect_arrow(summed)
        examples = _examples(base, job) if job.examples else []
    except errors as exc:
        raise read_error(RuntimeError(_first_line(exc)), job) from exc  # quoted values elided, as DuckDB's
    finally:
        restore()

    return Aggregate(table=finish(table, job.rubric), rows_read=int(total), rows_sampled=int(sampled), examples=examples)


def _nanos_as_long(spark: Any) -> Any:
    """Let Spark read nanosecond Parquet timestamps (which it otherwise refuses) as longs; the function that
    puts the session's setting back."""
    before = spark.conf.get(NANOS_AS_LONG, None)
    spark.conf.set(NANOS_AS_LONG, "true")

    def restore() -> None:
        if before is None:
            spark.conf.unset(NANOS_AS_LONG)
        else:
            spark.conf.set(NANOS_AS_LONG, before)
    return restore


def _collect_arrow(df: Any) -> Any:
    """A small DataFrame as a pyarrow Table (Spark 4's `toArrow`; the `spark` extra needs PySpark 4 for VARIANT)."""
    return df.toArrow()


def _examples(base: Any, job: ScanJob) -> list[dict[str, str]]:
    """The `job.examples` sampled records with the smallest (hash, key, window, slice, text), as DuckDB picks them.

    The smallest (hash, key) pairs bound the candidates; every record at or below the last one
    (ties included) is scored here and the contract's order decides."""
    import pyarrow as pa
    from pyspark.sql import functions as F

    firsts = base.select("_h", "_key").orderBy("_h", "_key").limit(job.examples).collect()
    if not firsts:
        return []
    h, k = firsts[-1]
    below = base.where((F.col("_h") < h) | ((F.col("_h") == h) & (F.col("_key") <= k)))
    table = _collect_arrow(below)
    batch = pa.Table.from_batches(table.to_batches()).combine_chunks().to_batches()[0]
    return example_rows(batch, cells_of_batch(batch, job), job.examples)


def _spark_errors() -> tuple[type[BaseException], ...]:
    """What a Spark read or query raises for bad input (PySpark's errors and the JVM's, through py4j)."""
    from py4j.protocol import Py4JJavaError
    from pyspark.errors import PySparkException

    return (PySparkException, Py4JJavaError)


def _first_line(exc: BaseException) -> str:
    """The first informative line of a Spark error (the JVM's message, not the Python traceback)."""
    text = str(getattr(exc, "java_exception", None) or exc)
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    return lines[0] if lines else type(exc).__name__
