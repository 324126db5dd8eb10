"""Stage 1 — the suite: a prompt grid declared in YAML, validated, expanded into `Case` rows."""

from fairness.suite._case import Case, SamplingParams
from fairness.suite._rules import DecisionRule
from fairness.suite._suite import BUILTIN_SUITES, Suite, load_suite, parse_suite

__all__ = ["BUILTIN_SUITES", "Case", "DecisionRule", "SamplingParams", "Suite", "load_suite", "parse_suite"]
