"""The mapping file: which field of a log record is the output, the group, the time and the unit.

A small YAML file, schema-checked like a suite (unknown keys are an error with the closest
valid key; `llm-fairness-check schema mapping` prints its JSON Schema). Field names are
top-level columns of the log (JSONL keys, Parquet or CSV columns).
"""

from __future__ import annotations

from pathlib import Path

from pydantic import Field, ValidationError, model_validator

from fairness._util.errors import FairnessError, validation_message
from fairness._util.models import Frozen

MAPPING_VERSION = "1.0.0"
"""Semver of the mapping file's format (its published schema's `$id`)."""

FIELD_PATTERN = r"^[A-Za-z_][A-Za-z0-9_\-]{0,127}$"
"""A top-level column name: letters, digits, `_` and `-` (quoted in SQL, never interpolated raw)."""


class Mapping(Frozen):
    """How one log's records become audited outputs: text, slice, time and (optionally) unit and id."""

    text: str = Field(pattern=FIELD_PATTERN)
    """The field holding the model's output text (the one field the rubric scores)."""
    groups: list[str] | None = Field(default=None, min_length=1, max_length=8)
    """Group attribute fields; a record's slice is their values joined by `_` in this order (as the
    grid's slice ids, e.g. `woman_Muslim`), a missing value written `(missing)`. Exactly one of
    `groups` and `slice`. Group, slice, unit and id values must be strings, integers or booleans,
    spelled as JSON writes them (`7`, `true`); a CSV cell is its text as written (`007`, `1e3`,
    `TRUE`), an empty cell missing. A floating-point value is exit 2 naming the field (engines spell
    floats differently: `1.0E10`, `10000000000.0`): bucket such values into labels in the logs."""
    slice: str | None = Field(default=None, pattern=FIELD_PATTERN)
    """A field already holding the record's slice. Exactly one of `groups` and `slice`."""
    timestamp: str = Field(pattern=FIELD_PATTERN)
    """The record's time: an ISO-8601 string or a timestamp column (nanosecond ones cut to the
    microsecond below), read as UTC; day and week windows are cut from it and row windows are
    ordered by it. A number (epoch seconds or milliseconds are ambiguous) is exit 2."""
    unit: str | None = Field(default=None, pattern=FIELD_PATTERN)
    """A field naming the unit whose records are correlated (a user or conversation id): intervals
    then treat units as clusters. Null: records are independent."""
    id: str | None = Field(default=None, pattern=FIELD_PATTERN)
    """A stable record id (a string or integer field): sampling keeps a record iff the hash of this
    id's text says so, so every machine samples the same records. Required for `--sample` above 1 and
    row windows; a record without one (a null, an empty CSV cell) is exit 2."""

    @model_validator(mode="after")
    def _one_slice_source(self) -> Mapping:
        if (self.groups is None) == (self.slice is None):
            raise ValueError("give exactly one of `groups` (group attribute fields) and `slice` (a field holding the slice)")
        if self.groups is not None:
            for g in self.groups:
                if not _is_field(g):
                    raise ValueError(f"`groups`: `{g}` is not a field name (letters, digits, `_`, `-`)")
        used = self.fields()
        dup = next((f for f in used if used.count(f) > 1), None)
        if dup is not None:
            raise ValueError(f"field `{dup}` is mapped twice")
        return self

    def fields(self) -> list[str]:
        """Every field the mapping reads, in a fixed order (text, slice source, timestamp, unit, id)."""
        out = [self.text, *(self.groups or [self.slice or ""]), self.timestamp]
        return out + [f for f in (self.unit, self.id) if f is not None]


def _is_field(name: str) -> bool:
    import re

    return re.fullmatch(FIELD_PATTERN, name) is not None


def load_mapping(path: str | Path) -> Mapping:
    """Read and check a mapping YAML file; any problem is one `FairnessError` line naming the field."""
    from fairness._util.yaml_io import read_yaml

    data = read_yaml(Path(path), "mapping")
    if not isinstance(data, dict):
        raise FairnessError(f"mapping `{path}`: expected a mapping of keys (text, groups or slice, timestamp, unit, id)")
    try:
        return Mapping.model_validate(data)
    except ValidationError as err:
        raise FairnessError(validation_message(err, f"mapping `{path}`", Mapping)) from None
