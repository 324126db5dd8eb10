"""Published JSON Schemas of the files other tools read: results.json and a recording manifest.

Generated from the pydantic models (their field docstrings become descriptions), printed by
`llm-fairness-check schema NAME` and committed under docs/schema/ (a test checks for drift).
"""

from __future__ import annotations

import json
from typing import Any

from fairness._util.errors import FairnessError

SCHEMAS = ("results", "manifest")


def json_schema(name: str) -> dict[str, Any]:
    """The JSON Schema of `results` (results.json) or `manifest` (a recording set's manifest.json)."""
    if name == "results":
        from fairness.audit._results import SCHEMA_VERSION, FairnessRun

        schema = FairnessRun.model_json_schema(mode="serialization")
        schema["$id"] = f"https://llm-fairness-check/schema/results-{SCHEMA_VERSION}.json"
    elif name == "manifest":
        from fairness.recordings._store import FORMAT_VERSION, Manifest

        schema = Manifest.model_json_schema(mode="serialization")
        schema["$id"] = f"https://llm-fairness-check/schema/manifest-{FORMAT_VERSION}.json"
    else:
        raise FairnessError(f"unknown schema `{name}` (choose from {', '.join(SCHEMAS)})")
    return {"$schema": "https://json-schema.org/draft/2020-12/schema", **schema}


def schema_text(name: str) -> str:
    """`json_schema(name)` as stable, indented JSON text (the committed file's bytes)."""
    return json.dumps(json_schema(name), indent=2, ensure_ascii=False) + "\n"
