"""Per-cell aggregates: the sufficient statistics of every metric, test and interval.

Every scope (overall, a family, a regime, an occupation, their crossings) is a union of
template cells, the bootstrap resamples whole cells, and the permutation test relabels
slices within a cell. So nothing downstream needs the rows themselves: per (cell, slice)
row counts, metric sums and sums of squares are enough for slice means, pooled means,
the cluster bootstrap and the design effect; the permutation null of a discrete metric
needs only how often each value occurs per (cell, slice). Memory is O(cells × slices ×
metrics), independent of the number of rows, and the table is built incrementally from
chunks of rows (`CellTable.add`), so rows never have to be held at once.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from fairness._util.arrays import unique
from fairness.audit._metrics import Design, Factor, Scope, SliceTable, scope_masks
from fairness.suite._runs import SeedRun

MAX_LEVELS = 256
"""A metric with more distinct values than this keeps no value histogram (no permutation test)."""


@dataclass
class CellTable:
    """Sufficient statistics per template cell (c) × slice (s) × metric (m).

    Data structure (all float64 unless noted; C cells in the design's cluster order, S
    slices in the design's slice order, M metrics in the order the table was built with):

    - `n` (C × S): rows per cell and slice;
    - `sums` (C × S × M): per-cell, per-slice metric sums (slice mean = Σ_c sums / Σ_c n);
    - `sumsq` (C × S × M): per-cell, per-slice sums of squares (within-cell variances,
      design effects: var = sumsq/n − (sums/n)²);
    - `hist[m]` = (`levels` (V,), `counts` (C × S × V) int64): how often each distinct
      value of metric m occurs, for the metrics named in `histogram_metrics` (the
      within-cell permutation null of a discrete metric is a function of these alone);
    - `cell_codes[factor]` (C,) int64: the level code of every cell-level factor
      (family, regime, each placeholder column, paraphrase), so a scope maps to a cell mask;
    - `seed_n` (L,), `seed_sums` (L × M): per seed level (seeds vary within a cell), for
      the variance decomposition;
    - `n_empty` (S,): rows per slice with an empty or whitespace-only output.
    """

    n_cells: int
    n_slices: int
    n_metrics: int
    n: np.ndarray
    sums: np.ndarray
    sumsq: np.ndarray
    cell_codes: dict[str, np.ndarray]
    seed_n: np.ndarray
    seed_sums: np.ndarray
    histogram_metrics: tuple[int, ...] = ()
    hist: dict[int, tuple[np.ndarray, np.ndarray]] = field(default_factory=dict)
    n_empty: np.ndarray = field(default_factory=lambda: np.zeros(0))
    """(S,) rows per slice whose output is empty or whitespace (the gate's empty-output check)."""

    @classmethod
    def empty(cls, design: Design, n_metrics: int, histogram_metrics: tuple[int, ...] = ()) -> CellTable:
        C, S = design.n_clusters, len(design.slices)
        n_seeds = len(design.factors["seed"].levels)
        first = np.zeros(C, dtype=np.int64)
        # the first row of each cell carries its cell-level factor codes
        first[design.cluster[::-1]] = np.arange(design.n - 1, -1, -1)
        codes = {name: f.codes[first] for name, f in design.factors.items() if name != "seed"}
        return cls(
            n_cells=C, n_slices=S, n_metrics=n_metrics,
            n=np.zeros((C, S)), sums=np.zeros((C, S, n_metrics)), sumsq=np.zeros((C, S, n_metrics)),
            cell_codes=codes, seed_n=np.zeros(n_seeds), seed_sums=np.zeros((n_seeds, n_metrics)),
            histogram_metrics=tuple(histogram_metrics), n_empty=np.zeros(S),
        )

    def grow(self, n_cells: int, n_seeds: int) -> None:
        """Make room for at least `n_cells` cells and `n_seeds` seed levels (streamed grids)."""
        C, M = self.n_cells, self.n_metrics
        if n_cells > C:
            extra = n_cells - C

            def pad(a: np.ndarray) -> np.ndarray:
                return np.concatenate([a, np.zeros((extra, *a.shape[1:]), dtype=a.dtype)])

            self.n, self.sums, self.sumsq = pad(self.n), pad(self.sums), pad(self.sumsq)
            self.cell_codes = {k: pad(v) for k, v in self.cell_codes.items()}
            self.hist = {m: (lv, pad(cnt)) for m, (lv, cnt) in self.hist.items()}
            self.n_cells = n_cells
        if n_seeds > len(self.seed_n):
            extra = n_seeds - len(self.seed_n)
            self.seed_n = np.concatenate([self.seed_n, np.zeros(extra)])
            self.seed_sums = np.concatenate([self.seed_sums, np.zeros((extra, M))])

    def trim(self, n_cells: int, n_seeds: int) -> None:
        """Drop unused capacity (after streaming)."""
        self.n, self.sums, self.sumsq = self.n[:n_cells], self.sums[:n_cells], self.sumsq[:n_cells]
        self.cell_codes = {k: v[:n_cells] for k, v in self.cell_codes.items()}
        self.hist = {m: (lv, cnt[:n_cells]) for m, (lv, cnt) in self.hist.items()}
        self.seed_n, self.seed_sums = self.seed_n[:n_seeds], self.seed_sums[:n_seeds]
        self.n_cells = n_cells

    def add(self, cluster: np.ndarray, slice_codes: np.ndarray, seed_codes: np.ndarray, Y: np.ndarray,
            empty: np.ndarray | None = None) -> None:
        """Fold one chunk of rows (their cell, slice and seed codes, metric values and which
        outputs are empty) in."""
        C, S, M = self.n_cells, self.n_slices, self.n_metrics
        if empty is not None:
            self.n_empty += np.bincount(slice_codes, weights=empty.astype(np.float64), minlength=S)
        key = cluster * S + slice_codes
        self.n += np.bincount(key, minlength=C * S).reshape(C, S)
        for m in range(M):
            y = Y[:, m]
            self.sums[:, :, m] += np.bincount(key, weights=y, minlength=C * S).reshape(C, S)
            self.sumsq[:, :, m] += np.bincount(key, weights=y * y, minlength=C * S).reshape(C, S)
            self.seed_sums[:, m] += np.bincount(seed_codes, weights=y, minlength=len(self.seed_n))
        self.seed_n += np.bincount(seed_codes, minlength=len(self.seed_n))
        for m in self.histogram_metrics:
            self._add_histogram(m, key, Y[:, m])

    def _add_histogram(self, m: int, key: np.ndarray, y: np.ndarray) -> None:
        if m in self.hist and self.hist[m][0].size == 0:
            return  # gave up: too many distinct values
        old_levels, old_counts = self.hist.get(m, (np.zeros(0), np.zeros((self.n_cells, self.n_slices, 0), dtype=np.int64)))
        levels = unique(np.concatenate([old_levels, unique(y)]))  # np.union1d
        if levels.size > MAX_LEVELS:
            self.hist[m] = (np.zeros(0), np.zeros((self.n_cells, self.n_slices, 0), dtype=np.int64))
            return
        if levels.size == old_levels.size and old_counts.shape[0] == self.n_cells:
            counts = old_counts  # no new value (the usual chunk): count into the table in place
        else:
            counts = np.zeros((self.n_cells, self.n_slices, levels.size), dtype=np.int64)
            counts[:, :, np.searchsorted(levels, old_levels)] = old_counts
        V = levels.size
        flat = np.bincount(key * V + np.searchsorted(levels, y), minlength=self.n_cells * self.n_slices * V)
        counts += flat.reshape(self.n_cells, self.n_slices, V)
        self.hist[m] = (levels, counts)

    def histogram(self, m: int) -> tuple[np.ndarray, np.ndarray] | None:
        """(levels, counts C × S × V) of metric m, or None when it keeps none."""
        h = self.hist.get(m)
        return None if h is None or h[0].size == 0 else h

    @property
    def n_rows(self) -> int:
        return int(self.n.sum())


def build_cells(design: Design, Y: np.ndarray, histogram_metrics: tuple[int, ...] = (), chunk: int = 10_000,
                empty: np.ndarray | None = None) -> CellTable:
    """Aggregate a (rows × metrics) matrix (and which outputs are empty) into a `CellTable`,
    `chunk` rows at a time."""
    table = CellTable.empty(design, Y.shape[1], histogram_metrics)
    seed = design.factors["seed"].codes
    for start in range(0, design.n, chunk):
        sl = slice(start, start + chunk)
        table.add(design.cluster[sl], design.slice_codes[sl], seed[sl], Y[sl], None if empty is None else empty[sl])
    return table


def slice_table_cells(table: CellTable, scope: Scope, cells: np.ndarray) -> SliceTable:
    """The scope's per-slice row counts and sums, from the cells it spans."""
    return SliceTable(scope, table.n[cells].sum(axis=0), table.sums[cells].sum(axis=0))


def variance_shares_cells(design: Design, table: CellTable, m: int) -> dict[str, float]:
    """Variance shares from the aggregates: main-effect sums of squares per grid factor.

    The share of the total sum of squares explained by each factor's level means (the grid is
    balanced, so main effects are orthogonal and add; paraphrase net of family), computed
    from per-level counts and sums, and the total from Σy² − (Σy)²/n.
    """
    n_all = table.n.sum()
    if n_all == 0:
        return {}
    s_all = table.sums[:, :, m].sum()
    grand = s_all / n_all
    total = float(table.sumsq[:, :, m].sum() - s_all * grand)
    if total <= 1e-9 * max(float(table.sumsq[:, :, m].sum()), 1.0):
        return {}

    def ss(cnt: np.ndarray, sums: np.ndarray) -> float:
        ok = cnt > 0
        return float((cnt[ok] * (sums[ok] / cnt[ok] - grand) ** 2).sum())

    def by_cell_factor(name: str) -> float:
        codes = table.cell_codes[name]
        L = len(design.factors[name].levels)
        cnt = np.bincount(codes, weights=table.n.sum(axis=1), minlength=L)
        sums = np.bincount(codes, weights=table.sums[:, :, m].sum(axis=1), minlength=L)
        return ss(cnt, sums)

    shares: dict[str, float] = {"slice": ss(table.n.sum(axis=0), table.sums[:, :, m].sum(axis=0))}
    for name in design.factors:
        shares[name] = ss(table.seed_n, table.seed_sums[:, m]) if name == "seed" else by_cell_factor(name)
    if "paraphrase" in shares and "family" in shares:
        shares["paraphrase"] = max(shares["paraphrase"] - shares["family"], 0.0)
    explained = sum(shares.values())
    shares["residual"] = max(total - explained, 0.0)
    return {k: v / total for k, v in shares.items()}


class CellAccumulator:
    """Builds the `Design` levels and the `CellTable` from chunks of (seed runs, metric rows).

    Level codes are given in order of first appearance, exactly as `build_design` gives
    them, so a streamed audit equals the in-memory one; only per-cell and per-level state is
    kept (no per-row arrays), so memory does not grow with the rows.
    """

    def __init__(
        self, slice_order: Sequence[str], placeholder_columns: dict[str, str], n_metrics: int,
        histogram_metrics: tuple[int, ...] = (),
    ):
        self.slices = list(slice_order)
        self._slice_code = {s: i for i, s in enumerate(self.slices)}
        self.columns = dict(placeholder_columns)
        self._levels: dict[str, dict[str, int]] = {n: {} for n in ("family", "regime", *self.columns.values(), "paraphrase", "seed")}
        self._cells: dict[tuple, int] = {}
        self._seed_cache: dict[tuple, np.ndarray] = {}
        empty = Design([], self.slices, np.zeros(0, dtype=np.int64), {}, np.zeros(0, dtype=np.int64), 0, ())
        self.table = CellTable.empty(_with_seed(empty), n_metrics, histogram_metrics)
        self.table.cell_codes = {n: np.zeros(0, dtype=np.int64) for n in self._levels if n != "seed"}
        self.n_rows = 0

    @staticmethod
    def _code(levels: dict[str, int], value: str) -> int:
        code = levels.get(value)
        if code is None:
            code = levels[value] = len(levels)
        return code

    def add(self, runs: Sequence[SeedRun], Y: np.ndarray, empty: np.ndarray | None = None) -> None:
        """Fold a chunk in: the rows of `runs`, with their metric values and which outputs are
        empty. A run's rows share their cell and slice, so both are coded once per run; its
        seeds once per distinct tuple of seeds."""
        cluster = [self._cell(r) for r in runs]
        slice_codes = [self._slice_code[r.slice_id] for r in runs]
        seed_codes = [self._seed_codes(r.seeds) for r in runs]
        if len(self._levels["seed"]) > len(self.table.seed_n):
            self.table.grow(0, max(2 * len(self.table.seed_n), len(self._levels["seed"])))
        n = np.array([len(r.seeds) for r in runs], dtype=np.int64)
        seeds = np.concatenate(seed_codes) if seed_codes else np.zeros(0, dtype=np.int64)
        self.table.add(np.repeat(np.array(cluster, dtype=np.int64), n), np.repeat(np.array(slice_codes, dtype=np.int64), n),
                       seeds, Y, empty)
        self.n_rows += int(n.sum())

    def _seed_codes(self, seeds: Sequence[int]) -> np.ndarray:
        """The seed level codes of a run's seeds (levels in order of first appearance)."""
        key = tuple(seeds)
        codes = self._seed_cache.get(key)
        if codes is None:
            levels = self._levels["seed"]
            codes = self._seed_cache[key] = np.array([self._code(levels, str(x)) for x in key], dtype=np.int64)
        return codes

    def _cell(self, c: SeedRun) -> int:
        """The cell of run `c` (a new one, its factor levels coded, on first sight)."""
        key = (c.family, c.paraphrase_id, tuple(sorted(c.placeholders.items())), c.regime)
        cell = self._cells.get(key)
        if cell is None:
            lv = self._levels
            cell = self._cells[key] = len(self._cells)
            codes = {"family": self._code(lv["family"], c.family), "regime": self._code(lv["regime"], c.regime),
                     "paraphrase": self._code(lv["paraphrase"], f"{c.family}.{c.paraphrase_id}")}
            for ph, col in self.columns.items():
                codes[col] = self._code(lv[col], c.placeholders[ph])
            if cell >= self.table.n_cells:
                self.table.grow(max(2 * self.table.n_cells, 64), 0)
            for name, code in codes.items():
                self.table.cell_codes[name][cell] = code
        return cell

    def finish(self) -> tuple[Design, CellTable]:
        """The design (levels, no per-row arrays: `design.n` is 0) and the trimmed table."""
        self.table.trim(len(self._cells), len(self._levels["seed"]))
        none = np.zeros(0, dtype=np.int64)
        factors = {name: Factor(name, list(levels), none) for name, levels in self._levels.items()}
        design = Design(
            row_ids=[], slices=self.slices, slice_codes=none, factors=factors, cluster=none,
            n_clusters=len(self._cells), scope_factors=("family", "regime", *self.columns.values()),
        )
        return design, self.table


def _with_seed(design: Design) -> Design:
    """`design` with an empty seed factor (so an empty table can be allocated)."""
    factors = {**design.factors, "seed": Factor("seed", [], np.zeros(0, dtype=np.int64))}
    return Design(design.row_ids, design.slices, design.slice_codes, factors, design.cluster, 0, design.scope_factors)


def cell_scopes(design: Design, table: CellTable, max_depth: int | None = None) -> list[Scope]:
    """The scopes (`fairness.audit._metrics.scope_masks`) over the table's cells: each
    `Scope.mask` is a mask over the cells (scopes are unions of cells)."""
    return scope_masks(design, table.n.sum(axis=1) > 0, table.cell_codes, max_depth)
