"""Gate: turn rule checks into pass / fail / illustrative / undefined and an exit code.

A breached threshold is data, not an exception. A rule fails only when the evidence
clears the threshold: by default the whole interval lies beyond it. A point beyond the
threshold whose interval straddles it is `illustrative`, with the reason.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Literal, cast

from fairness.suite._rules import DecisionRule

State = Literal["pass", "fail", "illustrative", "undefined"]
GateOn = Literal["point", "interval"]
FailOn = Literal["fail", "illustrative"]

EXIT_CODES: dict[str, int] = {"pass": 0, "fail": 1, "illustrative": 3, "undefined": 4}
_SEVERITY = {"pass": 0, "undefined": 1, "illustrative": 2, "fail": 3}


def check_state(
    rule: DecisionRule,
    value: float,
    interval: tuple[float, float] | None,
    *,
    underpowered: bool = False,
    allow_small_samples: bool = False,
    gate_on: GateOn = "interval",
) -> tuple[State, bool, str]:
    """The state of one rule check, whether its point fired, and why."""
    if underpowered and not allow_small_samples:
        return "undefined", False, "underpowered: a slice has fewer rows than min_group_size"
    if value is None or math.isnan(value):
        return "undefined", False, "no value: too few rows to compute"
    fired = rule.fires(value)
    desc = f"{value:.4g} {rule.comparator} {rule.threshold:g}"
    if not fired:
        return "pass", False, f"not breached: {value:.4g} vs threshold {rule.threshold:g}"
    if underpowered:
        return "illustrative", True, f"breached ({desc}) on an underpowered sample (--allow-small-samples)"
    if gate_on == "point":
        return "fail", True, f"breached: {desc}"
    if interval is None or any(x is None or math.isnan(x) for x in interval):
        return "illustrative", True, f"breached ({desc}) but no interval could be computed"
    lo, hi = interval
    beyond = lo if rule.comparator in (">", ">=") else hi
    if rule.fires(beyond):
        return "fail", True, f"breached with confidence: {desc}, interval [{lo:.4g}, {hi:.4g}] lies beyond it"
    return "illustrative", True, f"point breached ({desc}) but the interval [{lo:.4g}, {hi:.4g}] straddles the threshold"


def overall_state(states: Sequence[str]) -> State:
    """fail > illustrative > undefined > pass; no checks at all is `undefined`."""
    if not states:
        return "undefined"
    return cast(State, max(states, key=lambda s: _SEVERITY[s]))


def exit_code(state: str, fail_on: FailOn | None = None) -> int:
    """The process exit code for a gate state.

    Without `fail_on` each state has its own code (0/1/3/4). `fail_on="fail"` lets an
    illustrative result exit 0; `fail_on="illustrative"` makes it exit 1. `undefined`
    keeps 4 either way: too little data is never a clean pass.
    """
    if fail_on == "fail" and state == "illustrative":
        return 0
    if fail_on == "illustrative" and state == "illustrative":
        return 1
    return EXIT_CODES[state]
