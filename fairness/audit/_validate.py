"""Number checks for values outside `AuditOptions`: CLI counts and the thresholds of suite rules.

`AuditOptions` validates the audit's own numbers; this module holds the same kind of check
for the rest, so every number a user gives is finite and in its range before any work.
"""

from __future__ import annotations

import math
from typing import Any

from fairness._util.errors import FairnessError


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
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(float(value)):
        return f"must be a finite number, got {value!r}"
    f = float(value)
    if rule_kind == "regression":
        return None if -1.0 <= f <= 1.0 else f"must be between -1 and 1 for a regression rule, got {value!r}"
    if metric_kind == "rate":
        return None if 0.0 <= f <= 1.0 else f"must be between 0 and 1 for a rate metric, got {value!r}"
    return None if f >= 0 else f"must be non-negative, got {value!r}"
