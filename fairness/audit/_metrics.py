"""Metrics: per-slice rates and mean counts in every scope, worst slice, max−min gap.

Everything is computed once, up front, from a `Design` (the grid coordinates of each
scored output) and the score columns; the results are plain tables that later stages
(stats, gate, report) look values up in.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from typing import NamedTuple

import numpy as np

from fairness.score._catalog import MetricSpec
from fairness.score._rubric import ScoreTable
from fairness.suite._case import Case


class Factor(NamedTuple):
    """A categorical grid coordinate: its level names and each row's level index."""

    name: str
    levels: list[str]
    codes: np.ndarray


class Design(NamedTuple):
    """Grid coordinates of each scored row, encoded as integer codes."""

    row_ids: list[str]
    slices: list[str]
    slice_codes: np.ndarray
    factors: dict[str, Factor]
    """`family`, `regime`, each placeholder column (e.g. `occupation`), `paraphrase`, `seed`."""
    cluster: np.ndarray
    """Template cell (family, paraphrase, placeholders, regime): all slices and seeds of one
    prompt template. The unit of resampling: seeds of one prompt are not independent, and
    resampling whole cells keeps the slices paired."""
    n_clusters: int
    scope_factors: tuple[str, ...]
    """Factors that define report scopes (family, regime, placeholder columns)."""

    @property
    def n(self) -> int:
        return len(self.row_ids)


def _encode(values: Sequence[str], order: Sequence[str] | None = None) -> tuple[list[str], np.ndarray]:
    levels = list(order) if order is not None else list(dict.fromkeys(values))
    lookup = {v: i for i, v in enumerate(levels)}
    return levels, np.fromiter((lookup[v] for v in values), dtype=np.int64, count=len(values))


def build_design(cases: Sequence[Case], slice_order: Sequence[str], placeholder_columns: dict[str, str]) -> Design:
    """Encode the cases' coordinates; `placeholder_columns` maps placeholder → column name."""
    factors: dict[str, Factor] = {}

    def add(name: str, values: list[str], order=None) -> None:
        levels, codes = _encode(values, order)
        factors[name] = Factor(name, levels, codes)

    add("family", [c.family for c in cases])
    add("regime", [c.regime for c in cases])
    for ph, col in placeholder_columns.items():
        add(col, [c.placeholders[ph] for c in cases])
    add("paraphrase", [f"{c.family}.{c.paraphrase_id}" for c in cases])
    add("seed", [str(c.seed) for c in cases])
    slices, slice_codes = _encode([c.slice_id for c in cases], slice_order)
    cell_keys = [(c.family, c.paraphrase_id, tuple(sorted(c.placeholders.items())), c.regime) for c in cases]
    _, cluster = _encode(cell_keys)  # type: ignore[arg-type]
    return Design(
        row_ids=[c.row_id for c in cases],
        slices=slices,
        slice_codes=slice_codes,
        factors=factors,
        cluster=cluster,
        n_clusters=int(cluster.max()) + 1 if len(cluster) else 0,
        scope_factors=("family", "regime", *placeholder_columns.values()),
    )


class Scope(NamedTuple):
    """A subset of the grid: `overall`, `family=F1`, `family=F1,regime=low-entropy` …"""

    name: str
    conditions: tuple[tuple[str, str], ...]
    mask: np.ndarray

    @property
    def depth(self) -> int:
        return len(self.conditions)


def scope_masks(
    design: Design, base: np.ndarray, codes: Mapping[str, np.ndarray], max_depth: int | None = None
) -> list[Scope]:
    """Every combination of scope factors (overall, each factor, each pair, … up to `max_depth`) as
    masks over whatever units `base` and `codes` index (rows, or template cells in
    `fairness.audit._cells`): `base` marks the units that count,
    `codes[factor]` gives each unit's level; a scope with no unit left out of `base` is skipped."""
    out = [Scope("overall", (), base)]
    names = design.scope_factors
    depth = len(names) if max_depth is None else max_depth
    for k in range(1, depth + 1):
        for combo in itertools.combinations(names, k):
            fs = [design.factors[f] for f in combo]
            for levels in itertools.product(*(range(len(f.levels)) for f in fs)):
                mask = base.copy()
                for f, lv in zip(fs, levels, strict=True):
                    mask &= codes[f.name] == lv
                if not mask.any():
                    continue
                cond = tuple((f.name, f.levels[lv]) for f, lv in zip(fs, levels, strict=True))
                out.append(Scope(",".join(f"{a}={b}" for a, b in cond), cond, mask))
    return out


def metric_matrix(scores: ScoreTable, metrics: Sequence[MetricSpec]) -> np.ndarray:
    """(rows × metrics) float matrix of the per-output values each metric averages."""
    return np.column_stack([scores.columns[m.column].astype(np.float64) for m in metrics])


class SliceTable(NamedTuple):
    """Per-slice values of every metric in one scope."""

    scope: Scope
    n: np.ndarray
    """Rows per slice (S,)."""
    sums: np.ndarray
    """Per-slice sums (S × M)."""

    @property
    def values(self) -> np.ndarray:
        with np.errstate(invalid="ignore", divide="ignore"):
            return self.sums / self.n[:, None]


def slice_gap(values: np.ndarray, *, min_finite: int = 1) -> np.ndarray:
    """max − min over the last axis (slices or groups), ignoring NaN; NaN with fewer than `min_finite` values.

    The one gap implementation: per-scope values, bootstrap resamples (B × S) and evaluator groups.
    """
    finite = np.isfinite(values)
    hi = np.where(finite, values, -np.inf).max(axis=-1)
    lo = np.where(finite, values, np.inf).min(axis=-1)
    return np.where(finite.sum(axis=-1) >= max(min_finite, 1), hi - lo, np.nan)


def slice_worst(values: np.ndarray, spec: MetricSpec) -> np.ndarray:
    """The worst value over the last axis: highest for harms and neutral metrics, lowest for goods (NaN-aware)."""
    finite = np.isfinite(values)
    if spec.higher_is_worse is False:
        worst = np.where(finite, values, np.inf).min(axis=-1)
    else:
        worst = np.where(finite, values, -np.inf).max(axis=-1)
    return np.where(finite.any(axis=-1), worst, np.nan)


def worst_index(values: np.ndarray, spec: MetricSpec) -> int | None:
    """The worst slice: highest for harms and neutral metrics, lowest for goods (NaN-aware).

    What `np.nanargmax`/`nanargmin` return (NaN set to ∓inf, first of ties), without their
    per-call overhead: this runs once per scope and metric."""
    missing = np.isnan(values)
    if missing.all():
        return None
    if spec.higher_is_worse is False:
        return int(np.where(missing, np.inf, values).argmin())
    return int(np.where(missing, -np.inf, values).argmax())


def gap(values: np.ndarray) -> float:
    """The max−min gap of one scope's slice values (NaN when none is computed)."""
    return float(slice_gap(values))
