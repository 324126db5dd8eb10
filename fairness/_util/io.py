"""Reading the JSON files users point us at, with one-line errors."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from fairness._util.errors import FairnessError


def load_json(path: Path, *, missing: str) -> Any:
    """Parse `path`; a missing file is `FairnessError(missing)`, an unreadable one says why."""
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise FairnessError(missing) from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise FairnessError(f"cannot read `{path}`: {exc}") from None
