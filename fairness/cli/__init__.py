"""The command-line adapter: argument parsing only; every command calls the library."""

from fairness._util.process import set_process_defaults

set_process_defaults()  # before anything imports numpy or builds a pydantic model

from fairness.cli._main import COMMANDS, build_parser, console, main  # noqa: E402

__all__ = ["COMMANDS", "build_parser", "console", "main"]
