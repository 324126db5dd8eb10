"""`AuditOptions`: the one typed, validated set of knobs for an audit.

The library validates its own options (a library caller gets the same one-line error as the
CLI and the Action), so no adapter re-implements a range check. Each bad value is a
`FairnessError` naming the parameter and the rule, e.g. "`bootstrap` must be an integer in
[1, 100000]".
"""


import math
import operator
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar, Literal

from pydantic import ValidationError, field_validator

from fairness._util.errors import FairnessError, validation_message
from fairness._util.models import Frozen
from fairness.audit._gate import DEFAULT_FAIL_ON, FAIL_ON_CHOICES, GATE_ON_CHOICES, FailOn, GateOn
from fairness.audit._stats import DEFAULT_ALPHA, DEFAULT_B
from fairness.score._catalog import MetricSpec
from fairness.suite._rules import DecisionRule, metric_problem

ScorerMode = Literal["paper", "strict"]

DEFAULT_PERMUTATIONS = 2000
DEFAULT_SEED = 20260325
MAX_RESAMPLES = 100_000
"""Documented upper bound of `bootstrap` and `permutations` (memory grows linearly with them)."""


def _integer(name: str, value: Any, low: int, high: int | None) -> int:
    rule = f"an integer in [{low}, {high}]" if high is not None else f"an integer ≥ {low}"
    if isinstance(value, bool):
        raise ValueError(f"`{name}` must be {rule}, got {value!r}")
    try:
        number = operator.index(value)
    except TypeError:
        raise ValueError(f"`{name}` must be {rule}, got {value!r}") from None
    if number < low or (high is not None and number > high):
        raise ValueError(f"`{name}` must be {rule}, got {number}")
    return number


def _finite(name: str, value: Any) -> float:
    if isinstance(value, bool) or (not isinstance(value, (int, float)) and not hasattr(value, "__float__")):
        raise ValueError(f"`{name}` must be a finite number, got {value!r}")
    number = float(value)
    if not math.isfinite(number):
        raise ValueError(f"`{name}` must be a finite number, got {value!r}")
    return number


def _choice(name: str, value: Any, choices: tuple[str, ...]) -> str:
    if value not in choices:
        raise ValueError(f"`{name}` must be one of {', '.join(choices)}, got {value!r}")
    return str(value)


MAX_MIN_GROUP_SIZE = 1_000_000_000
"""The suite's own bound (suite.min_group_size): a larger minimum could never be met by any grid."""


class AuditOptions(Frozen):
    """How to audit: resampling sizes, seed, small-sample policy, gate policy and overrides.

    Constructing one with a bad value raises `FairnessError` (one line); the defaults are the
    suite's settings and the documented statistical defaults.
    """

    alpha: float = DEFAULT_ALPHA
    """Significance level of every interval (two-sided 1−alpha); in (0, 1)."""
    bootstrap: int = DEFAULT_B
    """Cluster-bootstrap resamples B; in [1, 100000]."""
    permutations: int = DEFAULT_PERMUTATIONS
    """Permutations per test; 0 skips the permutation tests (p-values are then null); in [0, 100000]."""
    seed: int = DEFAULT_SEED
    """Seed of every random stream (bootstrap and permutations); in [0, 2**32 − 1]."""
    min_group_size: int | None = None
    """Rows and template cells per slice below which a metric is not computed (≥ 1); None: the suite's setting."""
    allow_small_samples: bool = False
    """Compute underpowered metrics anyway; rule checks touching them are shown, not judged (inconclusive)."""
    gate_on: GateOn = "interval"
    """`interval`: a rule fails only when its whole interval lies beyond the threshold; `point`: the point value."""
    fail_on: FailOn = DEFAULT_FAIL_ON
    """Which states fail the process: `state` gives each state its own exit code, `fail` lets
    inconclusive exit 0, `inconclusive` makes it exit 1 (None is read as `state`)."""
    scorer_mode: ScorerMode | None = None
    """`paper` (substring) or `strict` (whole-word) matching; None: the suite's setting."""
    rules: tuple[DecisionRule, ...] | None = None
    """Decision rules to check instead of the suite's; None: the suite's rules."""
    interval_depth: int = 1
    """Scopes up to this depth (overall=0, family=1, family×regime=2 …) get intervals; ≥ 0."""
    threshold: float | None = None
    """Override the threshold of every absolute decision rule (finite; in [0, 1] for a rate metric, ≥ 0 for a
    count); regression rules keep theirs (see `regression_threshold`); None: the rules' own."""
    regression_threshold: float | None = None
    """Override the threshold of every regression rule (a change, in [-1, 1]); None: the rules' own."""

    _INTEGERS: ClassVar[dict[str, tuple[int, int | None]]] = {
        "bootstrap": (1, MAX_RESAMPLES),
        "permutations": (0, MAX_RESAMPLES),
        "seed": (0, 2**32 - 1),
        "min_group_size": (1, None),
        "interval_depth": (0, None),
    }
    _CHOICES: ClassVar[dict[str, tuple[str, ...]]] = {
        "gate_on": GATE_ON_CHOICES,
        "fail_on": FAIL_ON_CHOICES,
        "scorer_mode": ("paper", "strict"),
    }

    def __init__(self, **data: Any) -> None:
        try:
            super().__init__(**data)
        except ValidationError as err:
            raise FairnessError(validation_message(err)) from None

    @field_validator("bootstrap", "permutations", "seed", "min_group_size", "interval_depth", mode="before")
    @classmethod
    def _integers(cls, value: Any, info: Any) -> Any:
        if value is None and info.field_name == "min_group_size":
            return None
        number = _integer(info.field_name, value, *cls._INTEGERS[info.field_name])
        if info.field_name == "min_group_size" and number > MAX_MIN_GROUP_SIZE:
            raise ValueError(f"`min_group_size` must be at most {MAX_MIN_GROUP_SIZE:,} (a suite's own bound), got {number}")
        return number

    @field_validator("gate_on", "fail_on", "scorer_mode", mode="before")
    @classmethod
    def _choices(cls, value: Any, info: Any) -> Any:
        if value is None and info.field_name == "fail_on":
            return DEFAULT_FAIL_ON
        if value is None and info.field_name != "gate_on":
            return None
        return _choice(info.field_name, value, cls._CHOICES[info.field_name])

    @field_validator("alpha", mode="before")
    @classmethod
    def _alpha(cls, value: Any) -> float:
        number = _finite("alpha", value)
        if not 0 < number < 1:
            raise ValueError(f"`alpha` must be a number in (0, 1), got {value!r}")
        return number

    @field_validator("threshold", mode="before")
    @classmethod
    def _threshold(cls, value: Any) -> float | None:
        return None if value is None else _finite("threshold", value)

    @field_validator("regression_threshold", mode="before")
    @classmethod
    def _regression_threshold(cls, value: Any) -> float | None:
        if value is None:
            return None
        number = _finite("regression_threshold", value)
        if not -1 <= number <= 1:
            raise ValueError(f"`regression_threshold` must be a change in [-1, 1], got {value!r}")
        return number

    def effective_rules(self, rules: Sequence[DecisionRule], metrics: Mapping[str, MetricSpec] | None = None) -> tuple[DecisionRule, ...]:
        """`rules` (or `self.rules` when set) with the threshold overrides applied, each checked
        against its metric in `metrics` (the suite's rubric's catalogue; default the paper's): resolved
        before any work, so a bad override never waits for a grid."""
        if metrics is None:
            from fairness.score._catalog import METRICS

            metrics = METRICS

        chosen = self.rules if self.rules is not None else tuple(rules)
        out = []
        for rule in chosen:
            unknown = metric_problem(rule.metric, metrics)
            if unknown:
                raise FairnessError(f"rule `{rule.id}`: {unknown}")
            if rule.kind == "regression" and self.regression_threshold is not None:
                out.append(rule.model_copy(update={"threshold": self.regression_threshold}))
            elif rule.kind == "absolute" and self.threshold is not None:
                out.append(threshold_for(rule, self.threshold, metrics[rule.metric].kind))
            else:
                out.append(rule)
        return tuple(out)

    @field_validator("allow_small_samples", mode="before")
    @classmethod
    def _bool(cls, value: Any) -> bool:
        if not isinstance(value, bool):
            raise ValueError(f"`allow_small_samples` must be true or false, got {value!r}")
        return value


def threshold_for(rule: DecisionRule, threshold: float, kind: str) -> DecisionRule:
    """`rule` with the overriding threshold; a rate's threshold must lie in [0, 1], a count's be ≥ 0."""
    if kind == "rate" and not 0 <= threshold <= 1:
        raise FairnessError(f"`threshold` must be in [0, 1] for the rate metric `{rule.metric}`, got {threshold:g}")
    if kind == "count" and threshold < 0:
        raise FairnessError(f"`threshold` must be non-negative for the count metric `{rule.metric}`, got {threshold:g}")
    return rule.model_copy(update={"threshold": threshold})
