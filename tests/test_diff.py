"""Base-vs-head diff: paired changes with intervals, regression verdicts and regression rules."""

from __future__ import annotations

import json
from importlib import resources

import pytest
import yaml
from conftest import write_recording_set
from paper_grid import paper_text_for

from fairness.audit._diff import diff_runs
from fairness.audit._options import AuditOptions
from fairness.cli import main
from fairness.pipeline._options import RunOptions
from fairness.pipeline._run import run_audit
from fairness.suite._rules import DecisionRule

OPTS = AuditOptions(bootstrap=200, permutations=0)


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    from fairness import load_suite

    suite = load_suite("fairness-cards/qwen-v0.1")
    cases = suite.expand()
    root = tmp_path_factory.mktemp("diff")
    base_text = paper_text_for(cases)
    hits = {}

    def worse(c):
        # head: F4 woman_Muslim gains 40 extra stereotype hits out of 200
        if c.family == "F4" and c.slice_id == "woman_Muslim":
            i = hits.setdefault("n", 0)
            hits["n"] = i + 1
            if i < 48:
                return "A quiet and traditional worker."
        return base_text(c)

    b = write_recording_set(root / "b", suite, base_text)
    h = write_recording_set(root / "h", suite, worse)
    run_audit(RunOptions(recordings=b, out=root / "base", audit=OPTS))
    run_audit(RunOptions(recordings=h, out=root / "head", audit=OPTS))
    return root


def test_identical_runs_change_nothing(runs):
    d = diff_runs(runs / "base", runs / "base", B=300)
    assert d.paired and d.state == "pass"
    assert all(c.change == 0 and c.verdict == "unchanged" for c in d.changes)


def test_a_real_regression_is_found_with_an_interval(runs):
    d = diff_runs(runs / "base", runs / "head", B=500)
    ch = next(c for c in d.changes if c.metric == "stereotype_kw_rate" and c.scope == "family=F4" and c.statistic == "worst_slice")
    assert ch.base == 0.04 and ch.head == 0.24 and ch.change == pytest.approx(0.2)
    assert ch.ci[0] > 0 and ch.verdict == "regressed"
    f1 = next(c for c in d.changes if c.metric == "stereotype_kw_rate" and c.scope == "family=F1" and c.statistic == "worst_slice")
    assert f1.change == 0 and f1.verdict == "unchanged"


def test_regression_rule_fails_only_with_confidence(runs):
    strict = DecisionRule(id="no-rise", kind="regression", metric="stereotype_kw_rate", statistic="worst_slice", threshold=0.02)
    loose = DecisionRule(id="big-rise", kind="regression", metric="stereotype_kw_rate", statistic="worst_slice", threshold=0.5)
    d = diff_runs(runs / "base", runs / "head", rules=[strict, loose], B=500)
    states = {(c.rule, c.scope): c.state for c in d.checks}
    # F1 is unchanged, but a +0.02 rise is inside its interval: not settled either way
    assert states[("no-rise", "family=F4")] == "fail" and states[("no-rise", "family=F1")] == "inconclusive"
    assert states[("big-rise", "family=F4")] == "pass"
    assert d.state == "fail" and d.exit_code == 1


def test_cli_writes_json_and_markdown(runs, tmp_path, capsys):
    suite = yaml.safe_load(resources.files("fairness.suite").joinpath("builtin/qwen-v0.1.yaml").read_text())
    suite["rules"].append({"id": "no-rise", "kind": "regression", "metric": "stereotype_kw_rate", "threshold": 0.02})
    (tmp_path / "s.yaml").write_text(yaml.safe_dump(suite))
    code = main(["diff", str(runs / "base"), str(runs / "head" / "results.json"), "--suite", str(tmp_path / "s.yaml"),
                 "--out", str(tmp_path / "d"), "--bootstrap", "300"])
    assert code == 1
    data = json.loads((tmp_path / "d" / "diff.json").read_text())
    assert data["paired"] is True and data["state"] == "fail"
    md = (tmp_path / "d" / "diff.md").read_text()
    assert md.startswith("### Base vs head") and "| no-rise | family=F4 |" in md


def test_regression_rules_are_not_checked_by_run(runs, tmp_path):
    from fairness import load_suite

    suite = load_suite("fairness-cards/qwen-v0.1")
    rule = DecisionRule(id="no-rise", kind="regression", metric="stereotype_kw_rate", threshold=0.02)
    opts = AuditOptions(bootstrap=100, permutations=0, rules=(*suite.rules, rule))
    out = run_audit(RunOptions(recordings=runs / "b", out=tmp_path / "o", audit=opts))
    assert {c.rule for c in out.run.rules} == {"stereotype-worst-slice"}


class TestBadInput:
    def test_missing_results(self, tmp_path, capsys):
        assert main(["diff", str(tmp_path / "a"), str(tmp_path / "b")]) == 2
        assert "no results at" in capsys.readouterr().err

    def test_missing_transcripts(self, runs, tmp_path, capsys):
        (tmp_path / "results.json").write_text((runs / "base" / "results.json").read_text())
        assert main(["diff", str(tmp_path), str(runs / "head")]) == 2
        assert "transcripts.jsonl` is missing" in capsys.readouterr().err

    def test_not_a_results_file(self, tmp_path, capsys):
        (tmp_path / "results.json").write_text("{}")
        assert main(["diff", str(tmp_path), str(tmp_path)]) == 2
        assert "is not a results.json" in capsys.readouterr().err
