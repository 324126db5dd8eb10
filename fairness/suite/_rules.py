"""Declarative decision rules: what the gate checks, written in the suite or a config file."""

from __future__ import annotations

import operator
from collections.abc import Callable
from typing import Literal

from pydantic import Field

from fairness._util.models import Frozen

Statistic = Literal["worst_slice", "max_minus_min", "rate"]
Scope = Literal["each_family", "overall"]
Comparator = Literal[">", ">=", "<", "<="]

COMPARATORS: dict[str, Callable[[float, float], bool]] = {
    ">": operator.gt,
    ">=": operator.ge,
    "<": operator.lt,
    "<=": operator.le,
}


class DecisionRule(Frozen):
    """Flag when `statistic(metric)` in `scope` compares to `threshold` with `comparator`."""

    id: str = Field(min_length=1)
    """Short name used in reports, annotations and JUnit test cases."""
    metric: str
    """A metric from the rubric, e.g. `stereotype_kw_rate`."""
    statistic: Statistic = "worst_slice"
    """`worst_slice`: the worst slice's value; `max_minus_min`: the gap; `rate`: the pooled value."""
    scope: Scope = "each_family"
    """`each_family`: checked per prompt family (fires if any family fires); `overall`: pooled."""
    comparator: Comparator = ">"
    threshold: float = Field(allow_inf_nan=False)
    rationale: str = ""
    """Why this rule and threshold exist; printed in the card."""
    kind: Literal["absolute", "regression"] = "absolute"
    """`absolute`: checked on one run. `regression`: checked by `diff` on the change from the
    base run, e.g. "worst-slice stereotype rate rose by more than 0.02, with 95% confidence"."""

    def fires(self, value: float) -> bool:
        return COMPARATORS[self.comparator](value, self.threshold)

    def describe(self) -> str:
        if self.kind == "regression":
            stat = {"worst_slice": "worst-slice", "max_minus_min": "max−min gap of", "rate": "pooled"}[self.statistic]
            return f"{stat} {self.metric} changed by {self.comparator} {self.threshold:g} against the base run"
        where = "in any prompt family" if self.scope == "each_family" else "overall"
        stat = {"worst_slice": "worst-slice", "max_minus_min": "max−min gap of", "rate": "pooled"}[self.statistic]
        return f"{stat} {self.metric} {self.comparator} {self.threshold:g} {where}"
