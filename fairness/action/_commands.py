"""GitHub Actions runner protocol: workflow commands, step outputs and the job summary.

Everything user-controlled that reaches stdout goes through `escape_data` /
`escape_property`, so an input can never end a command early, start a new line or
smuggle in a command of its own. Text we do not control (the engine's log) is wrapped
in `stop_commands`, which makes the runner ignore commands until a random token.
"""

from __future__ import annotations

import contextlib
import re
import secrets
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import TextIO

SUMMARY_LIMIT = 1024 * 1024
"""GitHub rejects a step summary over 1 MiB."""

_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_-]*$")


def escape_data(text: str) -> str:
    """Escape a command's message the way the runner unescapes it (actions/toolkit)."""
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def escape_property(text: str) -> str:
    """Escape a command property value: `:` and `,` would end it early."""
    return escape_data(text).replace(":", "%3A").replace(",", "%2C")


def command(name: str, message: str = "", out: TextIO | None = None, **props: str | None) -> None:
    """Print one workflow command, e.g. `::error title=x::message`."""
    if not _NAME.match(name):
        raise ValueError(f"not a workflow command name: {name!r}")
    kv = ",".join(f"{k}={escape_property(str(v))}" for k, v in props.items() if v is not None and v != "")
    line = f"::{name}{' ' + kv if kv else ''}::{escape_data(message)}"
    stream = out or sys.stdout
    stream.write(line + "\n")
    stream.flush()


def log(text: str, out: TextIO | None = None) -> None:
    """Print a plain log line whose content is inert: no line breaks, no leading `::`."""
    safe = escape_data(text)
    if safe.lstrip().startswith("::"):
        safe = " " + safe.replace("::", ":\u200b:", 1)
    stream = out or sys.stdout
    stream.write(safe + "\n")
    stream.flush()


@contextlib.contextmanager
def group(title: str, out: TextIO | None = None) -> Iterator[None]:
    """Fold the log between `::group::` and `::endgroup::`."""
    command("group", title, out)
    try:
        yield
    finally:
        command("endgroup", "", out)


@contextlib.contextmanager
def stop_commands(out: TextIO | None = None) -> Iterator[None]:
    """Make the runner ignore workflow commands printed inside (untrusted output).

    stderr is folded into the same stream meanwhile: the runner reads stdout and
    stderr independently, so a command on stderr could otherwise race past the stop.
    """
    stream = out or sys.stdout
    token = secrets.token_hex(16)
    command("stop-commands", token, stream)
    try:
        with contextlib.redirect_stdout(stream), contextlib.redirect_stderr(stream):
            yield
    finally:
        stream.flush()
        stream.write(f"::{token}::\n")
        stream.flush()


def add_masks(env: Mapping[str, str], out: TextIO | None = None) -> int:
    """`::add-mask::` every secret-looking variable's value (and each of its lines)."""
    count = 0
    for name, value in env.items():
        if not is_secret_name(name) or len(value.strip()) < 8:
            continue
        for part in {value, *value.splitlines()}:
            if len(part.strip()) >= 8:
                command("add-mask", part, out)
                count += 1
    return count


_SECRET = re.compile(r"(TOKEN|API_KEY|APIKEY|SECRET|PASSWORD|CREDENTIALS?)$", re.IGNORECASE)


def is_secret_name(name: str) -> bool:
    """Names like GITHUB_TOKEN, OPENAI_API_KEY, HF_TOKEN."""
    return bool(_SECRET.search(name))


def _delimiter(value: str) -> str:
    while True:
        delim = f"ghadelimiter_{secrets.token_hex(16)}"
        if delim not in value:
            return delim


def write_outputs(path: str | Path, outputs: Mapping[str, str]) -> None:
    """Append step outputs to $GITHUB_OUTPUT as `name<<DELIM`, safe for any value."""
    with open(path, "a", encoding="utf-8", newline="\n") as fh:
        for name, value in outputs.items():
            if not _NAME.match(name):
                raise ValueError(f"not an output name: {name!r}")
            delim = _delimiter(value)
            fh.write(f"{name}<<{delim}\n{value}\n{delim}\n")


def append_summary(path: str | Path, markdown: str) -> None:
    """Append to $GITHUB_STEP_SUMMARY, keeping the whole file under GitHub's 1 MiB."""
    from fairness.report._render import cap_summary

    p = Path(path)
    used = p.stat().st_size if p.exists() else 0
    room = SUMMARY_LIMIT - used - 1024
    if room <= 0:
        return
    with open(p, "a", encoding="utf-8", newline="\n") as fh:
        fh.write(cap_summary(markdown, cap=room).rstrip("\n") + "\n\n")


def neutralise(text: str, at_line_start: bool = True) -> tuple[str, bool]:
    """`text` with every line that would start a workflow command (`::` after optional
    whitespace) made inert by a zero-width space; returns it and whether it ends a line."""
    out = []
    for piece in re.split(r"(\r\n|\r|\n)", text):
        if piece in ("\r\n", "\r", "\n"):
            out.append(piece)
            at_line_start = True
            continue
        safe = piece.replace("::", ":\u200b:", 1) if at_line_start and piece.lstrip().startswith("::") else piece
        if piece.strip():
            at_line_start = False
        out.append(safe)
    return "".join(out), at_line_start


class InertStream:
    """A text stream wrapper that neutralises workflow commands line by line."""

    def __init__(self, stream: TextIO):
        self._stream = stream
        self._at_start = True

    def write(self, text: str) -> int:
        safe, self._at_start = neutralise(text, self._at_start)
        self._stream.write(safe)
        return len(text)

    def __getattr__(self, name: str):
        return getattr(self._stream, name)


@contextlib.contextmanager
def inert_streams() -> Iterator[None]:
    """Neutralise workflow commands on stdout and stderr (the plain CLI inside a workflow step):
    rule ids, manifest notes and model text reach the log, never the runner's command parser."""
    old_out, old_err = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = InertStream(old_out), InertStream(old_err)
    try:
        yield
    finally:
        sys.stdout, sys.stderr = old_out, old_err
