"""The command-line adapter: argument parsing only; every command calls the library."""

from fairness.cli._main import COMMANDS, build_parser, main

__all__ = ["COMMANDS", "build_parser", "main"]
