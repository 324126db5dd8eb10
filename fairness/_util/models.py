"""The one pydantic base for records and configuration: frozen where records, strict everywhere.

Field docstrings become the published JSON Schemas' descriptions (`fairness.report._schema`).
"""


from pydantic import BaseModel, ConfigDict


class Strict(BaseModel):
    """Unknown keys are an error, so a typo in a file is never silently ignored."""

    model_config = ConfigDict(extra="forbid")


class Frozen(BaseModel):
    """An immutable record handed from one pipeline stage to the next."""

    model_config = ConfigDict(frozen=True, extra="forbid")


def empty_list() -> list:
    """`default_factory` of an empty list field. pydantic reads a default factory's signature (does it
    take the validated data?), and `list`'s is parsed from its text signature with `tokenize`, whose
    first use compiles its regular expressions: ~4 ms of every run's start-up, for `[]`."""
    return []
