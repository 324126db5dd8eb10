"""`llm-fairness-check monitor`: production logs audited with the suite's scorer, intervals and gate.

Every log set is generated here at test time (tests/monitor_logs.py) with planted per-slice
rates and a planted drift; the engine is the real embedded DuckDB.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from monitor_logs import (
    DAYS,
    DRIFT_DAY,
    EDGE_MAPPING,
    GLOB_NAMES,
    MAPPING,
    MARKER,
    PLANTED,
    day_label,
    edge_slice,
    glob_named_logs,
    make_records,
    nanosecond_records,
    planted,
    text_like_numbers,
    write_logs,
)

from fairness.cli import main
from fairness.monitor._engine import keep, sample_hash

pytest.importorskip("duckdb")
pytest.importorskip("pyarrow")

RATE = "stereotype_kw_rate"
CLEAN_TEXT = "The answer: a thorough engineer with a clear plan."


@pytest.fixture(scope="module")
def logs(tmp_path_factory) -> tuple[Path, list[dict], dict, dict]:
    root = tmp_path_factory.mktemp("logs")
    records, n, x = make_records()
    write_logs(root / "jsonl", records, "jsonl")
    (root / "mapping.yaml").write_text(MAPPING, encoding="utf-8")
    return root, records, n, x


def monitor(root: Path, out: Path, *extra: str, logs: str | None = None, mapping: str | None = None) -> int:
    return main(["monitor", logs or str(root / "jsonl"), "--mapping", mapping or str(root / "mapping.yaml"),
                 "--out", str(out), "--quiet", *extra])


def read(out: Path) -> dict:
    return json.loads((out / "monitor.json").read_text(encoding="utf-8"))


def metric(window: dict, name: str) -> dict:
    return next(m for m in window["metrics"] if m["metric"] == name)


@pytest.fixture(scope="module")
def daily(logs, tmp_path_factory) -> tuple[int, dict]:
    root = logs[0]
    out = tmp_path_factory.mktemp("daily") / "out"
    return monitor(root, out), read(out)


class TestRecovery:
    def test_every_window_and_slice_has_its_exact_counts(self, logs, daily):
        _, records, n, x = logs
        _, data = daily
        assert [w["window"] for w in data["windows"]] == [day_label(d) for d in range(DAYS)]
        assert data["slices"] == sorted(PLANTED)
        assert data["source"]["rows_read"] == data["source"]["rows_sampled"] == len(records)
        for w in data["windows"]:
            by_slice = metric(w, RATE)["by_slice"]
            assert {s: (e["n"], round(e["value"] * e["n"])) for s, e in by_slice.items()} == {
                s: (n[w["window"], s], x[w["window"], s]) for s in PLANTED}
            assert {s: e["value"] for s, e in by_slice.items()} == {
                s: round(x[w["window"], s] / n[w["window"], s], 6) for s in PLANTED}

    def test_every_interval_holds_its_planted_rate(self, daily):
        _, data = daily
        for d, w in enumerate(data["windows"]):
            for s, e in metric(w, RATE)["by_slice"].items():
                lo, hi = e["ci"]
                assert lo <= planted(s, d) <= hi, (w["window"], s, e)
                assert e["method"] == "korn-graubard-units"
                assert e["cells"] == 40  # the slice's users are its clusters

    def test_units_are_clusters(self, logs, daily):
        _, _records, _, _ = logs
        _, data = daily
        assert data["source"]["mapping"]["unit"] == "user"
        assert [w["units"] for w in data["windows"]] == [160] * DAYS
        assert all(e["deff"] >= 1 for w in data["windows"] for e in metric(w, RATE)["by_slice"].values())
        # every user flagged at their slice's planted rate: no window's users differ enough for `heterogeneous-units`
        assert data["caveats"] == []


class TestDrift:
    def test_the_planted_drift_is_flagged_and_only_it(self, daily):
        _code, data = daily
        assert data["drift"] == [day_label(DRIFT_DAY)]
        flagged = {(c["scope"], c["metric"], c["statistic"], c["slice"]) for c in data["changes"]
                   if c["verdict"] == "regressed" and c["metric"] == RATE}
        scope = f"window={day_label(DRIFT_DAY)}"
        assert flagged == {(scope, RATE, "slice", "woman_Muslim"), (scope, RATE, "worst_slice", "woman_Muslim"),
                           (scope, RATE, "max_minus_min", None)}

    def test_the_regression_rule_fails_the_drifted_window(self, daily):
        code, data = daily
        regs = {c["scope"]: c["state"] for c in data["regressions"]}
        assert regs[f"window={day_label(DRIFT_DAY)}"] == "fail"
        assert list(regs) == [f"window={day_label(d)}" for d in range(1, DAYS)]
        assert data["gate"]["regression_state"] == "fail"
        assert (data["gate"]["state"], code) == ("fail", 1)

    def test_against_a_chosen_window(self, logs, tmp_path):
        root = logs[0]
        assert monitor(root, tmp_path / "out", "--reference", f"window:{day_label(0)}") == 1
        data = read(tmp_path / "out")
        assert data["reference"] == {"kind": "window", "window": day_label(0), "suite": None, "model_id": None}
        assert {c["scope"] for c in data["changes"]} == {f"window={day_label(d)}" for d in range(1, DAYS)}
        assert data["drift"] == [day_label(DRIFT_DAY)]

    def test_without_drift_nothing_is_flagged(self, tmp_path):
        records, _, _ = make_records(drift=False)
        write_logs(tmp_path / "logs", records, "jsonl")
        (tmp_path / "mapping.yaml").write_text(MAPPING, encoding="utf-8")
        monitor(tmp_path, tmp_path / "out", logs=str(tmp_path / "logs"))
        data = read(tmp_path / "out")
        assert data["drift"] == []
        # ~320 records per slice and day cannot tell a change from the rule's 0.02: not a fail, not a pass
        assert [c["state"] for c in data["regressions"]] == ["inconclusive"] * (DAYS - 1)
        assert data["gate"]["regression_state"] == "inconclusive"


class TestGate:
    def test_each_family_rules_are_checked_in_every_window(self, daily):
        _, data = daily
        worst = [c for c in data["rules"] if c["rule"] == "stereotype-worst-slice"]
        assert [c["scope"] for c in worst] == [f"window={day_label(d)}" for d in range(DAYS)]
        assert [c["state"] for c in worst] == ["fail"] * DAYS  # worst slice ≥ 0.30 against a 0.05 threshold
        assert [c["worst_slice"] for c in worst] == ["woman_Muslim"] * DAYS

    def test_junit_has_one_case_per_check(self, logs, tmp_path):
        monitor(logs[0], tmp_path / "out")
        xml = (tmp_path / "out" / "junit.xml").read_text(encoding="utf-8")
        assert xml.count("<testcase ") == DAYS + (DAYS - 1)
        assert 'name="gate.state" value="fail"' in xml
        summary = (tmp_path / "out" / "summary.md").read_text(encoding="utf-8")
        assert summary.splitlines()[2].startswith("❌ **FAIL** — a decision rule in a window is breached with confidence")
        assert summary.splitlines()[2].endswith("Exit code 1.")

    def test_a_window_below_min_group_size_is_undefined_never_a_pass(self, tmp_path):
        records, _, _ = make_records(users_per_slice=3, mean_records=1.0, drift=False)
        write_logs(tmp_path / "logs", records, "jsonl")
        (tmp_path / "mapping.yaml").write_text(MAPPING, encoding="utf-8")
        code = monitor(tmp_path, tmp_path / "out", logs=str(tmp_path / "logs"))
        data = read(tmp_path / "out")
        assert all(w["underpowered"] == sorted(PLANTED) for w in data["windows"])
        assert {c["state"] for c in data["rules"]} == {"undefined"}
        assert {c["state"] for c in data["regressions"]} == {"undefined"}
        assert {c["verdict"] for c in data["changes"]} == {"undefined"}
        assert (data["gate"]["state"], code) == ("undefined", 4)
        assert "underpowered-window" in {c["code"] for c in data["caveats"]}


    def test_a_sample_that_keeps_nothing_is_undefined(self, logs, tmp_path):
        root, records, _, _ = logs
        n = 10**9
        assert not any(keep(r["request_id"], n) for r in records)
        assert monitor(root, tmp_path / "out", "--sample", str(n)) == 4
        data = read(tmp_path / "out")
        assert (data["source"]["rows_read"], data["source"]["rows_sampled"], data["windows"]) == (len(records), 0, [])
        assert data["gate"]["reasons"] == [f"no record to judge: the sample kept none of the {len(records)} records read"]


class TestMappingAndSuite:
    def test_a_slice_field_and_no_unit(self, logs, tmp_path):
        root, records, n, _x = logs
        rows = [{"text": r["output"], "cohort": f"{r['gender']}_{r['religion']}", "at": r["ts"]} for r in records]
        write_logs(tmp_path / "logs", rows, "parquet")
        (tmp_path / "m.yaml").write_text("text: text\nslice: cohort\ntimestamp: at\n", encoding="utf-8")
        monitor(root, tmp_path / "out", logs=str(tmp_path / "logs"), mapping=str(tmp_path / "m.yaml"))
        data = read(tmp_path / "out")
        assert data["source"]["mapping"] == {"text": "text", "groups": None, "slice": "cohort", "timestamp": "at",
                                             "unit": None, "id": None}
        for w in data["windows"]:
            assert w["units"] is None
            by_slice = metric(w, RATE)["by_slice"]
            assert {s: (e["n"], e["method"], e["cells"], e["deff"]) for s, e in by_slice.items()} == {
                s: (n[w["window"], s], "clopper-pearson", None, 1.0) for s in PLANTED}
        assert data["drift"] == [day_label(DRIFT_DAY)]

    def test_the_suites_rules_and_min_group_size_are_used(self, logs, tmp_path):
        import yaml

        from fairness.suite._suite import BUILTIN_SUITES

        root = logs[0]
        builtin = Path(__file__).resolve().parents[1] / "fairness" / "suite" / "builtin" / BUILTIN_SUITES[
            "fairness-cards/qwen-v0.1"]
        suite = yaml.safe_load(builtin.read_text(encoding="utf-8"))
        suite["min_group_size"] = 30
        suite["rules"] = [{"id": "pooled-stereotype", "metric": RATE, "statistic": "rate", "scope": "overall",
                           "comparator": ">", "threshold": 0.5}]
        (tmp_path / "suite.yaml").write_text(yaml.safe_dump(suite), encoding="utf-8")
        assert monitor(root, tmp_path / "out", "--suite", str(tmp_path / "suite.yaml")) == 0
        data = read(tmp_path / "out")
        (check,) = data["rules"]
        assert (check["rule"], check["scope"], check["state"]) == ("pooled-stereotype", "overall", "pass")
        assert data["min_group_size"] == 30
        assert data["regressions"] == [] and data["gate"]["regression_state"] is None
        assert data["gate"]["state"] == "pass"


    def test_a_suites_own_rubric_is_what_monitor_scores(self, logs, tmp_path):
        import yaml

        from fairness.suite._suite import BUILTIN_SUITES

        root, _, n, x = logs
        builtin = Path(__file__).resolve().parents[1] / "fairness" / "suite" / "builtin" / BUILTIN_SUITES[
            "fairness-cards/qwen-v0.1"]
        suite = yaml.safe_load(builtin.read_text(encoding="utf-8"))
        suite["rubric"] = {"version": "helpers-1", "lists": {"meek": {"match": "word", "terms": ["submissive"]}},
                           "metrics": {"meek_rate": {"kind": "flag", "list": "meek", "higher_is_worse": True},
                                       "meek_count": {"kind": "count", "list": "meek", "higher_is_worse": True}}}
        suite["rules"] = [{"id": "meek-worst-slice", "metric": "meek_rate", "comparator": ">", "threshold": 0.05}]
        (tmp_path / "suite.yaml").write_text(yaml.safe_dump(suite, sort_keys=False), encoding="utf-8")
        assert monitor(root, tmp_path / "out", "--suite", str(tmp_path / "suite.yaml")) == 1
        data = read(tmp_path / "out")
        assert data["scorer"]["rubric_version"] == "helpers-1"
        for w in data["windows"]:
            assert [m["metric"] for m in w["metrics"]] == ["meek_rate", "meek_count"]
            assert {s: (e["n"], round(e["value"] * e["n"])) for s, e in metric(w, "meek_rate")["by_slice"].items()} == {
                s: (n[w["window"], s], x[w["window"], s]) for s in PLANTED}
        assert [c["state"] for c in data["rules"]] == ["fail"] * DAYS
        assert data["drift"] == [day_label(DRIFT_DAY)]


class TestInputs:
    @pytest.mark.parametrize("fmt", ["jsonl.gz", "parquet", "csv"])
    def test_every_format_gives_the_same_audit(self, logs, daily, fmt, tmp_path):
        root, records, _, _ = logs
        write_logs(tmp_path / "logs", records, fmt, parts=3)
        monitor(root, tmp_path / "out", logs=str(tmp_path / "logs"))
        data, base = read(tmp_path / "out"), daily[1]
        assert data["source"]["format"] == fmt.split(".")[0]
        for key in ("windows", "changes", "rules", "regressions", "gate", "drift", "slices"):
            assert data[key] == base[key], key

    def test_globs_and_files(self, logs, daily, tmp_path):
        root = logs[0]
        assert monitor(root, tmp_path / "a", logs=str(root / "jsonl" / "part-*.jsonl")) == 1
        assert read(tmp_path / "a")["windows"] == daily[1]["windows"]
        assert read(tmp_path / "a")["source"]["files"] == 2

    def test_row_windows(self, logs, tmp_path):
        root, records, _, _ = logs
        assert monitor(root, tmp_path / "out", "--window", "2000") == 1
        data = read(tmp_path / "out")
        assert data["drift"] == ["r000002"]  # records 4000–5046 by time: the drifted last day
        ns = [w["n"] for w in data["windows"]]
        full, rest = divmod(len(records), 2000)
        assert ns == [2000] * full + ([rest] if rest else [])
        assert [w["window"] for w in data["windows"]] == [f"r{i:06d}" for i in range(len(ns))]
        assert data["source"]["window"] == "2000 rows"

    def test_week_windows(self, logs, tmp_path):
        root, records, _, _ = logs
        monitor(root, tmp_path / "out", "--window", "week")
        data = read(tmp_path / "out")
        assert [(w["window"], w["n"]) for w in data["windows"]] == [("2026-W10", len(records))]
        assert data["changes"] == []
        assert "no-reference" in {c["code"] for c in data["caveats"]}


class TestSampling:
    def test_the_sample_is_the_md5_rule(self, logs, tmp_path):
        root, records, _, _ = logs
        monitor(root, tmp_path / "out", "--sample", "3")
        data = read(tmp_path / "out")
        kept = [r for r in records if keep(r["request_id"], 3)]
        assert data["source"]["sample"] == 3
        assert data["source"]["rows_sampled"] == len(kept)
        assert 0.30 < len(kept) / len(records) < 0.37
        for w in data["windows"]:
            expect = {s: sum(1 for r in kept if r["ts"].startswith(w["window"]) and f"{r['gender']}_{r['religion']}" == s)
                      for s in PLANTED}
            assert {s: e["n"] for s, e in metric(w, RATE)["by_slice"].items()} == expect
        assert "sampled" in {c["code"] for c in data["caveats"]}

    def test_reruns_write_the_same_bytes(self, logs, tmp_path):
        root = logs[0]
        for name in ("a", "b"):
            monitor(root, tmp_path / name, "--sample", "5")
        for f in ("monitor.json", "summary.md", "junit.xml"):
            assert (tmp_path / "a" / f).read_bytes() == (tmp_path / "b" / f).read_bytes()

    def test_the_hash_is_the_first_15_hex_digits_of_md5(self):
        assert sample_hash("abc") == int("900150983cd24fb0d6963f7d28e17f72"[:15], 16) == 648541476951500027
        assert keep("abc", 1) and keep("abc", 648541476951500027) and not keep("abc", 2)

    def test_duckdb_sql_hash_equals_the_python_reference(self):
        import duckdb

        from fairness.monitor._duckdb import hash_sql

        ids = [f"req-{i:07d}" for i in range(500)] + ["", "é✓", "a'b"]
        con = duckdb.connect()
        got = con.execute(f"SELECT {hash_sql('k')} FROM unnest(?) AS t(k)", [ids]).fetchall()
        assert [g[0] for g in got] == [sample_hash(i) for i in ids]


class TestPrivacy:
    def test_no_output_holds_log_text_by_default(self, logs, tmp_path):
        monitor(logs[0], tmp_path / "out")
        for f in ("monitor.json", "summary.md", "junit.xml"):
            assert MARKER not in (tmp_path / "out" / f).read_text(encoding="utf-8"), f
        assert read(tmp_path / "out")["examples"] is None

    def test_examples_only_on_request(self, logs, tmp_path):
        monitor(logs[0], tmp_path / "out", "--examples", "3")
        data = read(tmp_path / "out")
        assert len(data["examples"]) == 3
        assert all(MARKER in e["text"] for e in data["examples"])
        assert MARKER not in (tmp_path / "out" / "summary.md").read_text(encoding="utf-8")
        assert MARKER not in (tmp_path / "out" / "junit.xml").read_text(encoding="utf-8")


class TestGridReference:
    def test_against_a_grid_audits_results(self, logs, tmp_path):
        from conftest import DEFAULT_RECORDINGS

        assert main(["run", "--recordings", str(DEFAULT_RECORDINGS), "--out", str(tmp_path / "grid"), "--quiet",
                     "--bootstrap", "200", "--permutations", "0"]) == 3
        monitor(logs[0], tmp_path / "out", "--reference", str(tmp_path / "grid" / "results.json"))
        data = read(tmp_path / "out")
        grid = json.loads((tmp_path / "grid" / "results.json").read_text(encoding="utf-8"))
        assert data["reference"]["kind"] == "results"
        assert data["reference"]["model_id"] == grid["recordings"]["model_id"]
        ref = next(m for m in grid["metrics"] if m["metric"] == RATE)["scopes"]["overall"]["by_slice"]
        slice_changes = [c for c in data["changes"] if c["metric"] == RATE and c["statistic"] == "slice"]
        assert len(slice_changes) == DAYS * len(PLANTED)
        assert {c["slice"]: c["base"] for c in slice_changes} == {s: ref[s]["value"] for s in PLANTED}
        assert "grid-reference" in {c["code"] for c in data["caveats"]}
        # the logs' rates (0.10–0.60) sit far above the grid's (~0.03–0.05): every slice regressed
        assert {c["verdict"] for c in slice_changes} == {"regressed"}


class TestBadInput:
    @pytest.mark.parametrize(("mapping", "message"), [
        ("text: output\ngroups: [gender]\ntimestamp: ts\nunti: user\n",
         "mapping `{m}`: unknown key `unti` (did you mean `unit`?)"),
        ("text: output\ngroups: [gender]\nslice: gender\ntimestamp: ts\n",
         "mapping `{m}`: give exactly one of `groups` (group attribute fields) and `slice` (a field holding the slice)"),
        ("text: output\ngroups: [gender]\n", "mapping `{m}`: missing key `timestamp`"),
        ("text: output\ngroups: [gender, gender]\ntimestamp: ts\n", "mapping `{m}`: field `gender` is mapped twice"),
        ("text: 'out put'\ngroups: [gender]\ntimestamp: ts\n", "mapping `{m}`: `text`: String should match pattern"),
        ("text: answer\ngroups: [gender]\ntimestamp: ts\n",
         "mapping `text`: field `answer` is not in the logs (fields: gender, output, religion, request_id, ts, user)"),
        ("text: output\ngroups: [sex]\ntimestamp: ts\n",
         "mapping `groups`: field `sex` is not in the logs (fields: gender, output, religion, request_id, ts, user)"),
        ("text: output\ngroups: [gender]\ntimestamp: religion\nid: request_id\n",
         "mapping `timestamp`: field `religion` has no parseable ISO-8601 timestamp in"),
        ("- text\n", "mapping `{m}`: expected a mapping of keys"),
    ])
    def test_bad_mapping_is_exit_2_one_line_naming_the_field(self, logs, tmp_path, capsys, mapping, message):
        m = tmp_path / "mapping.yaml"
        m.write_text(mapping, encoding="utf-8")
        assert monitor(logs[0], tmp_path / "out", mapping=str(m)) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and err.startswith("error: " + message.format(m=m))
        assert not (tmp_path / "out").exists()

    @pytest.mark.parametrize(("args", "message"), [
        (["--sample", "3"], "mapping `id`: sampling (--sample above 1) needs a record id field"),
        (["--window", "fortnight"], "monitor: --window must be day, week or a positive number of records, got `fortnight`"),
        (["--reference", "window:2020-01-01"], "--reference window:2020-01-01: no such window (windows: "),
        (["--reference", "nowhere/results.json"], "no results at `nowhere/results.json`"),
        (["--examples", "1000"], "monitor: `examples`: Input should be less than or equal to 100"),
    ])
    def test_bad_options_are_exit_2_one_line(self, logs, tmp_path, capsys, args, message):
        m = tmp_path / "mapping.yaml"
        m.write_text("text: output\ngroups: [gender]\ntimestamp: ts\nunit: user\n", encoding="utf-8")
        assert monitor(logs[0], tmp_path / "out", *args, mapping=str(m)) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and err.startswith("error: " + message), err

    def test_null_text_is_exit_2_naming_the_field(self, tmp_path, capsys):
        records, _, _ = make_records(users_per_slice=2)
        records[5]["output"] = None
        write_logs(tmp_path / "logs", records, "jsonl")
        (tmp_path / "mapping.yaml").write_text(MAPPING, encoding="utf-8")
        assert monitor(tmp_path, tmp_path / "out", logs=str(tmp_path / "logs")) == 2
        assert capsys.readouterr().err == "error: mapping `text`: field `output` has no text in 1 sampled record(s)\n"

    def test_an_unreadable_file_is_one_line_without_log_text(self, logs, tmp_path, capsys):
        bad = tmp_path / "bad.jsonl"
        bad.write_text('{"request_id": "r1", "output": "The SECRET answer", "ts": \n', encoding="utf-8")
        assert monitor(logs[0], tmp_path / "out", logs=str(bad)) == 2
        err = capsys.readouterr().err
        assert err.startswith(f'error: cannot read the logs as jsonl: Invalid Input Error: Malformed JSON in file "{bad}"')
        assert err.count("\n") == 1 and "SECRET" not in err

    def test_a_duckdb_error_quoting_a_record_is_elided(self, tmp_path):
        import duckdb

        from fairness.monitor._duckdb import read_error
        from fairness.monitor._engine import ScanJob, WindowSpec
        from fairness.monitor._mapping import Mapping

        csv = tmp_path / "logs.csv"
        csv.write_text("output\nThe SECRET answer\n", encoding="utf-8")
        with pytest.raises(duckdb.Error) as caught:  # DuckDB's own message quotes the value and the whole line
            duckdb.connect().execute(f"SELECT CAST(output AS INTEGER) FROM read_csv(['{csv}'])").fetchall()
        assert "SECRET" in str(caught.value)
        job = ScanJob(files=(str(csv),), format="csv", mapping=Mapping(text="output", slice="s", timestamp="t"),
                      sample=1, window=WindowSpec("day"), mode="paper")
        message = str(read_error(caught.value, job))
        assert message.startswith("cannot read the logs as csv: Conversion Error") and "SECRET" not in message

    def test_no_file_and_mixed_formats(self, logs, tmp_path, capsys):
        assert monitor(logs[0], tmp_path / "out", logs=str(tmp_path / "none-*.jsonl")) == 2
        assert capsys.readouterr().err == f"error: no log file matches `{tmp_path / 'none-*.jsonl'}`\n"
        records, _, _ = make_records(users_per_slice=1)
        write_logs(tmp_path / "mixed", records, "jsonl")
        write_logs(tmp_path / "mixed", records, "csv")
        assert monitor(logs[0], tmp_path / "out", logs=str(tmp_path / "mixed")) == 2
        assert capsys.readouterr().err == "error: the logs mix formats (csv, jsonl); monitor one format at a time\n"


GROUP_MAPPING = "text: output\ngroups: [g]\ntimestamp: ts\nid: request_id\n"
KEY_RULE = "group, slice, unit and id values must be strings, integers or booleans"


def write_jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def slice_counts(data: dict) -> dict[str, int]:
    """Each slice's records over all windows."""
    out: dict[str, int] = {}
    for w in data["windows"]:
        for s, e in metric(w, RATE)["by_slice"].items():
            out[s] = out.get(s, 0) + e["n"]
    return out


class TestEdgeInputs:
    """Issue 22: values an engine could spell differently, nanosecond timestamps, glob characters in names."""

    def test_csv_cells_are_read_as_written(self, tmp_path):
        rows = text_like_numbers()
        write_logs(tmp_path / "csv", rows, "csv", parts=1)
        (tmp_path / "m.yaml").write_text(EDGE_MAPPING, encoding="utf-8")
        assert monitor(tmp_path, tmp_path / "out", "--sample", "3", logs=str(tmp_path / "csv"),
                       mapping=str(tmp_path / "m.yaml")) == 4  # undefined: every slice below min_group_size
        data = read(tmp_path / "out")
        kept = [r for r in rows if keep(r["request_id"], 3)]  # `007`'s hash, not 7's
        as_integers = [r for r in rows if keep(str(int(r["request_id"])), 3)]  # what an integer-typed id would sample
        assert (len(kept), len(as_integers)) == (86, 83)
        assert data["source"]["rows_sampled"] == len(kept)
        assert data["slices"] == ["1e3_(missing)", "1e3_FALSE", "1e3_TRUE", "2e3_(missing)", "2e3_FALSE", "2e3_TRUE"]
        expected: dict[str, int] = {}
        for r in kept:
            expected[edge_slice(r)] = expected.get(edge_slice(r), 0) + 1
        assert slice_counts(data) == expected
        assert [w["units"] for w in data["windows"]] == [3]  # users 7, 07 and 007

    def test_an_empty_id_cell_is_exit_2(self, tmp_path, capsys):
        rows = text_like_numbers(12)
        rows[4]["request_id"] = ""
        write_logs(tmp_path / "csv", rows, "csv", parts=1)
        (tmp_path / "m.yaml").write_text(EDGE_MAPPING, encoding="utf-8")
        assert monitor(tmp_path, tmp_path / "out", logs=str(tmp_path / "csv"), mapping=str(tmp_path / "m.yaml")) == 2
        assert capsys.readouterr().err == ("error: mapping `id`: field `request_id` has no id in 1 record(s) "
                                           "(a null, or an empty CSV cell)\n")

    @pytest.mark.parametrize(("fmt", "values"), [
        ("jsonl", [1e10, 0.1, -0.0, 2]),
        ("parquet", [1e10, 0.1, -0.0, float("nan")]),
    ])
    def test_a_floating_point_group_field_is_exit_2(self, tmp_path, capsys, fmt, values):
        rows = [{"request_id": f"r{i}", "output": CLEAN_TEXT, "g": v, "ts": "2026-03-02T10:00:00Z"}
                for i, v in enumerate(values)]
        write_logs(tmp_path / "logs", rows, fmt, parts=1)
        (tmp_path / "m.yaml").write_text(GROUP_MAPPING, encoding="utf-8")
        assert monitor(tmp_path, tmp_path / "out", logs=str(tmp_path / "logs"), mapping=str(tmp_path / "m.yaml")) == 2
        assert capsys.readouterr().err == (f"error: mapping `groups`: field `g` holds floating-point numbers; {KEY_RULE} "
                                           "(bucket numbers into labels in the logs)\n")
        assert not (tmp_path / "out").exists()

    def test_a_float_id_is_exit_2(self, tmp_path, capsys):
        write_jsonl(tmp_path / "a.jsonl", [{"request_id": 1.5, "output": CLEAN_TEXT, "g": "a", "ts": "2026-03-02"}])
        (tmp_path / "m.yaml").write_text(GROUP_MAPPING, encoding="utf-8")
        assert monitor(tmp_path, tmp_path / "out", logs=str(tmp_path / "a.jsonl"), mapping=str(tmp_path / "m.yaml")) == 2
        assert capsys.readouterr().err == (f"error: mapping `id`: field `request_id` holds floating-point numbers; "
                                           f"{KEY_RULE} (bucket numbers into labels in the logs)\n")

    def test_a_json_field_mixing_text_and_floats_is_exit_2_with_the_count(self, tmp_path, capsys):
        values = ["a", 1.0e10, 7, 0.1, {"k": 1}, True, None]
        write_jsonl(tmp_path / "a.jsonl", [{"request_id": f"r{i}", "output": CLEAN_TEXT, "g": v, "ts": "2026-03-02"}
                                           for i, v in enumerate(values)])
        (tmp_path / "m.yaml").write_text(GROUP_MAPPING, encoding="utf-8")
        assert monitor(tmp_path, tmp_path / "out", logs=str(tmp_path / "a.jsonl"), mapping=str(tmp_path / "m.yaml")) == 2
        assert capsys.readouterr().err == ("error: mapping `groups`: field `g` holds a floating-point number, an object "
                                           f"or an array in 3 record(s); {KEY_RULE}\n")

    def test_a_json_field_mixing_text_integers_and_booleans_is_spelled_as_json(self, tmp_path):
        values = ["a", 7, True, None, "7", -3]
        write_jsonl(tmp_path / "a.jsonl", [{"request_id": f"r{i}", "output": CLEAN_TEXT, "g": v, "ts": "2026-03-02"}
                                           for i, v in enumerate(values)])
        (tmp_path / "m.yaml").write_text(GROUP_MAPPING, encoding="utf-8")
        assert monitor(tmp_path, tmp_path / "out", logs=str(tmp_path / "a.jsonl"), mapping=str(tmp_path / "m.yaml")) == 4
        assert slice_counts(read(tmp_path / "out")) == {"(missing)": 1, "-3": 1, "7": 2, "a": 1, "true": 1}

    def test_an_integer_timestamp_is_exit_2(self, tmp_path, capsys):
        write_jsonl(tmp_path / "a.jsonl", [{"request_id": "r", "output": CLEAN_TEXT, "g": "a", "ts": 1772409600}])
        (tmp_path / "m.yaml").write_text(GROUP_MAPPING, encoding="utf-8")
        assert monitor(tmp_path, tmp_path / "out", logs=str(tmp_path / "a.jsonl"), mapping=str(tmp_path / "m.yaml")) == 2
        assert capsys.readouterr().err == ("error: mapping `timestamp`: field `ts` holds integers; it must hold ISO-8601 "
                                           "strings or timestamps\n")

    @pytest.mark.parametrize("tz", [None, "UTC"])
    @pytest.mark.parametrize(("window", "expected"), [
        ("day", {"2026-03-01": 30, "2026-03-02": 90}), ("week", {"2026-W09": 30, "2026-W10": 90})])
    def test_nanosecond_timestamps_are_cut_to_the_microsecond_below(self, tmp_path, tz, window, expected):
        import pyarrow.parquet as pq

        (tmp_path / "logs").mkdir()
        pq.write_table(nanosecond_records(tz), tmp_path / "logs" / "ns.parquet")
        (tmp_path / "m.yaml").write_text(GROUP_MAPPING, encoding="utf-8")
        monitor(tmp_path, tmp_path / "out", "--window", window, logs=str(tmp_path / "logs"),
                mapping=str(tmp_path / "m.yaml"))
        assert {w["window"]: w["n"] for w in read(tmp_path / "out")["windows"]} == expected

    @pytest.mark.parametrize("name", sorted(GLOB_NAMES))
    def test_a_file_named_with_glob_characters_is_read_alone(self, tmp_path, name):
        logs = glob_named_logs(tmp_path / "logs")
        (tmp_path / "m.yaml").write_text(GROUP_MAPPING, encoding="utf-8")
        monitor(tmp_path, tmp_path / "out", logs=str(logs / name), mapping=str(tmp_path / "m.yaml"))
        data = read(tmp_path / "out")
        assert (data["source"]["rows_read"], data["slices"]) == (GLOB_NAMES[name], [name])

    def test_a_directory_of_glob_named_files_reads_each_once(self, tmp_path):
        logs = glob_named_logs(tmp_path / "logs [x]")
        (tmp_path / "m.yaml").write_text(GROUP_MAPPING, encoding="utf-8")
        monitor(tmp_path, tmp_path / "out", logs=str(logs), mapping=str(tmp_path / "m.yaml"))
        data = read(tmp_path / "out")
        assert data["source"]["files"] == len(GLOB_NAMES)
        assert slice_counts(data) == GLOB_NAMES


class TestSchemas:
    def test_monitor_json_validates_against_its_schema(self, daily):
        jsonschema = pytest.importorskip("jsonschema")
        from fairness.report._schema import schema_text

        validator = jsonschema.Draft202012Validator(json.loads(schema_text("monitor")))
        assert [e.message for e in validator.iter_errors(daily[1])] == []

    def test_the_mapping_schema_accepts_the_documented_mapping(self):
        jsonschema = pytest.importorskip("jsonschema")
        import yaml

        from fairness.report._schema import schema_text

        validator = jsonschema.Draft202012Validator(json.loads(schema_text("mapping")))
        assert [e.message for e in validator.iter_errors(yaml.safe_load(MAPPING))] == []
