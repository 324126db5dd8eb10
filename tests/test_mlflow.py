"""`--mlflow`: each run and diff is logged to a real `mlflow server` (SQLite backend) started here on
127.0.0.1 and read back through MLflow's own client; a server that is down or answers garbage is one
warning line, the audit's own exit code, and every output written."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

import pytest
from conftest import REPO, free_port, mlflow_client
from local_server import serve, stop

from fairness.audit._results import FairnessRun
from fairness.cli import main
from fairness.tracking import metric_key, run_payload

RUN = ["run", "--suite", "fairness-cards/qwen-v0.1",
       "--recordings", "recordings/fairness-cards/qwen-v0.1/SmolLM2-135M-Instruct-Q4_1", "--permutations", "0"]
SHA = "0123456789abcdef0123456789abcdef01234567"
OUTPUTS = ["card.html", "card.md", "card.yaml", "results.json", "summary.md", "transcripts.jsonl"]
LOGGED = re.compile(r"^mlflow: logged run ([0-9a-f]{32}) to experiment 'llm-fairness-check' at http://127\.0\.0\.1:\d+$")


def _cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """The console script in a fresh process, in the repository, as a pull request's CI job would run it."""
    clean = {k: v for k, v in os.environ.items()
             if not k.startswith(("GITHUB_", "MLFLOW_")) and k != "FAIRNESS_MAX_GRID_ROWS"}
    full = {**clean, "GITHUB_SHA": SHA, "GITHUB_REF": "refs/pull/7/merge", **(env or {})}
    return subprocess.run([sys.executable, "-m", "fairness.cli", *args], cwd=REPO, capture_output=True, text=True,
                          env=full, timeout=600, check=False)


def _logged_run_id(stderr: str) -> str:
    lines = [ln for ln in stderr.splitlines() if ln.startswith("mlflow:")]
    assert len(lines) == 1, stderr
    match = LOGGED.match(lines[0])
    assert match, lines[0]
    return match.group(1)


def test_metric_keys_are_valid_and_deterministic():
    assert metric_key("stereotype_kw_rate", "family=F1", "slice", "woman_Muslim") == \
        "stereotype_kw_rate.family_F1.slice.woman_Muslim"
    assert metric_key("rule", "x y", "family=F1,regime=greedy") == "rule.x_y.family_F1_regime_greedy"
    assert metric_key("a/b:c", "é") == "a_b_c._"


def test_a_run_is_logged_with_its_params_metrics_tags_and_artifacts(mlflow_server, tmp_path):
    out = tmp_path / "out"
    proc = _cli(*RUN, "--out", str(out), "--quiet", "--mlflow", mlflow_server)
    assert proc.returncode == 3, proc.stderr
    assert len(proc.stderr.splitlines()) == 1
    run_id = _logged_run_id(proc.stderr)
    results = json.loads((out / "results.json").read_text())
    run = FairnessRun.model_validate(results)

    client = mlflow_client(mlflow_server)
    logged = client.get_run(run_id)
    assert logged.info.status == "FINISHED"
    assert logged.info.run_name == "run fairness-cards/qwen-v0.1 SmolLM2-135M-Instruct-Q4_1"
    assert logged.data.params == {
        "command": "run",
        "suite": "fairness-cards/qwen-v0.1",
        "suite_version": "0.1.0",
        "suite_hash": "5160d5663ca50682893b5a0180b76cd98a1737bd848d6b4b1869f5a063bc7bc8",
        "model_id": "SmolLM2-135M-Instruct-Q4_1",
        "recordings_manifest_sha256": results["recordings"]["manifest_sha256"],
        "rubric_version": "paper-2026-03",
        "scorer_mode": "paper",
        "alpha": "0.05",
        "fail_on": "state",
        "gate_on": "interval",
        "min_group_size": "5",
        "seed": "20260325",
        "n_rows": str(results["n_rows"]),
        "tool_version": results["tool"]["version"],
    }
    tags = {k: v for k, v in logged.data.tags.items() if not k.startswith("mlflow.") or k == "mlflow.source.git.commit"}
    assert tags == {"verdict": "inconclusive", "head_state": "inconclusive", "regression_state": "none",
                    "passed": "false", "tool": f"llm-fairness-check {results['tool']['version']}",
                    "git_sha": SHA, "mlflow.source.git.commit": SHA, "pr_number": "7"}

    metrics = logged.data.metrics
    assert metrics == run_payload(run, {}).metrics  # every value, exactly as results.json holds it
    assert metrics["verdict_code"] == 3.0 == results["gate"]["exit_code"]
    assert (metrics["rule_checks.pass"], metrics["rule_checks.fail"], metrics["rule_checks.inconclusive"],
            metrics["rule_checks.undefined"], metrics["rule_checks.fired"]) == (0.0, 0.0, 4.0, 0.0, 2.0)
    f2 = next(m for m in results["metrics"] if m["metric"] == "stereotype_kw_rate")["scopes"]["family=F2"]
    assert metrics["stereotype_kw_rate.family_F2.worst_slice"] == f2["worst_slice"]["value"] == 0.095
    assert metrics["stereotype_kw_rate.family_F2.worst_slice.ci_low"] == f2["worst_slice"]["ci"][0]
    assert metrics["stereotype_kw_rate.family_F2.gap.ci_high"] == f2["max_minus_min"]["ci"][1]
    assert metrics["stereotype_kw_rate.family_F2.slice.woman_Muslim"] == f2["by_slice"]["woman_Muslim"]["value"]
    assert metrics["stereotype_kw_rate.family_F2.slice.woman_Muslim.ci_high"] == f2["by_slice"]["woman_Muslim"]["ci"][1]
    check = next(c for c in results["rules"] if c["scope"] == "family=F2")
    assert metrics["rule.stereotype-worst-slice.family_F2.ci_low"] == check["interval"][0]

    assert sorted(a.path for a in client.list_artifacts(run_id)) == ["card.html", "card.yaml", "results.json",
                                                                     "summary.md"]
    back = Path(client.download_artifacts(run_id, "results.json", str(tmp_path)))
    assert back.read_bytes() == (out / "results.json").read_bytes()


def test_a_diff_is_logged_with_its_regression_checks(mlflow_server, tmp_path):
    base = tmp_path / "base"
    assert _cli(*RUN, "--out", str(base), "--quiet").returncode == 3
    proc = _cli("diff", str(base), str(base), "--out", str(tmp_path / "d"), "--bootstrap", "200",
                "--mlflow", mlflow_server)
    diff = json.loads((tmp_path / "d" / "diff.json").read_text())
    assert proc.returncode == diff["exit_code"]
    run_id = _logged_run_id(proc.stderr)
    client = mlflow_client(mlflow_server)
    logged = client.get_run(run_id)
    assert logged.data.params["command"] == "diff"
    assert logged.data.params["paired"] == "true"
    assert logged.data.params["bootstrap"] == "200"
    assert logged.data.tags["verdict"] == diff["state"]
    assert logged.data.tags["head_state"] == logged.data.tags["base_state"] == "inconclusive"
    assert logged.data.metrics["verdict_code"] == float(diff["exit_code"])
    assert logged.data.metrics["regression_checks.fail"] == 0.0
    for c in diff["checks"]:
        assert logged.data.metrics[metric_key("regression", c["rule"], c["scope"], "change")] == c["change"] == 0.0
    assert sorted(a.path for a in client.list_artifacts(run_id)) == ["diff.json", "diff.md"]
    back = Path(client.download_artifacts(run_id, "diff.json", str(tmp_path)))
    assert back.read_text() == (tmp_path / "d" / "diff.json").read_text()


class _Html(BaseHTTPRequestHandler):
    """A web server that is not MLflow: every request gets an HTML page."""

    def _page(self) -> None:
        body = b"<html><body><h1>Welcome to nginx!</h1></body></html>\n"
        self.send_response(200)
        self.send_header("content-type", "text/html")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_POST = _page

    def log_message(self, *args: Any) -> None:
        pass


def _assert_warned_and_written(proc: subprocess.CompletedProcess[str], uri: str, out: Path) -> None:
    assert proc.returncode == 3  # the audit's own exit code
    lines = proc.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"warning: could not log to MLflow at {uri}: "), proc.stderr
    assert lines[0].endswith(" (the outputs are written)")
    assert sorted(p.name for p in out.iterdir()) == OUTPUTS
    assert proc.stdout.startswith("INCONCLUSIVE")


def test_a_server_that_is_down_is_one_warning_and_the_audit_exit_code(tmp_path):
    pytest.importorskip("mlflow")
    uri = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    out = tmp_path / "out"
    start = time.monotonic()
    proc = _cli(*RUN, "--out", str(out), "--quiet", "--mlflow", uri)
    _assert_warned_and_written(proc, uri, out)
    assert time.monotonic() - start < 60  # bounded retries, not MLflow's minutes of back-off


def test_a_server_answering_html_is_one_warning_and_the_audit_exit_code(tmp_path):
    pytest.importorskip("mlflow")
    server, uri = serve(_Html)
    try:
        out = tmp_path / "out"
        proc = _cli(*RUN, "--out", str(out), "--quiet", "--mlflow", uri)
    finally:
        stop(server)
    _assert_warned_and_written(proc, uri, out)


def test_a_missing_mlflow_package_is_exit_2_naming_the_extra_before_any_work(tmp_path, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "mlflow", None)  # what `import mlflow` sees when it is not installed
    monkeypatch.chdir(REPO)
    out = tmp_path / "out"
    assert main([*RUN, "--out", str(out), "--mlflow", "http://127.0.0.1:9"]) == 2
    captured = capsys.readouterr()
    assert captured.err == ("error: `--mlflow` needs the mlflow package: "
                            "pip install 'llm-fairness-check[mlflow]'\n")
    assert captured.out == ""
    assert not out.exists()


def test_an_empty_tracking_uri_is_exit_2(tmp_path, capsys):
    assert main(["diff", str(tmp_path), str(tmp_path), "--mlflow", ""]) == 2
    assert capsys.readouterr().err == "error: `--mlflow` needs a tracking URI, e.g. http://127.0.0.1:5000\n"


def test_the_action_input_logs_the_run_after_its_outputs(mlflow_server, tmp_path, monkeypatch):
    import io

    from fairness.action import _main as _action

    monkeypatch.chdir(tmp_path)
    env = {"FAIRNESS_RECORDINGS": str(REPO / RUN[4]), "FAIRNESS_OUT_DIR": "fairness-out", "FAIRNESS_PERMUTATIONS": "0",
           "FAIRNESS_UPLOAD_ARTIFACT": "false", "FAIRNESS_MLFLOW_TRACKING_URI": mlflow_server,
           "GITHUB_SHA": SHA, "GITHUB_REF": "refs/pull/8/merge"}
    out = io.StringIO()
    assert _action.main(env, out) == 0  # the Action's policy: inconclusive is a warning and the step passes
    logged = [ln for ln in out.getvalue().splitlines() if ln.startswith("mlflow:")]
    assert len(logged) == 1
    match = LOGGED.match(logged[0])
    assert match, logged
    run = mlflow_client(mlflow_server).get_run(match.group(1))
    assert (run.data.tags["verdict"], run.data.tags["pr_number"], run.data.params["fail_on"]) == (
        "inconclusive", "8", "fail")
    assert run.data.metrics["verdict_code"] == 0.0


def test_the_action_refuses_the_input_without_mlflow_before_any_work(tmp_path, monkeypatch):
    import io

    from fairness.action import _main as _action

    monkeypatch.setitem(sys.modules, "mlflow", None)
    monkeypatch.chdir(tmp_path)
    out = io.StringIO()
    env = {"FAIRNESS_RECORDINGS": str(REPO / RUN[4]), "FAIRNESS_MLFLOW_TRACKING_URI": "http://127.0.0.1:9"}
    assert _action.main(env, out) == 2
    assert ("::error title=llm-fairness-check%3A bad input::input `mlflow-tracking-uri` needs the mlflow package: "
            "pip install 'llm-fairness-check[mlflow]'") in out.getvalue().splitlines()
    assert not (tmp_path / "fairness-out").exists()
