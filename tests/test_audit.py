"""The main job: recordings with known counts → the paper's table, decisions, card and summary."""

from __future__ import annotations

import json

import pytest
import yaml
from conftest import write_recording_set
from paper_grid import EXPECTED_TABLE, paper_text_for

from fairness.audit._options import AuditOptions
from fairness.cli import main
from fairness.pipeline._options import RunOptions
from fairness.pipeline._run import OUTPUTS, run_audit
from fairness.report._render import cap_summary


@pytest.fixture(scope="module")
def paper_run(tmp_path_factory):
    from fairness import load_suite

    suite = load_suite("fairness-cards/qwen-v0.1")
    root = tmp_path_factory.mktemp("paper")
    rec = write_recording_set(root / "rec", suite, paper_text_for(suite.expand()))
    result = run_audit(RunOptions(recordings=rec, out=root / "out", audit=AuditOptions(bootstrap=400, permutations=400)))
    return result


class TestPaperTable:
    def test_reproduces_the_example_table_exactly(self, paper_run):
        got = [(f.family, f.worst_slice_stereotype, f.worst_slice_pilot_harm, f.refusal_delta, f.decision) for f in paper_run.run.families]
        assert got == EXPECTED_TABLE

    def test_worst_slice_names_and_counts(self, paper_run):
        m = next(m for m in paper_run.run.metrics if m.metric == "stereotype_kw_rate")
        f1 = m.scopes["family=F1"]
        assert f1.worst_slice.slice == "man_Christian" and f1.by_slice["man_Christian"].n == 200
        assert f1.by_slice["man_Christian"].value == pytest.approx(13 / 200)
        assert m.scopes["family=F2"].worst_slice.slice == "woman_Muslim"
        assert m.scopes["family=F2"].max_minus_min.value == pytest.approx((46 - 10) / 200)
        assert m.scopes["overall"].by_slice["woman_Muslim"].n == 800

    def test_rates_by_regime_occupation_and_combinations(self, paper_run):
        m = next(m for m in paper_run.run.metrics if m.metric == "stereotype_kw_rate")
        assert {"regime=low-entropy", "occupation=CEO", "family=F2,regime=high-entropy", "family=F1,regime=low-entropy,occupation=nurse"} <= set(m.scopes)
        assert m.scopes["family=F2,regime=high-entropy"].by_slice["woman_Muslim"].n == 100

    def test_rule_checks_and_gate(self, paper_run):
        run = paper_run.run
        fired = {c.scope: c.fired for c in run.rules}
        assert fired == {"family=F1": True, "family=F2": True, "family=F3": True, "family=F4": False}
        # the paper flags F1-F3 at the point; with intervals F2 and F3 are settled (fail), F1 and F4 inconclusive
        states = {c.scope: c.state for c in run.rules}
        assert states == {"family=F1": "inconclusive", "family=F2": "fail", "family=F3": "fail", "family=F4": "inconclusive"}
        assert run.gate.state == "fail" and run.gate.exit_code == 1
        assert all(c.settle is not None for c in run.rules if c.state == "inconclusive")
        assert next(c for c in run.rules if c.scope == "family=F2").settle is None


class TestOutputs:
    def test_all_outputs_written(self, paper_run):
        assert sorted(p.name for p in paper_run.out.iterdir()) == sorted(OUTPUTS)

    def test_results_json_is_versioned_and_complete(self, paper_run):
        data = json.loads((paper_run.out / "results.json").read_text())
        assert data["schema_version"] == "2.2.0"
        assert data["suite"]["hash"] and data["recordings"]["manifest_sha256"]
        assert data["scorer"]["mode"] == "paper" and data["tool"]["version"]
        st = next(m for m in data["metrics"] if m["metric"] == "stereotype_kw_rate")
        est = st["scopes"]["family=F2"]["worst_slice"]
        assert est["value"] == 0.23 and len(est["ci"]) == 2 and est["ci"][0] <= 0.23 <= est["ci"][1]
        assert st["scopes"]["family=F2"]["by_slice"]["woman_Muslim"]["n"] == 200

    def test_transcripts_carry_coordinates_and_scores(self, paper_run):
        lines = (paper_run.out / "transcripts.jsonl").read_text().splitlines()
        assert len(lines) == 3200
        first = json.loads(lines[0])
        assert first["row_id"] == "F1.p1.CEO.man_Christian.low-entropy.s1"
        assert first["scores"]["stereotype"] == 1 and first["slice"] == {"gender": "man", "religion": "Christian"}

    def test_summary_starts_with_the_verdict_and_has_the_table_and_chart(self, paper_run):
        text = (paper_run.out / "summary.md").read_text()
        lines = [ln for ln in text.splitlines() if ln.strip()]
        assert lines[1].split("**")[1] == "FAIL"
        # the count says what it counts: F1-F3 are beyond the threshold at the point, F2 and F3 with confidence
        assert lines[1].endswith("— a decision rule is breached with confidence (3/4 rule checks beyond the threshold "
                                 "at the point estimate; 2 with confidence). Exit code 1.")
        assert "| F2 | 0.23" in text and "xychart-beta" in text and "Verdict stability" in text
        assert "**Estimand** — grid estimand" in text
        assert "### How many more seeds would settle it" in text and "| stereotype-worst-slice | family=F1 |" in text
        assert len(text.encode()) < 1024 * 1024

    def test_results_and_card_name_the_estimand_and_what_would_settle_it(self, paper_run):
        data = json.loads((paper_run.out / "results.json").read_text())
        assert data["estimand"].startswith("grid estimand") and data["tests"]["estimand"] == data["estimand"]
        f1 = next(c for c in data["rules"] if c["scope"] == "family=F1")
        assert f1["state"] == "inconclusive" and f1["settle"]["toward"] == "fail" and f1["settle"]["cells"] == 40
        card = yaml.safe_load((paper_run.out / "card.yaml").read_text())
        assert card["audit_result"]["estimand"] == data["estimand"]
        assert [x["scope"] for x in card["audit_result"]["to_settle"]] == ["family=F1", "family=F4"]
        counts = "3/4 rule checks beyond the threshold at the point estimate; 2 with confidence"
        assert card["audit_result"]["rule_checks"] == counts
        assert f"**Gate:** ❌ `fail` (exit 1; {counts})" in (paper_run.out / "card.md").read_text()

    def test_card_validates_against_the_published_schemas(self, paper_run, shared_dir):
        jsonschema = pytest.importorskip("jsonschema")
        card = yaml.safe_load((paper_run.out / "card.yaml").read_text())
        for name in ("core.yaml", "llm.yaml"):
            schema = yaml.safe_load((shared_dir / "reference" / "fairness-card-schema" / name).read_text())
            jsonschema.validate(card, schema, format_checker=jsonschema.FormatChecker())
        assert card["example_result"]["rows"] == [list(r) for r in EXPECTED_TABLE]
        assert card["prompt_suite"]["total_prompts"] == 320

    def test_example_card_from_the_paper_also_validates(self, shared_dir):
        jsonschema = pytest.importorskip("jsonschema")
        ex = yaml.safe_load((shared_dir / "reference" / "fairness-card-schema" / "example-card-qwen2.5-7b-instruct.yaml").read_text())
        for name in ("core.yaml", "llm.yaml"):
            schema = yaml.safe_load((shared_dir / "reference" / "fairness-card-schema" / name).read_text())
            validator = jsonschema.validators.validator_for(schema)(schema)
            assert [e.message for e in validator.iter_errors(ex)] == []

    def test_card_md_renders_the_result(self, paper_run):
        md = (paper_run.out / "card.md").read_text()
        assert md.startswith("# Fairness Card — synthetic-model") and "| F4 | 0.04 | 0.04 | 0.0 | not-flagged |" in md


def test_summary_cap_cuts_at_a_line_and_says_so():
    text = "\n".join("x" * 100 for _ in range(20000))
    capped = cap_summary(text, cap=50_000)
    assert len(capped.encode()) <= 50_000 and "truncated" in capped


class TestBadInput:
    def test_malformed_rule_exits_2(self, tmp_path, capsys):
        from importlib import resources

        raw = yaml.safe_load(resources.files("fairness.suite").joinpath("builtin/qwen-v0.1.yaml").read_text())
        raw["rules"][0]["comparator"] = "~"
        p = tmp_path / "s.yaml"
        p.write_text(yaml.safe_dump(raw))
        assert main(["run", "--suite", str(p), "--recordings", str(tmp_path), "--out", str(tmp_path / "o")]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "rules.0.comparator" in err

    def test_unknown_suite(self, tmp_path, capsys):
        assert main(["run", "--suite", "nope", "--recordings", str(tmp_path), "--out", str(tmp_path / "o")]) == 2
        assert "unknown suite `nope`" in capsys.readouterr().err

    def test_recordings_dir_without_manifest(self, tmp_path, capsys):
        assert main(["run", "--recordings", str(tmp_path), "--out", str(tmp_path / "o")]) == 2
        assert "has no manifest.json" in capsys.readouterr().err

    def test_existing_outputs_survive_bad_input(self, paper_run, tmp_path, capsys):
        before = (paper_run.out / "results.json").read_bytes()
        assert main(["run", "--recordings", str(tmp_path / "missing"), "--out", str(paper_run.out)]) == 2
        assert (paper_run.out / "results.json").read_bytes() == before

    @pytest.mark.parametrize("flag, value, message", [
        ("--bootstrap", "0", "`bootstrap` must be an integer in [1, 100000], got 0"),
        ("--min-group-size", "0", "`min_group_size` must be an integer ≥ 1, got 0"),
        ("--permutations", "-1", "`permutations` must be an integer in [0, 100000], got -1"),
        ("--threshold", "nan", "`threshold` must be a finite number, got nan"),
    ])
    def test_bad_numbers(self, tmp_path, capsys, flag, value, message):
        assert main(["run", "--recordings", str(tmp_path), "--out", str(tmp_path / "o"), flag, value]) == 2
        assert capsys.readouterr().err == f"error: {message}\n"


class TestIncompleteRecordings:
    @pytest.fixture()
    def partial(self, tmp_path, default_suite):
        cases = [c for c in default_suite.expand() if c.family in ("F1", "F2")]
        return write_recording_set(tmp_path / "rec", default_suite, lambda c: "A capable professional.", cases=cases)

    def test_missing_rows_are_bad_input_without_the_opt_in(self, partial, tmp_path, capsys):
        assert main(["run", "--recordings", str(partial), "--out", str(tmp_path / "o")]) == 2
        assert "no recording for row `F3.p1" in capsys.readouterr().err

    def test_opt_in_audits_the_recorded_rows_and_never_passes_cleanly(self, partial, tmp_path, capsys):
        code = main(["run", "--recordings", str(partial), "--out", str(tmp_path / "o"), "--allow-incomplete",
                     "--bootstrap", "200", "--permutations", "0", "--evaluators", "none"])
        data = json.loads((tmp_path / "o" / "results.json").read_text())
        assert data["n_rows"] == 1600
        states = {c["scope"]: c["state"] for c in data["rules"]}
        assert states["family=F1"] == "pass" and states["family=F3"] == "undefined"
        assert (data["gate"]["state"], code) == ("undefined", 4)
        assert any(c["code"] == "incomplete-recordings" for c in data["caveats"])
        assert [f["decision"] for f in data["families"]] == ["not-flagged", "not-flagged", "undefined", "undefined"]
