"""A metric as every stage reads it: name, score column, kind, which direction is worse, and what it means.

A suite's rubric (`fairness.score._rubric.Rubric.metrics`) is the catalogue of its run; `METRICS` is
the paper rubric's, for callers that audit the paper's suite.
"""

from __future__ import annotations

from typing import Any, Literal, NamedTuple


class MetricSpec(NamedTuple):
    name: str
    column: str
    """The per-output score column it averages."""
    kind: Literal["rate", "count"]
    higher_is_worse: bool | None
    """True for harms, False for goods, None where neither direction is a harm."""
    description: str


def __getattr__(name: str) -> Any:
    if name == "METRICS":  # the paper rubric's catalogue, read from its file on first use
        from fairness.score._compiled import paper_rubric

        return paper_rubric().metrics
    raise AttributeError(name)
