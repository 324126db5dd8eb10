"""`llm-fairness-check init --monitor`: the scheduled monitor workflow and its mapping file."""

from __future__ import annotations

import subprocess

import pytest
import yaml
from test_init import PROVIDERS, assert_lint_clean, init
from test_workflow_security import pip_installs, problems_of, scripts_of_job

from fairness.cli import _init
from fairness.monitor._mapping import load_mapping

MONITOR = ["--monitor", "--monitor-logs", "/var/log/llm/*.jsonl.gz"]


def monitor_workflow(root) -> dict:
    return yaml.safe_load((root / _init.MONITOR_WORKFLOW).read_text(encoding="utf-8"))


def test_the_monitor_workflow_runs_on_a_schedule_on_the_logs_runner(tmp_path):
    assert init(tmp_path, *PROVIDERS["openai"], *MONITOR) == 0
    wf = monitor_workflow(tmp_path)
    assert wf[True] == {"workflow_dispatch": None, "schedule": [{"cron": "23 5 * * *"}]}
    assert wf["permissions"] == {}
    job = wf["jobs"]["monitor"]
    assert job["runs-on"] == ["self-hosted", "fairness-logs"]
    assert job["permissions"] == {"contents": "read"}
    assert job["env"] == {"SUITE": "fairness-cards/qwen-v0.1", "LOGS": "/var/log/llm/*.jsonl.gz",
                          "MAPPING": "fairness-check/monitor-mapping.yaml", "SAMPLE": "1", "WINDOW": "day"}
    text = (tmp_path / _init.MONITOR_WORKFLOW).read_text(encoding="utf-8")
    body = text.split("\nname:", 1)[1]
    assert "secrets." not in body and "--examples" not in body  # no secret, no log text
    run = next(s["run"] for s in job["steps"] if s.get("name") == "Audit the logs")
    assert 'llm-fairness-check monitor "$LOGS" --mapping "$MAPPING" --suite "$SUITE"' in run
    assert (tmp_path / ".github" / "actionlint.yaml").read_text(encoding="utf-8").endswith("  labels:\n    - fairness-logs\n")


def test_every_install_is_hash_pinned_from_the_monitor_lock(tmp_path):
    assert init(tmp_path, *PROVIDERS["openai"], *MONITOR) == 0
    job = monitor_workflow(tmp_path)["jobs"]["monitor"]
    installs = [(i, s) for s in scripts_of_job(job) for i in pip_installs(s)]
    assert len(installs) == 2
    for install, script in installs:
        assert problems_of(install, script) == [], install
    assert "./.llm-fairness-check/requirements/monitor.lock" in installs[0][0]


def test_the_mapping_file_is_a_valid_mapping_and_never_overwritten(tmp_path, capsys):
    assert init(tmp_path, *PROVIDERS["openai"], *MONITOR) == 0
    mapping = load_mapping(tmp_path / _init.MONITOR_MAPPING)
    assert (mapping.text, mapping.groups, mapping.timestamp, mapping.unit, mapping.id) == (
        "output", ["gender"], "timestamp", "user_id", "request_id")
    other = tmp_path / "again"
    other.mkdir()
    (other / "fairness-check").mkdir()
    (other / _init.MONITOR_MAPPING).write_text("text: answer\nslice: cohort\ntimestamp: t\n", encoding="utf-8")
    assert init(other, *PROVIDERS["openai"], *MONITOR) == 0
    assert (other / _init.MONITOR_MAPPING).read_text(encoding="utf-8") == "text: answer\nslice: cohort\ntimestamp: t\n"
    assert f"wrote {other / _init.MONITOR_MAPPING}" not in capsys.readouterr().out


def test_a_gpu_runner_and_the_logs_runner_are_both_declared_to_actionlint(tmp_path):
    assert init(tmp_path, *PROVIDERS["local"], *MONITOR, "--monitor-runner", "log-box") == 0
    config = yaml.safe_load((tmp_path / ".github" / "actionlint.yaml").read_text(encoding="utf-8"))
    assert config == {"self-hosted-runner": {"labels": ["gpu", "log-box"]}}
    assert monitor_workflow(tmp_path)["jobs"]["monitor"]["runs-on"] == ["self-hosted", "log-box"]


@pytest.mark.parametrize(("argv", "message"), [
    (["--monitor"], "`--monitor` needs `--monitor-logs` (the logs on the runner: a file, directory or glob)"),
    ([*MONITOR, "--monitor-schedule", "0 25 * * *"], "`--monitor-schedule` '0 25 * * *': field `25` must use numbers in 0-23"),
    ([*MONITOR, "--monitor-window", "month"], "`--monitor-window` 'month' must be day, week or a positive number of records"),
    ([*MONITOR, "--monitor-runner", "a b"], "`--monitor-runner` 'a b' may hold only letters, digits and . _ / : + @ -"),
    ([*MONITOR, "--monitor-mapping", "x/../../m.yaml"],
     "`--monitor-mapping` 'x/../../m.yaml' must stay inside the repository (no `..`)"),
    (["--monitor", "--monitor-logs", "${{ github.event.issue.title }}"],
     "`--monitor-logs` '${{ github.event.issue.title }}' must be one line without `${{` (GitHub would evaluate it)"),
])
def test_bad_monitor_flags_are_one_line_exit_2(tmp_path, capsys, argv, message):
    assert init(tmp_path, *PROVIDERS["openai"], *argv) == 2
    assert capsys.readouterr().err == f"error: {message}\n"
    assert not (tmp_path / ".github").exists()


def test_the_monitor_workflow_passes_actionlint_and_zizmor(tmp_path):
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    assert init(tmp_path, *PROVIDERS["openai"], *MONITOR) == 0
    assert_lint_clean(tmp_path)


# -- issue 22: `init --monitor` alone needs no model provider ------------------------------------------------


def test_monitor_alone_writes_the_monitor_scaffold_and_nothing_of_a_model(tmp_path, capsys):
    assert init(tmp_path, *MONITOR) == 0
    written = sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*") if p.is_file())
    assert written == [_init.ACTIONLINT_CONFIG, _init.MONITOR_WORKFLOW, _init.MONITOR_MAPPING]
    job = monitor_workflow(tmp_path)["jobs"]["monitor"]
    assert job["runs-on"] == ["self-hosted", "fairness-logs"]
    assert job["env"]["SUITE"] == "fairness-cards/qwen-v0.1"
    assert yaml.safe_load((tmp_path / _init.ACTIONLINT_CONFIG).read_text(encoding="utf-8")) == {
        "self-hosted-runner": {"labels": ["fairness-logs"]}}
    assert load_mapping(tmp_path / _init.MONITOR_MAPPING).text == "output"
    assert capsys.readouterr().out.splitlines()[-4:] == [
        "next:",
        "  edit:   fairness-check/monitor-mapping.yaml: your logs' field names (`llm-fairness-check schema mapping`)",
        "  commit: git add .github/workflows/fairness-monitor.yml fairness-check/monitor-mapping.yaml "
        ".github/actionlint.yaml && git commit -m 'Add the scheduled fairness monitor of the production logs'",
        "  push:   git push",
    ]


def test_monitor_alone_with_its_own_suite_copy(tmp_path):
    assert init(tmp_path, *MONITOR, "--with-suite") == 0
    assert monitor_workflow(tmp_path)["jobs"]["monitor"]["env"]["SUITE"] == _init.SUITE_COPY
    assert (tmp_path / _init.SUITE_COPY).is_file()
    assert not (tmp_path / _init.PR_WORKFLOW).exists() and not (tmp_path / _init.REGEN_WORKFLOW).exists()


def test_monitor_alone_passes_actionlint_and_zizmor(tmp_path):
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    assert init(tmp_path, *MONITOR) == 0
    assert_lint_clean(tmp_path)


def test_a_provider_with_monitor_still_writes_the_model_scaffold_too(tmp_path):
    assert init(tmp_path, *PROVIDERS["openai"], *MONITOR) == 0
    written = sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*") if p.is_file())
    assert written == [_init.ACTIONLINT_CONFIG, _init.PR_WORKFLOW, _init.MONITOR_WORKFLOW, _init.REGEN_WORKFLOW,
                       _init.MONITOR_MAPPING]


@pytest.mark.parametrize(("argv", "message"), [
    ([], "`init` needs `--provider` and `--model` (the model whose recordings the pull-request check replays), "
         "or `--monitor` alone for the scheduled production-log monitor"),
    (["--provider", "openai", *MONITOR],
     "`--provider` and `--model` go together (the model whose recordings the pull-request check replays)"),
    (["--model", "gpt-4o-mini"],
     "`--provider` and `--model` go together (the model whose recordings the pull-request check replays)"),
    ([*MONITOR, "--secret", "KEY"], "`--secret` is for the model's scaffold (`--provider` and `--model`); "
                                    "`--monitor` alone writes only the monitor workflow and its mapping"),
    ([*MONITOR, "--schedule", "0 1 * * *"], "`--schedule` is for the model's scaffold (`--provider` and `--model`); "
                                            "`--monitor` alone writes only the monitor workflow and its mapping"),
])
def test_an_incomplete_provider_or_a_provider_flag_without_one_is_exit_2(tmp_path, capsys, argv, message):
    assert init(tmp_path, *argv) == 2
    assert capsys.readouterr().err == f"error: {message}\n"
    assert list(tmp_path.iterdir()) == []
