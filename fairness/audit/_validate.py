"""Number checks for values outside `AuditOptions`: the CLI's counts.

`AuditOptions` validates the audit's own numbers; this module holds the same kind of check
for the rest (a suite rule's threshold: `fairness.suite._rules.threshold_problem`), so every
number a user gives is finite and in its range before any work.
"""

from __future__ import annotations

from typing import Any

from fairness._util.errors import FairnessError


def check_count(name: str, value: Any, lo: int, hi: int) -> int:
    """A whole number in [lo, hi]."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise FairnessError(f"`{name}` must be an integer, got {value!r}")
    if not lo <= value <= hi:
        raise FairnessError(f"`{name}` must be between {lo:,} and {hi:,}, got {value:,}")
    return value
