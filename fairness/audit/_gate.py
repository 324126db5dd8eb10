"""Gate: the one place where rule checks become a verdict and the verdict an exit code.

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

The head's rule checks and the base-vs-head regression checks meet here (`decide`): every
output — results.json, stdout, summary.md, the cards, junit.xml, the annotations and the
Action's outputs — renders the `Gate` this module returns and none of them recomputes it.
"""


import math
from collections.abc import Sequence
from typing import Literal, cast, get_args

from fairness._util.models import Strict
from fairness.suite._rules import DecisionRule

State = Literal["pass", "fail", "inconclusive", "undefined"]
GateOn = Literal["point", "interval"]
FailOn = Literal["state", "fail", "inconclusive"]
"""Which states fail the process (`state`: each state its own exit code)."""

GATE_ON_CHOICES: tuple[GateOn, ...] = get_args(GateOn)
FAIL_ON_CHOICES: tuple[FailOn, ...] = get_args(FailOn)
FAIL_ON_HELP = {
    "state": "each state exits with its own code: 0 pass, 1 fail, 3 inconclusive, 4 undefined",
    "fail": "inconclusive exits 0 (a warning); fail 1, undefined 4",
    "inconclusive": "inconclusive exits 1, like fail; undefined 4",
}
"""One line per `fail-on` choice, shown by the CLI's help and the Action's docs."""

DEFAULT_FAIL_ON: FailOn = "state"
"""The library's and the CLI's default: a script reads the state from the exit code."""
ACTION_FAIL_ON: FailOn = "fail"
"""The Action's default: a pull-request check shows an inconclusive verdict as a warning rather
than blocking the merge on evidence that settles nothing (`fail-on: state` restores the codes)."""

EXIT_CODES: dict[str, int] = {"pass": 0, "fail": 1, "inconclusive": 3, "undefined": 4}
_SEVERITY = {"pass": 0, "inconclusive": 1, "undefined": 2, "fail": 3}


class Gate(Strict):
    """The final verdict of a run: its state, the process exit code and why."""

    state: State
    """The verdict: the worst of the head's rule checks and the regression checks (fail > undefined >
    inconclusive > pass)."""
    exit_code: int
    """0 pass, 1 fail, 3 inconclusive, 4 undefined (as mapped by `fail_on`)."""
    passed: bool
    """Whether the process exits 0 (the state under the `fail_on` policy)."""
    fail_on: FailOn
    """Which states fail the process: `state` gives each state its own exit code."""
    gate_on: GateOn
    """`interval` or `point`: what must clear a threshold for a rule to fail."""
    reasons: list[str]
    """One line per check that did not pass (or why there is no verdict), regressions first."""
    head_state: State
    """The head's own decision rules, alone."""
    regression_state: State | None = None
    """The base-vs-head regression checks, alone; null when no comparison ran."""


def check_state(
    rule: DecisionRule,
    value: float,
    interval: tuple[float, float] | None,
    *,
    underpowered: bool = False,
    allow_small_samples: bool = False,
    gate_on: GateOn = "interval",
) -> tuple[State, bool, str]:
    """The state of one rule check, whether its point fired, and why (from unrounded values)."""
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


def exit_code(state: str, fail_on: FailOn = DEFAULT_FAIL_ON) -> int:
    """The process exit code for a gate state.

    `state` gives each state its own code (0/1/3/4). `fail` lets an inconclusive result exit 0;
    `inconclusive` makes it exit 1. `undefined` keeps 4 either way: too little data is never a
    clean pass.
    """
    if state == "inconclusive" and fail_on == "fail":
        return 0
    if state == "inconclusive" and fail_on == "inconclusive":
        return 1
    return EXIT_CODES[state]


def head_verdict(check_states: Sequence[State], check_reasons: Sequence[str], *, has_rules: bool,
                 incomplete: str | None = None, empty: str | None = None) -> tuple[State, list[str]]:
    """The head run's own state and reasons from its rule checks.

    `incomplete` (why the recording set is incomplete) turns a pass into inconclusive: the
    missing rows could change it; `empty` (which slices are mostly empty outputs) makes the
    state undefined: a model cannot pass a fairness gate by saying nothing."""
    if not has_rules:
        return "undefined", ["the suite defines no decision rules"]
    state = overall_state(check_states)
    reasons = list(check_reasons)
    if incomplete is not None and state == "pass":
        state = "inconclusive"
        reasons.append(incomplete)
    if empty is not None:
        state = "undefined"
        reasons.insert(0, empty)
    return state, reasons


def decide(head_state: State, head_reasons: Sequence[str], *, fail_on: FailOn, gate_on: GateOn,
           regression_states: Sequence[State] | None = None, regression_reasons: Sequence[str] = ()) -> Gate:
    """The final verdict: the more severe of the head's state and the regression checks'.

    `regression_states` is None when no comparison ran; an empty list (a comparison whose
    suite has no regression rule) adds nothing."""
    regression = None if regression_states is None else (overall_state(regression_states) if regression_states else "pass")
    state = head_state if regression is None else overall_state([head_state, regression])
    code = exit_code(state, fail_on)
    return Gate(state=state, exit_code=code, passed=code == 0, fail_on=fail_on, gate_on=gate_on,
                reasons=[*regression_reasons, *head_reasons], head_state=head_state, regression_state=regression)


def with_regressions(gate: Gate, states: Sequence[State], reasons: Sequence[str]) -> Gate:
    """A head-only gate decided again with the base-vs-head regression checks."""
    if gate.regression_state is not None:
        raise ValueError("the gate already holds regression checks")
    return decide(gate.head_state, gate.reasons, fail_on=gate.fail_on, gate_on=gate.gate_on,
                  regression_states=states, regression_reasons=reasons)
