"""Streamed replay: read → score → per-cell aggregates, a chunk of rows at a time.

The audit needs only per-cell sums and counts (`fairness.audit._cells`), so the grid's
cases and the recorded outputs are walked side by side, scored and folded into a
`CellAccumulator` in chunks, and each chunk's transcript lines are handed on as they are
made; no per-row object outlives its chunk, so memory stays flat as the grid grows.

Walking side by side needs the records in grid order (as `generate` and `recordings
merge` write them). Any other layout — reordered, missing, extra or foreign rows — raises
`NotStreamable`, and the caller replays in memory instead, which reports such problems
with its usual messages; a streamed run's results equal an in-memory run's.
"""

from __future__ import annotations

import itertools
import operator
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from fairness._util.errors import FairnessError
from fairness.audit._audit import AuditOptions, empty_outputs, histogram_metrics, placeholder_columns, slice_order_of
from fairness.audit._cells import CellAccumulator, CellTable
from fairness.audit._metrics import Design, metric_matrix
from fairness.recordings._store import ContentKeys, GridHash, Manifest, iter_record_blocks
from fairness.score._rubric import ScoreTable
from fairness.suite._runs import SeedRun
from fairness.suite._suite import Suite, distinct_row_ids, iter_seed_runs

CHUNK = 2_048
"""Rows per chunk (whole seed runs of at most this many rows, so fewer than twice as many):
few enough that a chunk's records, outputs and scoring corpus stay in the processor's caches
(about 1.3 MB of outputs). 10,000 cost about 5% more CPU and twice the memory."""


_ROW_ID, _KEY, _OUTPUT = operator.itemgetter("row_id"), operator.itemgetter("key"), operator.itemgetter("output")


class NotStreamable(Exception):
    """The records are not the grid's rows in grid order; replay in memory instead."""


class _Records:
    """The records of a set's data files, taken a grid chunk at a time from blocks of field dicts."""

    def __init__(self, directory: Path, manifest: Manifest) -> None:
        self._blocks = (block for f in manifest.files for block in iter_record_blocks(directory / f.path))
        self._pending: list[dict[str, Any]] = []

    def take(self, n: int) -> tuple[list[dict[str, Any]], FairnessError | None]:
        """The next `n` records (fewer where the files end) and the error of a bad line met
        before `n` were read (raised by the caller only if the records before it are in order)."""
        recs, error = self._pending, None
        while len(recs) < n:
            try:
                block = next(self._blocks, None)
            except FairnessError as exc:
                error = exc
                break
            if block is None:
                break
            recs += block
        self._pending = recs[n:]
        return recs[:n], error

    def more(self) -> bool:
        """Whether any record is left (a bad line left raises its error)."""
        return bool(self._pending) or any(self._blocks)


def _take_runs(runs: Iterator[SeedRun], rows: int) -> list[SeedRun]:
    """The next runs, enough of them to hold at least `rows` rows (fewer where the grid ends)."""
    block: list[SeedRun] = []
    total = 0
    while total < rows and (run := next(runs, None)) is not None:
        block.append(run)
        total += len(run.seeds)
    return block


def stream_cells(
    suite: Suite,
    directory: Path,
    manifest: Manifest,
    options: AuditOptions,
    on_chunk: Callable[[list[SeedRun], list[dict[str, Any]], ScoreTable], object],
    chunk: int = CHUNK,
) -> tuple[Design, CellTable, str]:
    """Score the recorded rows of `suite`'s grid chunk by chunk; return the design levels, the
    per-cell table and the grid's hash (`grid_hash`, made on the way: the grid is walked once).
    `on_chunk` gets each chunk's seed runs, their rows' records (dicts of `Recording`'s fields)
    and scores. The manifest must already be read and its files verified."""
    if manifest.suite != suite.name or manifest.system_prompt != suite.system_prompt:
        raise NotStreamable  # the in-memory replay words these errors
    distinct_row_ids(suite)
    rubric = suite.compiled_rubric
    specs = list(rubric.metrics.values())
    mode = options.scorer_mode or suite.scorer.mode
    acc = CellAccumulator(slice_order_of(suite), placeholder_columns(suite), len(specs), histogram_metrics(options, specs))
    records = _Records(directory, manifest)
    runs = iter_seed_runs(suite, max_seeds=chunk)  # a prompt's rows at a time; none outlives its chunk
    key_of = ContentKeys(manifest.model.id, manifest.system_prompt)
    grid = GridHash()
    while block := _take_runs(runs, chunk):
        row_ids = list(itertools.chain.from_iterable(r.row_ids for r in block))
        recs, error = records.take(len(row_ids))
        n = len(recs)
        if list(map(_ROW_ID, recs)) != row_ids[:n] or list(map(_KEY, recs)) != key_of.of_runs(block)[:n]:
            raise NotStreamable  # an out-of-order row stops the stream before a later bad line raises
        if error is not None:
            raise error
        if n < len(row_ids):
            raise NotStreamable
        grid.update(block)
        outputs = list(map(_OUTPUT, recs))
        scores = rubric.score(outputs, mode)
        acc.add(block, metric_matrix(scores, specs), empty_outputs(outputs))
        on_chunk(block, recs, scores)
    if acc.n_rows == 0 or records.more():
        raise NotStreamable
    return (*acc.finish(), grid.hexdigest(suite.system_prompt))
