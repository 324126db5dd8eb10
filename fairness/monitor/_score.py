"""The one place the monitor meets the scorer: texts in, one int64 column per score column out.

Every engine calls `score_batch` on each Arrow batch's texts, so swapping the rubric (the
suite-owned rubric of issue 20) is a change to this module only.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

CHUNK = 4096
"""Texts scored per call: the rubric's scan grows faster than linearly in time and memory with the batch
(65,536 texts: ~650 MB and 2× the time per text of 4,096), so a large Arrow batch is scored in chunks."""


@dataclass(frozen=True)
class ScoreColumn:
    """One per-output score column the metrics average: `rate` (0/1 flags) or `count`."""

    name: str
    kind: str


def score_columns() -> tuple[ScoreColumn, ...]:
    """The score columns behind the metric catalogue, in catalogue order, each once."""
    from fairness.score._catalog import METRICS

    seen: dict[str, ScoreColumn] = {}
    for spec in METRICS.values():
        seen.setdefault(spec.column, ScoreColumn(spec.column, spec.kind))
    return tuple(seen.values())


def score_batch(texts: Sequence[str], mode: str) -> dict[str, np.ndarray]:
    """Score `texts` with the rubric in `mode` (`paper` or `strict`): {score column: int64 per text}."""
    from fairness.score import score_texts

    cols = score_columns()
    parts: dict[str, list[np.ndarray]] = {c.name: [] for c in cols}
    for start in range(0, len(texts), CHUNK):
        table = score_texts(texts[start:start + CHUNK], mode)  # type: ignore[arg-type]
        for c in cols:
            parts[c.name].append(np.asarray(table.columns[c.name], dtype=np.int64))
    return {c.name: np.concatenate(parts[c.name]) if parts[c.name] else np.zeros(0, np.int64) for c in cols}
