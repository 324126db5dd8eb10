"""`Refused`: an upload or request the service turns away, with its HTTP status and one line; and the one
line a library error becomes for a client."""

from __future__ import annotations

import os
from pathlib import Path


class Refused(Exception):
    """A 4xx answer: `status` and one line for the body's `error`, naming what to fix."""

    def __init__(self, status: int, message: str, headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.headers = headers or {}


def client_line(message: str, workdir: Path) -> str:
    """A library error as the client sees it: one line, with the job's private folders taken out of its paths
    (`<workdir>/upload/set/records.jsonl` reads `set/records.jsonl`, as the archive names it)."""
    for prefix, short in ((workdir / "upload", ""), (workdir / "out", "<outputs>"), (workdir, "")):
        message = message.replace(f"{prefix}{os.sep}", f"{short}{'/' if short else ''}").replace(str(prefix), short or ".")
    return message.replace("\r", "\\r").replace("\n", "\\n")
