"""One exception for every misuse a user can fix.

The CLI and the Action print a `FairnessError` as one line on stderr and exit 2;
anything else is a bug and keeps its traceback.
"""

from __future__ import annotations

from pydantic import ValidationError


class FairnessError(Exception):
    """Bad input: a suite, recording, rule or option the user can correct."""

    exit_code = 2


class LiveGenerationRefused(FairnessError):
    """Live generation was asked for without the explicit opt-in."""


def validation_message(err: ValidationError, source: str = "") -> str:
    """One line for the first error of a pydantic `ValidationError`, prefixed with `source`.

    The one formatter for every file, record and option model, so the same mistake reads the
    same everywhere: a validator's own message verbatim, `unknown key `x``, or `` `loc`: msg``.
    """
    first = err.errors()[0]
    loc = ".".join(str(p) for p in first["loc"])
    msg = first["msg"]
    if msg.startswith("Value error, "):
        text = msg[len("Value error, ") :]
    elif first["type"] == "extra_forbidden":
        text = f"unknown key `{loc}`"
    else:
        text = f"`{loc}`: {msg}" if loc else msg
    return f"{source}: {text}" if source else text
