"""Gate: turn rule checks into pass / fail / inconclusive / undefined and an exit code.

A breached threshold is data, not an exception. With the default `--gate-on interval` a
verdict must be earned by the evidence (the check's interval for the grid estimand):

- `fail` (exit 1): the whole interval lies beyond the threshold;
- `pass` (exit 0): the whole interval lies within it;
- `inconclusive` (exit 3): the interval straddles the threshold, whatever the point says; also
  a pass on an incomplete recording set and any check on underpowered slices audited with
  `--allow-small-samples` (values shown, not judged). The check carries how many more seeds
  would settle it;
- `undefined` (exit 4): too little data to evaluate (a slice below `min_group_size` rows or
  template cells, a slice from one template cell, or no rules).

Bad input exits 2 (FairnessError). `--gate-on point` is the paper's rule: fail when the point breaches.
Severity for the overall state: fail > undefined > inconclusive > pass (an undefined check is
never hidden behind an inconclusive one, which the Action treats as a warning).
`--fail-on fail` lets inconclusive exit 0; `--fail-on inconclusive` makes it exit 1.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Literal, cast

from fairness.suite._rules import DecisionRule

State = Literal["pass", "fail", "inconclusive", "undefined"]
GateOn = Literal["point", "interval"]
FailOn = Literal["fail", "inconclusive"]

EXIT_CODES: dict[str, int] = {"pass": 0, "fail": 1, "inconclusive": 3, "undefined": 4}
_SEVERITY = {"pass": 0, "inconclusive": 1, "undefined": 2, "fail": 3}


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
        return "undefined", False, "underpowered: a slice has fewer rows or template cells than min_group_size"
    if value is None or math.isnan(value):
        return "undefined", False, "no value: too few rows to compute"
    fired = rule.fires(value)
    desc = f"{value:.4g} {rule.comparator} {rule.threshold:g}"
    point = f"point breached ({desc})" if fired else f"point {value:.4g} within threshold {rule.threshold:g}"
    if underpowered:
        return "inconclusive", fired, f"{point} on an underpowered sample (--allow-small-samples: shown, not judged)"
    if gate_on == "point":
        return ("fail", True, f"breached: {desc}") if fired else ("pass", False, f"not breached: {point}")
    if interval is None or any(x is None or math.isnan(x) for x in interval):
        return "inconclusive", fired, f"{point} but no interval could be computed"
    lo, hi = interval
    beyond, within = (lo, hi) if rule.comparator in (">", ">=") else (hi, lo)
    ci = f"[{lo:.4g}, {hi:.4g}]"
    if rule.fires(beyond):
        return "fail", fired, f"breached with confidence: the interval {ci} lies beyond {rule.threshold:g} ({point})"
    if not rule.fires(within):
        return "pass", fired, f"within with confidence: the interval {ci} lies within {rule.threshold:g} ({point})"
    return "inconclusive", fired, f"the interval {ci} straddles the threshold {rule.threshold:g} ({point})"


def overall_state(states: Sequence[str]) -> State:
    """fail > undefined > inconclusive > pass; no checks at all is `undefined`."""
    if not states:
        return "undefined"
    return cast(State, max(states, key=lambda s: _SEVERITY[s]))


def exit_code(state: str, fail_on: FailOn | None = None) -> int:
    """The process exit code for a gate state.

    Without `fail_on` each state has its own code (0/1/3/4). `fail_on="fail"` lets an
    inconclusive result exit 0; `fail_on="inconclusive"` makes it exit 1. `undefined`
    keeps 4 either way: too little data is never a clean pass.
    """
    if state == "inconclusive" and fail_on == "fail":
        return 0
    if state == "inconclusive" and fail_on == "inconclusive":
        return 1
    return EXIT_CODES[state]
