"""The GitHub Action adapter: typed inputs, workflow commands, the sticky PR comment."""

from fairness._util.process import set_process_defaults

set_process_defaults()  # before anything imports numpy or builds a pydantic model

from fairness.action._main import main  # noqa: E402

__all__ = ["main"]
