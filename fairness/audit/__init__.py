"""Stages 4–6 — metrics per scope, statistics (intervals, tests), the gate, and base-vs-head diffs."""

from typing import TYPE_CHECKING, Any

from fairness.audit._audit import AuditOptions, FairnessRun, audit
from fairness.audit._gate import EXIT_CODES, check_state, exit_code, overall_state

if TYPE_CHECKING:
    from fairness.audit._diff import diff_runs

__all__ = ["EXIT_CODES", "AuditOptions", "FairnessRun", "audit", "check_state", "diff_runs", "exit_code", "overall_state"]


def __getattr__(name: str) -> Any:
    """`diff_runs` loads on first use: a run never diffs, so its models stay out of the run's import time."""
    if name == "diff_runs":
        from fairness.audit._diff import diff_runs

        return diff_runs
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
