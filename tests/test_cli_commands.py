"""The command table: the top-level help lists every command, and a command's options (and the
module that defines them) load only when that command is chosen."""

from __future__ import annotations

import gc
import subprocess
import sys

import pytest
from conftest import write_recording_set

from fairness.cli._main import COMMAND_TABLE, build_parser, command_parser, main

NAMES = ["grid", "generate", "dry-run", "models", "recordings", "schema", "run", "diff", "init", "regenerate", "pr-body",
         "open-pr", "comment", "score", "serve", "monitor"]


def test_the_top_level_help_lists_every_command_with_its_help_line(capsys) -> None:
    assert [name for name, _, _ in COMMAND_TABLE] == NAMES
    with pytest.raises(SystemExit) as info:
        main(["--help"])
    assert info.value.code == 0
    text = " ".join(capsys.readouterr().out.split())  # the help wraps long lines
    assert "{" + ",".join(NAMES) + "}" in text
    for name, help_line, _ in COMMAND_TABLE:
        assert f"{name} {help_line}" in text


@pytest.mark.parametrize(("command", "option"), [
    ("grid", "--format"), ("generate", "--shard"), ("dry-run", "--engine"), ("schema", "{results,manifest,suite"),
    ("run", "--recordings"), ("diff", "--regression-threshold"), ("init", "--provider"), ("regenerate", "--merge"),
    ("pr-body", "--run"), ("open-pr", "--body-file"), ("comment", "--from-artifact"), ("score", "--scorers"),
    ("serve", "--port"), ("monitor", "--mapping"),
])
def test_a_commands_help_shows_its_options(command: str, option: str, capsys) -> None:
    with pytest.raises(SystemExit) as info:
        main([command, "--help"])
    assert info.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith(f"usage: llm-fairness-check {command} ")
    assert option in out


def test_a_nested_command_loads_its_subcommands() -> None:
    args = build_parser().parse_args(["recordings", "reseal", "some/dir", "--reason", "fixed a typo"])
    assert (args.command, args.recordings_command, args.directory, args.reason) == ("recordings", "reseal", "some/dir",
                                                                                   "fixed a typo")


def test_command_parser_gives_a_command_with_all_its_options() -> None:
    monitor = command_parser(build_parser(), "monitor")
    assert {"logs", "mapping", "out", "suite", "engine", "mlflow"} <= {a.dest for a in monitor._actions}


def test_a_lazily_loaded_commands_bad_option_is_one_line_and_exit_2(capsys) -> None:
    assert main(["serve", "--port", "8000", "--bogus"]) == 2
    assert main(["score"]) == 2
    assert main(["init", "--model", "m"]) == 2
    assert capsys.readouterr().err.splitlines() == [
        "error: llm-fairness-check: unrecognized arguments: --bogus",
        "error: llm-fairness-check score: the following arguments are required: --recordings",
        "error: `--provider` and `--model` go together (the model whose recordings the pull-request check replays)",
    ]



def test_the_entry_points_end_with_mains_code_and_all_their_output(tmp_path, default_suite, capsys) -> None:
    """`python -m fairness.cli` and the console script end through `exit_process` (objects frozen, so
    the shutdown skips the collector's last walk): the exit code, what is printed and the outputs
    are `main`'s, and `main` itself leaves a caller's collector as it was."""
    rec = write_recording_set(tmp_path / "rec", default_suite, lambda c: "A capable professional.")
    flags = ["--recordings", str(rec), "--bootstrap", "100", "--permutations", "0"]
    module = subprocess.run([sys.executable, "-m", "fairness.cli", "run", "--out", str(tmp_path / "m"), *flags],
                            check=False, capture_output=True, text=True)
    script = subprocess.run([sys.executable, "-c", "import sys\nfrom fairness.cli import console\n"
                             f"sys.argv = ['llm-fairness-check', 'run', '--out', {str(tmp_path / 's')!r}, *{flags!r}]\n"
                             "console()"], check=False, capture_output=True, text=True)
    frozen = gc.get_freeze_count()
    assert main(["run", "--out", str(tmp_path / "p"), *flags]) == 0
    assert gc.get_freeze_count() == frozen
    printed = capsys.readouterr().out.replace(str(tmp_path / "p"), "OUT")
    assert printed.startswith("PASS — ") and printed.splitlines()[-1].startswith("wrote OUT/results.json, ")
    for proc, out in ((module, "m"), (script, "s")):
        assert (proc.returncode, proc.stdout.replace(str(tmp_path / out), "OUT")) == (0, printed)
        assert (tmp_path / out / "results.json").read_bytes() == (tmp_path / "p" / "results.json").read_bytes()
