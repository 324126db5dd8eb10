"""Stage 3 — scoring: rubrics as data (the suite's own, or the paper's `rubric.yaml`), their one-pass
scanner and the metric catalogue. Imported lazily: loading a suite must not load numpy."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from fairness.score._catalog import METRICS, MetricSpec
    from fairness.score._compiled import Rubric, load_rubric
    from fairness.score._rubric import ScoreTable, score_texts

_WHERE = {"METRICS": "_catalog", "MetricSpec": "_catalog", "Rubric": "_compiled", "ScoreTable": "_rubric",
          "load_rubric": "_compiled", "score_texts": "_rubric"}

__all__ = ["METRICS", "MetricSpec", "Rubric", "ScoreTable", "load_rubric", "score_texts"]


def __getattr__(name: str) -> Any:
    if name in _WHERE:
        import importlib

        return getattr(importlib.import_module(f"fairness.score.{_WHERE[name]}"), name)
    raise AttributeError(name)
