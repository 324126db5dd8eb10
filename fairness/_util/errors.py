"""One exception for every misuse a user can fix.

The CLI and the Action print a `FairnessError` as one line on stderr and exit 2;
anything else is a bug and keeps its traceback.
"""

from __future__ import annotations


class FairnessError(Exception):
    """Bad input: a suite, recording, rule or option the user can correct."""

    exit_code = 2


class LiveGenerationRefused(FairnessError):
    """Live generation was asked for without the explicit opt-in."""
