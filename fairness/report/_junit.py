"""JUnit XML view of a run, so CI test reporters show one test per check.

Each decision rule evaluated in a scope (`stereotype-worst-slice` × `family=F2`) is one
testcase, and so is each base-vs-head regression check (`stereotype-regression` ×
`family=F2 (base vs head)`): `fail` is a <failure>, `inconclusive` and `undefined` are
<skipped> (the evidence neither clears nor breaks the rule), `pass` passes. The suite's
properties carry the run's one verdict (`gate.state`, `gate.exit_code`). Built with
ElementTree so every string from the results is escaped.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import xml.etree.ElementTree as ET

    from fairness.audit._gate import Gate
    from fairness.audit._results import FairnessRun, RegressionCheck, RuleCheck

_SKIPPED = {"inconclusive", "undefined"}


def _fmt(x: Any) -> str:
    if x is None:
        return "n/a"
    if isinstance(x, float):
        return f"{x:.4g}"
    return str(x)


def _interval(ci: list[float | None] | None) -> str:
    return "n/a" if not ci else f"[{_fmt(ci[0])}, {_fmt(ci[1])}]"


def _rule_detail(c: RuleCheck) -> str:
    return (f"{c.metric} {c.statistic} = {_fmt(c.value)} (interval {_interval(c.interval)}) {c.comparator} "
            f"{_fmt(c.threshold)}? state {c.state}; worst slice {c.worst_slice or 'n/a'}; n={_fmt(c.n)}\n{c.reason}")


def _regression_detail(c: RegressionCheck, base: str) -> str:
    return (f"{c.metric} {c.statistic}: change {_fmt(c.change)} from base {_fmt(c.base)} to head {_fmt(c.head)} "
            f"(interval {_interval(c.ci)}) {c.comparator} {_fmt(c.threshold)}? state {c.state}; "
            f"worst slice (head) {c.slice or 'n/a'}; against {base}\n{c.reason}")


def _testcase(classname: str, name: str, state: str, reason: str, detail: str) -> ET.Element:
    import xml.etree.ElementTree as ET  # loaded when JUnit is asked for, not by every run

    tc = ET.Element("testcase", classname=classname, name=name, time="0")
    if state == "fail":
        ET.SubElement(tc, "failure", message=reason, type="fail").text = detail
        return tc
    if state in _SKIPPED:
        ET.SubElement(tc, "skipped", message=f"{state}: {reason}")
    ET.SubElement(tc, "system-out").text = detail
    return tc


def junit_xml(run: FairnessRun) -> str:
    """The JUnit XML document of a run: its rule checks and regression checks, and its verdict."""
    comp = run.comparison
    ran = comp is not None and comp.ran
    return junit_document(f"{run.suite.name} on {run.recordings.model_id}", run.gate, run.rules,
                          comp.checks if comp is not None and ran else [], comp.base if comp is not None else "",
                          model=run.recordings.model_id)


def junit_document(suite_name: str, gate: Gate, rules: list[RuleCheck], regressions: list[RegressionCheck], base: str, *,
                   model: str, suffix: str = " (base vs head)") -> str:
    """JUnit XML: one test case per rule check and per regression check (`suffix` on the latter's names)."""
    import xml.etree.ElementTree as ET

    cases = [_testcase(c.rule, c.scope, c.state, c.reason, _rule_detail(c)) for c in rules]
    states = [c.state for c in rules]
    cases += [_testcase(c.rule, f"{c.scope}{suffix}", c.state, c.reason, _regression_detail(c, base)) for c in regressions]
    states += [c.state for c in regressions]
    counts = {"tests": str(len(cases)), "failures": str(states.count("fail")), "errors": "0",
              "skipped": str(sum(s in _SKIPPED for s in states)), "time": "0"}
    root = ET.Element("testsuites", {"name": "llm-fairness-check", **counts})
    ts = ET.SubElement(root, "testsuite", {"name": suite_name, **counts})
    props = ET.SubElement(ts, "properties")
    for name, value in (("gate.state", gate.state), ("gate.exit_code", gate.exit_code),
                        ("gate.passed", str(gate.passed).lower()), ("model", model)):
        ET.SubElement(props, "property", name=name, value=_fmt(value))
    ts.extend(cases)
    ET.indent(root)
    return ET.tostring(root, encoding="unicode", xml_declaration=True) + "\n"
