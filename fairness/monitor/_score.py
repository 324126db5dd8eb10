"""The one place the monitor meets the scorer: texts in, one int64 column per score column out.

Every engine calls `score_batch` on each Arrow batch's texts with the suite's compiled rubric (the
suite-owned rubric of issue 20; None: the paper's), so the scorer is met here only.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

CHUNK = 4096
"""Texts scored per call: the rubric's scan grows faster than linearly in time and memory with the batch
(65,536 texts: ~650 MB and 2× the time per text of 4,096), so a large Arrow batch is scored in chunks."""

if TYPE_CHECKING:
    from fairness.score._catalog import MetricSpec
    from fairness.score._compiled import Rubric


@dataclass(frozen=True)
class ScoreColumn:
    """One per-output score column the metrics average: `rate` (0/1 flags) or `count`."""

    name: str
    kind: str


def metrics_of(rubric: Rubric | None = None) -> dict[str, MetricSpec]:
    """The metric catalogue of `rubric` (a suite's compiled rubric; None: the paper's)."""
    if rubric is None:
        from fairness.score._compiled import paper_rubric

        rubric = paper_rubric()
    return rubric.metrics


def score_columns(rubric: Rubric | None = None) -> tuple[ScoreColumn, ...]:
    """The score columns behind the rubric's metrics, in catalogue order, each once."""
    seen: dict[str, ScoreColumn] = {}
    for spec in metrics_of(rubric).values():
        seen.setdefault(spec.column, ScoreColumn(spec.column, spec.kind))
    return tuple(seen.values())


def score_batch(texts: Sequence[str], mode: str, rubric: Rubric | None = None) -> dict[str, np.ndarray]:
    """Score `texts` with `rubric` (None: the paper's) in `mode` (`paper` or `strict`): {score column: int64 per text}."""
    if rubric is None:
        from fairness.score._compiled import paper_rubric

        rubric = paper_rubric()
    cols = score_columns(rubric)
    parts: dict[str, list[np.ndarray]] = {c.name: [] for c in cols}
    for start in range(0, len(texts), CHUNK):
        table = rubric.score(texts[start:start + CHUNK], mode)  # type: ignore[arg-type]
        for c in cols:
            parts[c.name].append(np.asarray(table.columns[c.name], dtype=np.int64))
    return {c.name: np.concatenate(parts[c.name]) if parts[c.name] else np.zeros(0, np.int64) for c in cols}


def scorer_problem(rubric: Rubric) -> str | None:
    """Why the monitor cannot score with `rubric` (a metric read from a scorer plug-in's recorded scores,
    which logs do not have), or None."""
    for name, m in rubric.spec.metrics.items():
        key, value = m.source
        if key == "scorer":
            return f"metric `{name}` reads scorer `{value}`'s recorded scores, which production logs do not have"
    return None
