"""Stage 3 — scoring: the lexical rubric (data + one-pass scanner) and the catalogue of score columns."""

from fairness.score._catalog import METRICS, MetricSpec
from fairness.score._rubric import ScoreTable, load_rubric, score_texts

__all__ = ["METRICS", "MetricSpec", "ScoreTable", "load_rubric", "score_texts"]
