"""Published JSON Schemas: the files other tools read (results.json, a recording manifest) and
the one file people write (a suite, docs/suites.md describes it key by key).

Generated from the pydantic models (their field docstrings become descriptions), printed by
`llm-fairness-check schema NAME` and committed under docs/schema/ (a test checks for drift).

The docstrings are read here, when a schema is printed, not when the models are defined:
pydantic's `use_attribute_docstrings` parses every model's source at import, ~50 ms of CPU on
each run for text only the schemas show.
"""

from __future__ import annotations

import ast
import functools
import inspect
import json
import textwrap
from typing import Any

from pydantic import BaseModel
from pydantic.json_schema import GenerateJsonSchema

from fairness._util.errors import FairnessError

_SOURCES = {
    "results": ("fairness.audit._results", "FairnessRun", "SCHEMA_VERSION", "serialization"),
    "manifest": ("fairness.recordings._store", "Manifest", "FORMAT_VERSION", "serialization"),
    "suite": ("fairness.suite._suite", "Suite", None, "validation"),  # an input file: defaults shown, none required
    "monitor": ("fairness.monitor._results", "MonitorRun", "MONITOR_SCHEMA_VERSION", "serialization"),
    "mapping": ("fairness.monitor._mapping", "Mapping", "MAPPING_VERSION", "validation"),
}
"""Each schema's model and version constant (module, model, version or None, pydantic JSON-schema mode)."""
SCHEMAS = tuple(_SOURCES)


def json_schema(name: str) -> dict[str, Any]:
    """The JSON Schema of `results` (results.json), `manifest` (a recording set's manifest.json), `suite` (a suite
    YAML file, as input: defaults shown, optional keys not required), `monitor` (monitor.json) or `mapping` (a
    monitor mapping file)."""
    if name not in _SOURCES:
        raise FairnessError(f"unknown schema `{name}` (choose from {', '.join(SCHEMAS)})")
    import importlib

    module, model, version, mode = _SOURCES[name]
    mod = importlib.import_module(module)
    schema = getattr(mod, model).model_json_schema(mode=mode, schema_generator=_WithFieldDocs)
    suffix = "" if version is None else f"-{getattr(mod, version)}"
    schema["$id"] = f"https://llm-fairness-check/schema/{name}{suffix}.json"
    return {"$schema": "https://json-schema.org/draft/2020-12/schema", **schema}


def schema_text(name: str) -> str:
    """`json_schema(name)` as stable, indented JSON text (the committed file's bytes); `openapi`: the REST
    service's OpenAPI document (docs/schema/openapi.json; needs the `serve` extra)."""
    if name == "openapi":
        import importlib.util

        if importlib.util.find_spec("fastapi") is None:
            from fairness.serve import SERVE_EXTRA

            raise FairnessError(f"the OpenAPI document needs fastapi: {SERVE_EXTRA}")
        from fairness.serve._app import create_app

        return json.dumps(create_app().openapi(), indent=2, ensure_ascii=False) + "\n"
    return json.dumps(json_schema(name), indent=2, ensure_ascii=False) + "\n"


class _WithFieldDocs(GenerateJsonSchema):
    """Pydantic's schema, each property described by its field's docstring unless the field has a description."""

    def model_schema(self, schema):
        out = super().model_schema(schema)
        properties = self.resolve_ref_schema(out).get("properties", {})
        for name, doc in field_docs(schema["cls"]).items():
            if name in properties and "description" not in properties[name]:
                properties[name]["description"] = doc
        return out


@functools.cache
def field_docs(cls: type) -> dict[str, str]:
    """Each field's docstring (the string literal right after its annotated assignment), inherited ones included."""
    docs: dict[str, str] = {}
    for klass in reversed(cls.__mro__):
        if not (isinstance(klass, type) and issubclass(klass, BaseModel)) or klass is BaseModel:
            continue
        try:
            source = textwrap.dedent(inspect.getsource(klass))
        except (OSError, TypeError):
            continue
        body = ast.parse(source).body[0]
        assert isinstance(body, ast.ClassDef)
        for stmt, after in zip(body.body, body.body[1:], strict=False):
            if (isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name) and isinstance(after, ast.Expr)
                    and isinstance(after.value, ast.Constant) and isinstance(after.value.value, str)):
                docs[stmt.target.id] = inspect.cleandoc(after.value.value)
    return docs
