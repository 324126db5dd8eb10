"""The GitHub Action adapter: typed inputs, workflow commands, the sticky PR comment."""

from fairness.action._main import main

__all__ = ["main"]
