"""Number checks shared by the CLI, the Action and the library's audit options.

Every number a user gives is checked here before any work: finite, and within the range
its meaning allows. Resample counts are bounded because their memory grows linearly
with them (10^9 bootstrap resamples is an out-of-memory crash, not a better interval).
"""

from __future__ import annotations

import math
from typing import Any

from fairness._util.errors import FairnessError

MAX_RESAMPLES = 100_000
"""Upper bound for `--bootstrap` and `--permutations` (the default is 2,000)."""
MAX_SEED = 2**32 - 1
"""Seeds seed numpy generators and engines: non-negative, below 2^32."""
MAX_GROUP_SIZE = 1_000_000_000


def _finite(name: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise FairnessError(f"`{name}` must be a number, got {value!r}")
    try:
        f = float(value)
    except OverflowError:
        f = math.inf
    if not math.isfinite(f):
        raise FairnessError(f"`{name}` must be a finite number, got {value!r}")
    return f


def check_rate(name: str, value: Any) -> float:
    """A proportion: finite and in [0, 1]."""
    f = _finite(name, value)
    if not 0.0 <= f <= 1.0:
        raise FairnessError(f"`{name}` must be between 0 and 1, got {value!r}")
    return f


def check_count(name: str, value: Any, lo: int, hi: int) -> int:
    """A whole number in [lo, hi]."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise FairnessError(f"`{name}` must be an integer, got {value!r}")
    if not lo <= value <= hi:
        raise FairnessError(f"`{name}` must be between {lo:,} and {hi:,}, got {value:,}")
    return value


def threshold_problem(value: Any, metric_kind: str, rule_kind: str = "absolute") -> str | None:
    """Why `value` cannot be a threshold for a metric of `metric_kind`, or None.

    Rates (and gaps between rates) live in [0, 1]; a regression threshold is a change of a
    rate, in [-1, 1]; counts only need to be finite and non-negative."""
    try:
        f = _finite("threshold", value)
    except FairnessError as exc:
        return str(exc).removeprefix("`threshold` ")
    if rule_kind == "regression":
        return None if -1.0 <= f <= 1.0 else f"must be between -1 and 1 for a regression rule, got {value!r}"
    if metric_kind == "rate":
        return None if 0.0 <= f <= 1.0 else f"must be between 0 and 1 for a rate metric, got {value!r}"
    return None if f >= 0 else f"must be non-negative, got {value!r}"


def check_threshold(name: str, value: Any, rules: Any = None) -> float:
    """A threshold override applied to every absolute rule: valid for each rule's metric kind
    (without rules: finite and non-negative)."""
    from fairness.score._catalog import METRICS

    kinds = {METRICS[r.metric].kind for r in rules or () if r.kind == "absolute" and r.metric in METRICS}
    for kind in sorted(kinds) or ["count"]:
        problem = threshold_problem(value, kind)
        if problem:
            raise FairnessError(f"`{name}` {problem}")
    return float(value)


def check_options(options: Any, rules: Any = None) -> None:
    """Validate an `AuditOptions` (any object with its attributes) before the audit starts;
    with `rules`, the threshold override is checked against each rule's metric kind."""
    check_rate("alpha", options.alpha)
    if not 0 < options.alpha < 1:
        raise FairnessError(f"alpha must be strictly between 0 and 1, got {options.alpha!r}")
    check_count("bootstrap", options.bootstrap, 1, MAX_RESAMPLES)
    check_count("permutations", options.permutations, 0, MAX_RESAMPLES)
    check_count("seed", options.seed, 0, MAX_SEED)
    if options.min_group_size is not None:
        check_count("min_group_size", options.min_group_size, 1, MAX_GROUP_SIZE)
    if options.threshold is not None:
        check_threshold("threshold", options.threshold, rules)
    check_count("interval_depth", options.interval_depth, 0, 16)
