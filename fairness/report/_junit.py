"""JUnit XML view of a run, so CI test reporters show one test per rule check.

Each decision rule evaluated in a scope (`stereotype-worst-slice` × `family=F2`) is one
testcase: `fail` is a <failure>, `inconclusive` and `undefined` are <skipped> (the
evidence neither clears nor breaks the rule), `pass` passes. Built with ElementTree so
every string from the results is escaped.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import xml.etree.ElementTree as ET

_SKIPPED = {"inconclusive", "undefined"}


def _fmt(x: Any) -> str:
    if x is None:
        return "n/a"
    if isinstance(x, float):
        return f"{x:.4g}"
    return str(x)


def _detail(check: dict[str, Any]) -> str:
    interval = check.get("interval")
    iv = "n/a" if not interval else f"[{_fmt(interval[0])}, {_fmt(interval[1])}]"
    return (
        f"{check.get('metric')} {check.get('statistic', '')} = {_fmt(check.get('value'))} "
        f"(interval {iv}) {check.get('comparator')} {_fmt(check.get('threshold'))}? "
        f"state {check.get('state')}; worst slice {check.get('worst_slice') or 'n/a'}; n={_fmt(check.get('n'))}\n"
        f"{check.get('reason', '')}"
    )


def _testcase(check: dict[str, Any]) -> ET.Element:
    import xml.etree.ElementTree as ET  # loaded when JUnit is asked for, not by every run
    tc = ET.Element("testcase", classname=str(check.get("rule")), name=str(check.get("scope")), time="0")
    state = check.get("state")
    if state == "fail":
        ET.SubElement(tc, "failure", message=str(check.get("reason", "")), type="fail").text = _detail(check)
        return tc
    if state in _SKIPPED:
        ET.SubElement(tc, "skipped", message=f"{state}: {check.get('reason', '')}")
    ET.SubElement(tc, "system-out").text = _detail(check)
    return tc


def junit_xml(results: dict[str, Any]) -> str:
    """The JUnit XML document for a results.json dict."""
    import xml.etree.ElementTree as ET

    checks = results.get("rules") or []
    suite_name = (results.get("suite") or {}).get("name", "suite")
    model = (results.get("recordings") or {}).get("model_id", "model")
    failures = sum(c.get("state") == "fail" for c in checks)
    skipped = sum(c.get("state") in _SKIPPED for c in checks)
    counts = {"tests": str(len(checks)), "failures": str(failures), "errors": "0", "skipped": str(skipped), "time": "0"}
    root = ET.Element("testsuites", {"name": "llm-fairness-check", **counts})
    ts = ET.SubElement(root, "testsuite", {"name": f"{suite_name} on {model}", **counts})
    props = ET.SubElement(ts, "properties")
    gate = results.get("gate") or {}
    for name, value in (("gate.state", gate.get("state")), ("gate.exit_code", gate.get("exit_code")), ("model", model)):
        ET.SubElement(props, "property", name=name, value=_fmt(value))
    for check in checks:
        ts.append(_testcase(check))
    ET.indent(root)
    return ET.tostring(root, encoding="unicode", xml_declaration=True) + "\n"
