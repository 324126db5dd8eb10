"""Declarative decision rules: what the gate checks, written in the suite or a config file."""


import math
import operator
from collections.abc import Callable, Mapping
from typing import Any, Literal

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
    """A metric of the suite's rubric, e.g. `stereotype_kw_rate`; an unknown name is refused with the closest one."""
    statistic: Statistic = "worst_slice"
    """`worst_slice` (default): the worst slice's value (highest, or lowest for a metric where higher
    is better); `max_minus_min`: the gap between the highest and lowest slice; `rate`: the pooled value."""
    scope: Scope = "each_family"
    """`each_family` (default): checked per prompt family, Holm-adjusted across them (fires if any
    family fires); `overall`: once, on all families pooled."""
    comparator: Comparator = ">"
    """How the statistic is compared with the threshold (default `>`: the rule fires above it)."""
    threshold: float = Field(allow_inf_nan=False)
    """A finite number: in [0, 1] for a rate metric, non-negative for a count metric, and in [-1, 1]
    (a change from the base run) for a `regression` rule."""
    rationale: str = ""
    """Why this rule and threshold exist (default empty); printed in the card."""
    kind: Literal["absolute", "regression"] = "absolute"
    """`absolute` (default): checked on one run. `regression`: checked by `diff` on the change from the
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


def metric_problem(metric: str, metrics: Mapping[str, Any] | None = None) -> str | None:
    """Why `metric` cannot be a rule's metric — not in the rubric's catalogue `metrics` (default: the
    paper rubric's), with the closest name — or None. The one check behind a suite's rules and rules a
    library caller passes in `AuditOptions`."""
    if metrics is None:
        from fairness.score._catalog import METRICS  # local: the catalog is data, suites stay light

        metrics = METRICS
    if metric in metrics:
        return None
    import difflib  # only when a name is wrong, not at every start-up

    close = difflib.get_close_matches(metric, list(metrics), n=1)
    return f"unknown metric `{metric}` ({f'did you mean `{close[0]}`?' if close else 'known: ' + ', '.join(metrics)})"


def threshold_problem(value: Any, metric_kind: str, rule_kind: str = "absolute") -> str | None:
    """Why `value` cannot be a threshold for a metric of `metric_kind`, or None.

    Rates (and gaps between rates) live in [0, 1]; a regression threshold is a change of a
    rate, in [-1, 1]; counts only need to be finite and non-negative."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(float(value)):
        return f"must be a finite number, got {value!r}"
    f = float(value)
    if rule_kind == "regression":
        return None if -1.0 <= f <= 1.0 else f"must be between -1 and 1 for a regression rule, got {value!r}"
    if metric_kind == "rate":
        return None if 0.0 <= f <= 1.0 else f"must be between 0 and 1 for a rate metric, got {value!r}"
    return None if f >= 0 else f"must be non-negative, got {value!r}"
