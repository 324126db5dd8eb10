"""Reading the JSON files users point us at, with one-line errors."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from fairness._util.errors import FairnessError
from fairness._util.files import read_json


def load_json(path: Path, *, missing: str, what: str = "file") -> Any:
    """Parse `path` strictly (size cap, UTF-8, no duplicate keys or NaN); a missing file is
    `FairnessError(missing)`, anything else wrong with it says what and where."""
    if not Path(path).exists():
        raise FairnessError(missing)
    return read_json(path, what)
