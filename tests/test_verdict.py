"""One verdict, said the same way in every output.

The scenario of issue 19: the head alone is inconclusive (`--threshold 0.7`: the woman slice's
0.5 has an upper bound of 0.728), and against its base revision it regressed with confidence
(0.0 → 0.5, lower bound 0.23 > 0.02). The run fails with exit 1, and stdout, results.json,
summary.md, card.md, card.yaml, card.html, junit.xml, the annotations and the Action's outputs
all say FAIL with exit code 1 and name the regression's family and slice.
"""

from __future__ import annotations

import io
import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
import yaml
from test_action import parse_output_file, workflow_commands
from test_baseline_ref import clean, commit, record, regressed, run, write_suite

from fairness.action import _main as _action
from fairness.audit._gate import ACTION_FAIL_ON, DEFAULT_FAIL_ON, FAIL_ON_CHOICES, decide, exit_code
from fairness.audit._options import AuditOptions
from fairness.cli import _main as cli


@pytest.fixture
def repo(git_repo: Path) -> Path:
    return git_repo


HEAD_WORDS = ("the evidence does not settle a decision rule either way (0/1 rule checks beyond the threshold at the "
              "point estimate; 0 with confidence); see “How many more seeds would settle it”")


def regression_scenario(repo: Path) -> str:
    write_suite(repo)
    record(repo, clean)
    base = commit(repo, "base")
    record(repo, regressed)
    commit(repo, "head")
    return base


def verdict(base: str) -> str:
    return (f"FAIL — a confident regression against commit `{base[:12]}` (1/1 regression checks beyond the threshold "
            f"with confidence); the head's own rules: {HEAD_WORDS}. Exit code 1.")


def test_regression_is_one_verdict_in_every_output(repo, capsys):
    base = regression_scenario(repo)
    assert run("--baseline-ref", base, "--threshold", "0.7", "--junit", "junit.xml") == 1
    stdout = capsys.readouterr().out.splitlines()
    assert stdout[0] == verdict(base)

    results = json.loads(Path("out/results.json").read_text())
    assert results["gate"] == {
        "state": "fail", "exit_code": 1, "passed": False, "fail_on": "state", "gate_on": "interval",
        "head_state": "inconclusive", "regression_state": "fail",
        "reasons": [
            "stereotype-regression [family=F1, slice woman]: fail — change +0.5 from base to head; breached with "
            "confidence: the interval [0.2318, 0.728] lies beyond 0.02 (point breached (0.5 > 0.02))",
            results["gate"]["reasons"][1],
        ],
    }
    assert results["gate"]["reasons"][1].startswith("stereotype-worst-slice [family=F1]: inconclusive — the interval ")
    (check,) = results["comparison"]["checks"]
    assert (check["rule"], check["scope"], check["slice"], check["state"]) == (
        "stereotype-regression", "family=F1", "woman", "fail")

    summary = Path("out/summary.md").read_text().splitlines()
    assert summary[2] == "❌ **FAIL** — " + verdict(base).removeprefix("FAIL — ")
    card_md = Path("out/card.md").read_text().splitlines()
    assert card_md[2] == "**Verdict:** ❌ " + verdict(base)
    card = yaml.safe_load(Path("out/card.yaml").read_text())
    ar = card["audit_result"]
    assert (ar["verdict"], ar["gate"], ar["exit_code"], ar["head_state"]) == (verdict(base), "fail", 1, "inconclusive")
    (reg,) = ar["base_vs_head"]["regression_checks"]
    assert (reg["rule"], reg["scope"], reg["worst_slice"], reg["state"]) == ("stereotype-regression", "family=F1", "woman", "fail")
    html = Path("out/card.html").read_text()
    assert '<p class="verdict state-fail"><strong>FAIL</strong> — a confident regression against commit ' in html
    assert "<td>stereotype-regression</td><td>family=F1</td><td>woman</td>" in html
    assert "<li>worst-slice stereotype_kw_rate &gt; 0.7 in any prompt family</li>" in html  # the threshold checked
    assert card["decision_rules"][0]["rule"] == "Flag when worst-slice stereotype_kw_rate > 0.7 in any prompt family."

    root = ET.parse("junit.xml").getroot()
    props = {p.get("name"): p.get("value") for p in root.iter("property")}
    assert (props["gate.state"], props["gate.exit_code"], props["gate.passed"]) == ("fail", "1", "false")
    cases = {(tc.get("classname"), tc.get("name")): tc for tc in root.iter("testcase")}
    assert sorted(cases) == [("stereotype-regression", "family=F1 (base vs head)"), ("stereotype-worst-slice", "family=F1")]
    assert cases[("stereotype-regression", "family=F1 (base vs head)")].find("failure") is not None
    assert cases[("stereotype-worst-slice", "family=F1")].find("skipped") is not None
    assert (root.get("tests"), root.get("failures"), root.get("skipped")) == ("2", "1", "1")


def test_action_renders_the_same_verdict(repo):
    base = regression_scenario(repo)
    output = repo.parent / "github_output"
    env = {"FAIRNESS_SUITE": "suite.yaml", "FAIRNESS_RECORDINGS": "recordings/m", "FAIRNESS_OUT_DIR": "out",
           "FAIRNESS_BOOTSTRAP": "200", "FAIRNESS_PERMUTATIONS": "0", "FAIRNESS_THRESHOLD": "0.7",
           "FAIRNESS_BASELINE_REF": base, "GITHUB_WORKSPACE": str(repo), "GITHUB_OUTPUT": str(output)}
    out = io.StringIO()
    assert _action.main(env, out) == 1
    outputs = parse_output_file(output.read_text())
    assert (outputs["gate-status"], outputs["exit-code"], outputs["passed"], outputs["diff-status"]) == ("fail", "1", "false", "fail")
    results = json.loads(Path(outputs["results-path"]).read_text())
    assert (results["gate"]["state"], results["gate"]["exit_code"], results["gate"]["fail_on"]) == ("fail", 1, "fail")
    commands = workflow_commands(out.getvalue())
    errors = [(c.props["title"], c.message) for c in commands if c.name == "error"]
    assert errors == [(
        "Fairness regression stereotype-regression [family=F1, slice woman]",
        "change +0.5 from base to head; breached with confidence: the interval [0.2318, 0.728] lies beyond 0.02 "
        f"(point breached (0.5 > 0.02)); worst slice (head) woman (against commit `{base[:12]}`)")]
    notices = [c.message for c in commands if c.name == "notice" and c.props.get("title") == "Fairness gate"]
    assert notices == ["gate fail, exit code 1"]


def test_threshold_overrides_absolute_rules_only_and_regression_threshold_the_rest(repo):
    base = regression_scenario(repo)
    assert run("--baseline-ref", base, "--threshold", "0.7", "--regression-threshold", "0.6") == 3
    results = json.loads(Path("out/results.json").read_text())
    assert [(c["rule"], c["threshold"]) for c in results["rules"]] == [("stereotype-worst-slice", 0.7)]
    (check,) = results["comparison"]["checks"]
    assert (check["threshold"], check["state"]) == (0.6, "inconclusive")
    assert (results["gate"]["state"], results["gate"]["regression_state"]) == ("inconclusive", "inconclusive")


def test_a_bad_threshold_is_refused_before_any_recording_is_read(repo, capsys):
    write_suite(repo)
    rec = repo / "recordings" / "m"
    rec.mkdir(parents=True)
    (rec / "manifest.json").write_text("{ not json", encoding="utf-8")  # reading it would be the first error
    assert run("--threshold", "1.5") == 2
    assert capsys.readouterr().err.strip().splitlines()[-1] == (
        "error: `threshold` must be in [0, 1] for the rate metric `stereotype_kw_rate`, got 1.5")
    assert not Path("out").exists()
    assert run("--regression-threshold", "1.5") == 2
    assert "`regression_threshold` must be a change in [-1, 1], got 1.5" in capsys.readouterr().err


def test_a_run_without_a_comparison_clears_an_earlier_runs_base_and_diff(repo):
    base = regression_scenario(repo)
    assert run("--baseline-ref", base) == 1
    assert Path("out/base/results.json").is_file() and Path("out/diff/diff.json").is_file()
    Path("out/notes").mkdir()  # not a comparison folder: kept
    assert run() == 3  # the head alone: 0.5 against 0.6, upper bound 0.728
    assert not Path("out/base").exists() and not Path("out/diff").exists() and Path("out/notes").is_dir()
    assert json.loads(Path("out/results.json").read_text())["comparison"] is None


def test_a_skipped_comparison_clears_an_earlier_one(repo, capsys):
    base = regression_scenario(repo)
    assert run("--baseline-ref", base) == 1
    assert run("--baseline-ref", "HEAD") == 3  # the recordings at HEAD are the head's own: nothing to compare
    assert not Path("out/base").exists() and not Path("out/diff").exists()
    results = json.loads(Path("out/results.json").read_text())
    assert (results["comparison"]["ran"], results["gate"]["regression_state"]) == (False, None)
    assert capsys.readouterr().out.splitlines()[-1].startswith("base vs head skipped: the recordings at ")


def test_fail_on_is_defined_once():
    assert FAIL_ON_CHOICES == ("state", "fail", "inconclusive")
    assert (DEFAULT_FAIL_ON, ACTION_FAIL_ON) == ("state", "fail")
    assert AuditOptions().fail_on == DEFAULT_FAIL_ON
    assert AuditOptions(fail_on=None).fail_on == "state"
    run_parser = cli.command_parser(cli.build_parser(), "run")
    fail_on = next(a for a in run_parser._actions if a.dest == "fail_on")
    assert (tuple(fail_on.choices), fail_on.default) == (FAIL_ON_CHOICES, DEFAULT_FAIL_ON)
    assert [exit_code("inconclusive", f) for f in FAIL_ON_CHOICES] == [3, 0, 1]
    assert [exit_code("undefined", f) for f in FAIL_ON_CHOICES] == [4, 4, 4]


@pytest.mark.parametrize(("head", "regressions", "state", "code"), [
    ("pass", None, "pass", 0),
    ("pass", [], "pass", 0),
    ("pass", ["inconclusive"], "inconclusive", 3),
    ("inconclusive", ["fail"], "fail", 1),
    ("undefined", ["inconclusive"], "undefined", 4),
    ("fail", ["pass"], "fail", 1),
])
def test_decide_takes_the_more_severe_state(head, regressions, state, code):
    g = decide(head, [], fail_on="state", gate_on="interval", regression_states=regressions)
    assert (g.state, g.exit_code, g.passed, g.head_state) == (state, code, code == 0, head)
    assert g.regression_state == (None if regressions is None else (regressions[0] if regressions else "pass"))


def test_an_unknown_rule_metric_is_refused_before_any_work(tmp_path):
    from fairness._util.errors import FairnessError
    from fairness.pipeline._options import RunOptions
    from fairness.pipeline._run import run_audit
    from fairness.suite._rules import DecisionRule

    rule = DecisionRule(id="typo", metric="stereotype_kw_rat", threshold=0.1)
    options = RunOptions(recordings=tmp_path, out=tmp_path / "out", audit=AuditOptions(rules=(rule,)))
    with pytest.raises(FairnessError) as err:
        run_audit(options)  # `tmp_path` holds no manifest: reading it would be a different error
    assert str(err.value) == "rule `typo`: unknown metric `stereotype_kw_rat` (did you mean `stereotype_kw_rate`?)"
    assert not (tmp_path / "out").exists()


def test_a_base_run_inside_out_is_never_cleared(repo):
    base = regression_scenario(repo)
    assert run("--baseline-ref", base) == 1  # writes out/base (the audited base) and out/diff
    assert run("--baseline", "out/base") == 1  # the same base, now named as a run: it must survive
    assert Path("out/base/results.json").is_file() and Path("out/diff/diff.json").is_file()
    results = json.loads(Path("out/results.json").read_text())
    assert (results["comparison"]["base"], results["gate"]["regression_state"]) == ("run `out/base`", "fail")
