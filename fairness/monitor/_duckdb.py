"""The default engine: embedded DuckDB reads the files, samples in SQL, streams Arrow batches to the scorer.

Two scans of the files: one counts the records and checks the mapped fields (a missing column
or a null text, unit or timestamp is exit 2 naming the field); the second streams the sampled
records as Arrow batches through `cells_of_batch`, whose rows a second in-process DuckDB
connection sums by (window, slice, unit). Nothing but the aggregate (and, when asked, the
examples) leaves the engine.
"""

from __future__ import annotations

from typing import Any

from fairness._util.errors import FairnessError
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

BATCH_ROWS = 16_384
"""Rows per Arrow batch: at 65,536 (~40 MB of texts a batch) the process tree passed 1 GiB on 10,000,000 rows."""


def _arrow_reader(rel: Any) -> Any:
    """A streaming pyarrow RecordBatchReader over a relation (`to_arrow_reader` in DuckDB 2, `fetch_record_batch` in 1.x)."""
    method = getattr(rel, "to_arrow_reader", None) or rel.fetch_record_batch
    return method(BATCH_ROWS)


def _q(name: str) -> str:
    """A quoted SQL identifier."""
    return '"' + name.replace('"', '""') + '"'


def _lit(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def literal_path(path: str) -> str:
    """A file path DuckDB reads as exactly that file: its glob characters `[`, `*`, `?` each as a one-character class."""
    return "".join(f"[{ch}]" if ch in "[*?" else ch for ch in path)


def _reader(job: ScanJob) -> str:
    files = "[" + ", ".join(_lit(literal_path(f)) for f in job.files) + "]"
    if job.format == "jsonl":
        return f"read_json({files}, format='newline_delimited', union_by_name=true)"
    if job.format == "parquet":
        return f"read_parquet({files}, union_by_name=true)"
    return f"read_csv({files}, header=true, union_by_name=true, all_varchar=true)"  # every cell as written


INTEGERS = {"TINYINT", "SMALLINT", "INTEGER", "BIGINT", "HUGEINT", "UTINYINT", "USMALLINT", "UINTEGER", "UBIGINT",
            "UHUGEINT"}
JSON_KEY_TYPES = "('VARCHAR', 'BOOLEAN', 'NULL', 'BIGINT', 'UBIGINT')"
"""The JSON value types a key field may mix (an unsigned one only within BIGINT, as Spark reads it)."""


def kind_of(duck_type: str) -> str:
    """A DuckDB type's kind (`_engine.check_field_kinds`)."""
    t = duck_type.upper()
    if t in ("VARCHAR", "JSON", "BOOLEAN"):
        return {"VARCHAR": "string", "JSON": "json", "BOOLEAN": "boolean"}[t]
    if t in INTEGERS:
        return "integer"
    if t.startswith("DECIMAL"):
        return "integer" if t.replace(" ", "").endswith(",0)") else "fraction"
    if t in ("FLOAT", "DOUBLE", "REAL"):
        return "float"
    if t.endswith("_NS"):
        return "ns-time"
    if t.startswith(("TIMESTAMP", "DATE", "TIME")):
        return "time"
    return "nested" if t.startswith(("STRUCT", "MAP", "UNION")) or t.endswith("]") else "other"


def _as_string(col: str, types: dict[str, str]) -> str:
    """A field as VARCHAR (a JSON-typed field, mixed strings and numbers, unwrapped rather than quoted)."""
    return f"({_q(col)} ->> '$')" if types[col] == "JSON" else f"CAST({_q(col)} AS VARCHAR)"


def _mixed_bad(col: str) -> str:
    """The records whose value in a JSON-typed (mixed) key field is not a string, boolean or int64 integer."""
    q = _q(col)
    return (f"count(*) FILTER (WHERE json_type({q}) NOT IN {JSON_KEY_TYPES} "
            f"OR (json_type({q}) = 'UBIGINT' AND TRY_CAST({q} ->> '$' AS BIGINT) IS NULL))")


def _timestamp(col: str, kind: str) -> str:
    """The timestamp as TIMESTAMPTZ; nanoseconds cut to the microsecond below (DuckDB's cast would round up)."""
    if kind != "ns-time":
        return f"TRY_CAST({_q(col)} AS TIMESTAMPTZ)"
    ns = f"epoch_ns({_q(col)})"
    return f"CAST(make_timestamp(({ns} - (({ns} % 1000) + 1000) % 1000) // 1000) AS TIMESTAMPTZ)"


def hash_sql(key: str) -> str:
    """The sampling hash of a VARCHAR expression (the contract's rule, DuckDB dialect)."""
    return f"CAST(('0x' || substr(md5({key}), 1, {HASH_HEX_DIGITS})) AS BIGINT)"


def require_duckdb() -> Any:
    """The duckdb module (pyarrow, which carries its batches, imported too), or one line naming the extra."""
    try:
        import duckdb
        import pyarrow  # noqa: F401
    except ImportError:
        raise FairnessError("the DuckDB engine needs the `monitor` extra: pip install 'llm-fairness-check[monitor]'") from None
    return duckdb


class DuckDBEngine:
    """`Engine` over embedded DuckDB (`threads` worker threads, `memory_limit` e.g. `2GB`)."""

    def __init__(self, threads: int | None = None, memory_limit: str | None = None):
        self.threads = threads
        self.memory_limit = memory_limit

    def _connect(self) -> Any:
        con = require_duckdb().connect(":memory:")
        con.execute("SET TimeZone = 'UTC'")
        if self.threads:
            con.execute(f"SET threads = {int(self.threads)}")
        if self.memory_limit:
            con.execute(f"SET memory_limit = {_lit(self.memory_limit)}")
        return con

    def aggregate(self, job: ScanJob) -> Aggregate:
        import duckdb
        import pyarrow as pa

        con = self._connect()
        src = _reader(job)
        try:
            types = {r[0]: r[1] for r in con.execute(f"DESCRIBE SELECT * FROM {src}").fetchall()}
        except duckdb.Error as exc:
            raise read_error(exc, job) from None
        m = job.mapping
        check_mapped_fields(job, list(types))
        kinds = {f: kind_of(types[f]) for f in m.fields()}
        check_field_kinds(job, kinds)
        # the examples' order (and, with an id, the sample and row-window ties): the id, else the text's md5
        key = _as_string(m.id, types) if m.id is not None else f"md5(CAST({_q(m.text)} AS VARCHAR))"
        h = hash_sql(key)
        keep = "TRUE" if job.sample == 1 else f"({h} % {int(job.sample)} = 0)"
        ts = _timestamp(m.timestamp, kinds[m.timestamp])
        sel = [f"CAST({_q(m.text)} AS VARCHAR) AS _text", f"{ts} AS _ts", f"{h} AS _h", f"{key} AS _key"]
        if m.slice is not None:
            sel.append(f"{_as_string(m.slice, types)} AS _slice")
        sel += [f"{_as_string(g, types)} AS _g{i}" for i, g in enumerate(m.groups or [])]
        if m.unit is not None:
            sel.append(f"{_as_string(m.unit, types)} AS _unit")
        base = f"SELECT {', '.join(sel)} FROM {src} WHERE {keep}"
        checks = ["count(*)", f"count(*) FILTER (WHERE {keep})",
                  f"count(*) FILTER (WHERE {keep} AND {_q(m.text)} IS NULL)",
                  f"count(*) FILTER (WHERE {keep} AND {ts} IS NULL)"]
        checks.append(f"count(*) FILTER (WHERE {keep} AND {_as_string(m.unit, types)} IS NULL)" if m.unit else "0")
        checks.append(f"count(*) FILTER (WHERE {key} IS NULL)" if m.id else "0")
        mixed = [col for _, col in key_fields(m) if kinds[col] == "json"]
        checks += [_mixed_bad(col) for col in mixed]
        try:
            total, sampled, null_text, bad_ts, null_unit, null_ids, *bad = \
                con.execute(f"SELECT {', '.join(checks)} FROM {src}").fetchall()[0]
        except duckdb.Error as exc:
            raise read_error(exc, job) from None
        check_key_values(job, null_ids, dict(zip(mixed, bad, strict=True)))
        check_sampled_counts(job, null_text, bad_ts, null_unit)
        if job.window.kind == "rows":
            base = f"SELECT *, row_number() OVER (ORDER BY _ts, _key) - 1 AS _rank FROM ({base})"
        if not job.examples:  # the hash and key only order the examples: unread, they are never computed
            base = f"SELECT * EXCLUDE ({', '.join(ORDER_ONLY)}) FROM ({base})"
        reader = _arrow_reader(con.sql(base))
        best: list[tuple[int, str, str, str, str]] = []

        def scored():
            for batch in reader:
                if batch.num_rows == 0:
                    continue
                cells = cells_of_batch(batch, job)
                if job.examples:
                    example_rows(batch, cells, job.examples, best)
                yield cells

        agg = self._connect()
        agg.execute("SET threads = 1")  # fed by one Python stream: more threads only add hash tables (memory)
        stream = pa.RecordBatchReader.from_batches(agg_schema(job.rubric), scored())
        agg.register("cells", stream)
        sums = ", ".join(f"CAST(sum({_q(c)}) AS BIGINT) AS {_q(c)}" for c in agg_schema(job.rubric).names[3:])
        keys = '"window", "slice", "unit"'
        table = _arrow_reader(agg.sql(f"SELECT {keys}, {sums} FROM cells GROUP BY {keys}")).read_all()
        examples = [{"window": w, "slice": s, "text": t} for _, _, w, s, t in best]
        return Aggregate(table=finish(table, job.rubric), rows_read=int(total), rows_sampled=int(sampled), examples=examples)


def read_error(exc: Exception, job: ScanJob) -> FairnessError:
    """DuckDB's first line about a file it cannot read, with every quoted value but a file's path elided:
    a conversion error quotes the record, and stderr (a CI log) must not carry log text either."""
    import re

    files = set(job.files) | {literal_path(f) for f in job.files}
    line = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    line = re.sub(r"'[^']*'|\"[^\"]*\"", lambda q: q.group(0) if q.group(0)[1:-1] in files else "'…'", line)
    return FairnessError(f"cannot read the logs as {job.format}: {line}")
