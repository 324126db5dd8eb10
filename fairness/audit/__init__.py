"""Stages 4–6 — metrics per scope, statistics (intervals, tests), the gate, and base-vs-head diffs."""

from fairness.audit._audit import AuditOptions, FairnessRun, audit
from fairness.audit._diff import diff_runs
from fairness.audit._gate import EXIT_CODES, check_state, exit_code, overall_state

__all__ = ["EXIT_CODES", "AuditOptions", "FairnessRun", "audit", "check_state", "diff_runs", "exit_code", "overall_state"]
