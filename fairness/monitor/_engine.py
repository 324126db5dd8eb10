"""The engine contract: what every engine (DuckDB, Spark) must return, so results are byte-identical.

An engine reads the log files, keeps the sample, hands each Arrow batch of sampled records to
`cells_of_batch` (shared Python: window label, slice, unit and the scorer) and sums the rows it
returns by (window, slice, unit). It returns an `Aggregate`; every statistic is computed from
`Aggregate.table` by shared code (`_stats`, `_drift`), never by an engine.

The per-cell aggregate table (`agg_schema`), after `finish` (every engine calls it):

| column | type | meaning |
|---|---|---|
| `window` | string, not null | the window label: `YYYY-MM-DD` (day, UTC), `YYYY-Www` (ISO week), `r000000` (row window index, zero-padded to 6) |
| `slice` | string, not null | the group field values joined by `_` in the mapping's order (`(missing)` for a null), or the slice field's value |
| `unit` | string, nullable | the unit id as a string; null in every row when the mapping has no unit |
| `n` | int64 | sampled records in the cell |
| `sum_<column>` | int64 | per score column of the job's rubric (`_score.score_columns(job.rubric)`, catalogue order): the sum of the per-output values |
| `sq_<column>` | int64 | per `count` score column, after all the sums: the sum of squared values (count dispersion without units) |

Rows sorted by (window, slice, unit) with null units first, strings by their UTF-8 bytes.

Sampling rule (both engines, in SQL, before any scoring): a record is kept iff
`int(first 15 hex digits of md5(CAST(id AS string)), 16) % N == 0`; N = 1 keeps every record
and reads no id. `keep(id, N)` is the Python reference the engines are tested against.

Inputs an engine's SQL selects for `cells_of_batch`: `_text` (string), `_ts` (timestamp, UTC),
`_slice` (string) or `_g0`, `_g1` … (the group fields as strings), `_unit`
(string, when the mapping has a unit), `_rank` (int64, 0-based position of the record among the
sampled records ordered by (`_ts`, `_key`) — row windows only), `_key` (string: the id as a
string, or without an id the md5 hex of the text) and `_h` (int64: the sampling hash of `_key`).
`_key` and `_h` order the examples and the row windows only (`ORDER_ONLY`): `cells_of_batch` never
reads them, so an engine leaves them out of the records it scores unless its examples come from them.

Reading values (both engines): a group, slice, unit or id field must hold strings, integers or booleans
(`check_field_kinds`; a float is refused, its text depends on the engine); its string is the JSON
string's content, the integer's decimal digits or `true`/`false`; a CSV file is read as text, every
cell as written (`007` stays `007`), an empty cell null. A JSON field mixing kinds is checked value by
value (`check_key_values`). Nanosecond timestamps are cut to the microsecond below. Every file is read
as its literal path (glob characters in a name are escaped for the engine).

Examples (`ScanJob.examples` = k > 0): the k sampled records smallest in (`_h`, `_key`, window,
slice, text), in that order, as {window, slice, text}.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, Protocol

from fairness._util.errors import FairnessError
from fairness.monitor._mapping import Mapping
from fairness.monitor._score import score_batch, score_columns

if TYPE_CHECKING:
    import pyarrow as pa

    from fairness.score._compiled import Rubric

Format = Literal["jsonl", "parquet", "csv"]
MISSING = "(missing)"
"""The slice part written for a null group value."""
HASH_HEX_DIGITS = 15
"""The sampling hash: the first 15 hex digits of md5 (60 bits, fits a signed int64 in every engine)."""
ORDER_ONLY = ("_h", "_key")
"""The selected columns that only order the examples and the row windows (module docstring)."""


def sample_hash(record_id: str) -> int:
    """The sampling hash of one record id (the Python reference of the engines' SQL)."""
    return int(hashlib.md5(record_id.encode("utf-8")).hexdigest()[:HASH_HEX_DIGITS], 16)


def keep(record_id: str, n: int) -> bool:
    """Whether the 1/`n` sample keeps the record with this id."""
    return sample_hash(record_id) % n == 0


@dataclass(frozen=True)
class WindowSpec:
    """How records are cut into windows: by UTC day, ISO week, or consecutive runs of `rows` sampled records."""

    kind: Literal["day", "week", "rows"]
    rows: int | None = None

    @property
    def label(self) -> str:
        return f"{self.rows} rows" if self.kind == "rows" else self.kind


@dataclass(frozen=True)
class ScanJob:
    """What an engine is asked to do: read `files` (one format), sample 1/`sample`, window, score in `mode`."""

    files: tuple[str, ...]
    format: Format
    mapping: Mapping
    sample: int
    window: WindowSpec
    mode: str
    examples: int = 0
    """How many example records (window, slice, text) to return: the sampled records with the smallest hash."""
    rubric: Rubric | None = None
    """The suite's compiled rubric (its metrics are the score columns); None: the paper's."""


@dataclass(frozen=True)
class Aggregate:
    """An engine's answer: the per-cell aggregate table and the record counts behind the sampling rate."""

    table: pa.Table
    rows_read: int
    """Records in the files."""
    rows_sampled: int
    """Records the sample kept (the sum of `n`)."""
    examples: list[dict[str, str]] = field(default_factory=list)
    """Up to `ScanJob.examples` records as {window, slice, text}, in the order the module docstring gives."""


class Engine(Protocol):
    def aggregate(self, job: ScanJob) -> Aggregate: ...


def agg_schema(rubric: Rubric | None = None) -> pa.Schema:
    """The aggregate table's exact schema for `rubric`'s score columns (see the module docstring)."""
    import pyarrow as pa

    cols = score_columns(rubric)
    fields = [pa.field("window", pa.string(), nullable=False), pa.field("slice", pa.string(), nullable=False),
              pa.field("unit", pa.string()), pa.field("n", pa.int64(), nullable=False)]
    fields += [pa.field(f"sum_{c.name}", pa.int64(), nullable=False) for c in cols]
    fields += [pa.field(f"sq_{c.name}", pa.int64(), nullable=False) for c in cols if c.kind == "count"]
    return pa.schema(fields)


def row_schema(rubric: Rubric | None = None) -> pa.Schema:
    """The schema of `cells_of_batch`'s per-record output (the aggregate's columns, one record each)."""
    return agg_schema(rubric)


def window_labels(batch: pa.RecordBatch, window: WindowSpec) -> pa.Array:
    """Each record's window label (module docstring)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if window.kind == "rows":
        assert window.rows is not None
        idx = pc.divide(batch.column("_rank").cast(pa.int64()), pa.scalar(window.rows, pa.int64()))
        return pa.array([f"r{i:06d}" for i in idx.to_pylist()], pa.string())
    ts = batch.column("_ts")
    if not pa.types.is_timestamp(ts.type):
        raise TypeError(f"`_ts` must be a timestamp column, got {ts.type}")
    ts = ts.cast(pa.timestamp("us", tz="UTC"))
    return pc.strftime(ts, "%Y-%m-%d" if window.kind == "day" else "%G-W%V")


def slice_labels(batch: pa.RecordBatch, mapping: Mapping) -> pa.Array:
    """Each record's slice: the slice field, or the group values joined by `_` (module docstring)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if mapping.slice is not None:
        return pc.fill_null(batch.column("_slice").cast(pa.string()), MISSING)
    parts = [pc.fill_null(batch.column(f"_g{i}").cast(pa.string()), MISSING) for i in range(len(mapping.groups or []))]
    return parts[0] if len(parts) == 1 else pc.binary_join_element_wise(*parts, "_")


def cells_of_batch(batch: pa.RecordBatch, job: ScanJob) -> pa.RecordBatch:
    """One sampled batch → one row per record in the aggregate's schema (n = 1, the record's scores).

    The shared per-batch step every engine runs (DuckDB in-process, Spark in `mapInArrow`)."""
    import numpy as np
    import pyarrow as pa

    texts = batch.column("_text").to_pylist()
    scores = score_batch(texts, job.mode, job.rubric)
    n = len(texts)
    unit = batch.column("_unit").cast(pa.string()) if job.mapping.unit is not None else pa.nulls(n, pa.string())
    arrays: list[Any] = [window_labels(batch, job.window), slice_labels(batch, job.mapping), unit,
                         pa.array(np.ones(n, dtype=np.int64))]
    cols = score_columns(job.rubric)
    arrays += [pa.array(scores[c.name]) for c in cols]
    arrays += [pa.array(scores[c.name] * scores[c.name]) for c in cols if c.kind == "count"]
    return pa.RecordBatch.from_arrays(arrays, schema=row_schema(job.rubric))


def finish(table: pa.Table, rubric: Rubric | None = None) -> pa.Table:
    """An engine's summed table in the contract's exact schema (for `rubric`, the job's) and order (every engine
    calls it last)."""
    import pyarrow as pa

    schema = agg_schema(rubric)
    table = table.select(schema.names)
    table = pa.Table.from_arrays([table.column(f.name).cast(f.type) for f in schema], schema=schema)
    keys = [table.column(k).to_pylist() for k in ("window", "slice", "unit")]
    order = sorted(range(table.num_rows),
                   key=lambda i: (keys[0][i].encode(), keys[1][i].encode(), keys[2][i] is not None, (keys[2][i] or "").encode()))
    return table.take(pa.array(order, pa.int64())).combine_chunks()


def check_mapped_fields(job: ScanJob, fields: list[str]) -> None:
    """Exit 2 naming the first mapped field the logs lack, or an id the job needs but the mapping lacks."""
    m = job.mapping
    for role, col in (("text", m.text), ("timestamp", m.timestamp), ("slice", m.slice), ("unit", m.unit), ("id", m.id),
                      *(("groups", g) for g in m.groups or [])):
        if col is not None and col not in fields:
            raise FairnessError(f"mapping `{role}`: field `{col}` is not in the logs (fields: {', '.join(sorted(fields))})")
    if job.sample > 1 and m.id is None:
        raise FairnessError("mapping `id`: sampling (--sample above 1) needs a record id field")
    if job.window.kind == "rows" and m.id is None:
        raise FairnessError("mapping `id`: row windows need a record id field (records are ordered by time, then id)")


KEY_VALUES = "group, slice, unit and id values must be strings, integers or booleans"
KIND_WORDS = {"float": "floating-point numbers", "fraction": "decimal fractions", "integer": "integers",
              "boolean": "booleans", "time": "dates or times", "ns-time": "dates or times",
              "nested": "nested values (objects, arrays or maps)", "other": "values of another type"}
"""Engine-independent words for a field's kind (an engine maps its own type names to these kinds)."""
KEY_KINDS = ("string", "integer", "boolean", "json")
TIME_KINDS = ("string", "time", "ns-time", "json")


def key_fields(mapping: Mapping) -> list[tuple[str, str]]:
    """(role, field) of every mapped field whose value becomes a label or the sampling key."""
    out = [("groups", g) for g in mapping.groups or []]
    return out + [(role, col) for role, col in (("slice", mapping.slice), ("unit", mapping.unit), ("id", mapping.id))
                  if col is not None]


def check_field_kinds(job: ScanJob, kinds: dict[str, str]) -> None:
    """Exit 2 for a key field that is not text, an integer or a boolean, or a timestamp that is not text or a time.

    `kinds`: each mapped field's kind — `string`, `integer`, `boolean`, `json` (a JSON field mixing kinds, whose
    values `check_key_values` checks), `float`, `fraction`, `time`, `ns-time` (nanosecond timestamps),
    `nested` or `other`. A float's text depends on who spells it (`1.0E10` or `10000000000.0`), so no label
    or sampling key is made from one."""
    for role, col in key_fields(job.mapping):
        if kinds[col] not in KEY_KINDS:
            raise FairnessError(f"mapping `{role}`: field `{col}` holds {KIND_WORDS[kinds[col]]}; {KEY_VALUES} "
                                "(bucket numbers into labels in the logs)")
    ts = job.mapping.timestamp
    if kinds[ts] not in TIME_KINDS:
        raise FairnessError(f"mapping `timestamp`: field `{ts}` holds {KIND_WORDS[kinds[ts]]}; "
                            "it must hold ISO-8601 strings or timestamps")


def check_key_values(job: ScanJob, null_ids: int, mixed: dict[str, int]) -> None:
    """Exit 2 for records without an id (when the mapping has one), or a JSON field that mixes kinds and holds
    floats, objects or arrays (`mixed`: field → such records, over every record read)."""
    for role, col in key_fields(job.mapping):
        if mixed.get(col):
            raise FairnessError(f"mapping `{role}`: field `{col}` holds a floating-point number, an object or an array "
                                f"in {mixed[col]} record(s); {KEY_VALUES}")
    if null_ids:
        raise FairnessError(f"mapping `id`: field `{job.mapping.id}` has no id in {null_ids} record(s) "
                            "(a null, or an empty CSV cell)")


def check_sampled_counts(job: ScanJob, null_text: int, bad_ts: int, null_unit: int) -> None:
    """Exit 2 when sampled records lack a text, a parseable timestamp or (with a unit field) a unit id."""
    m = job.mapping
    for count, role, col, what in ((null_text, "text", m.text, "no text"), (bad_ts, "timestamp", m.timestamp,
                                    "no parseable ISO-8601 timestamp"), (null_unit, "unit", m.unit, "no unit id")):
        if count:
            raise FairnessError(f"mapping `{role}`: field `{col}` has {what} in {count} sampled record(s)")


def example_rows(batch: pa.RecordBatch, cells: pa.RecordBatch, limit: int,
                 best: list[tuple[int, str, str, str, str]] | None = None) -> list[dict[str, str]]:
    """The `limit` records with the smallest (hash, key, window, slice, text) of `batch` and `best`, as examples.

    `best` (when given) is updated in place with those records, so an engine can fold batches."""
    import heapq

    cols = [batch.column(c).to_pylist() for c in ("_h", "_key")]
    cols += [cells.column(c).to_pylist() for c in ("window", "slice")] + [batch.column("_text").to_pylist()]
    kept = sorted([*(best or []), *heapq.nsmallest(limit, zip(*cols, strict=True))])[:limit]
    if best is not None:
        best[:] = kept
    return [{"window": w, "slice": s, "text": t} for _, _, w, s, t in kept]
