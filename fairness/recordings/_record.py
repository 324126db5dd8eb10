"""A model's answer to one grid row, as stored on disk: the `Recording` record."""


from collections.abc import Sequence
from typing import Literal

from fairness._util.errors import FairnessError
from fairness.suite._case import Case, GridRow

FinishReason = Literal["stop", "length"]


class Recording(GridRow):
    """A model's answer to one `Case`, as stored on disk (one JSONL line, keys sorted)."""

    key: str
    """sha256 of canonical JSON of model, system prompt, prompt, params and seed."""
    output: str
    """Completion text, leading/trailing whitespace stripped."""
    prompt_tokens: int
    """Prompt tokens as the engine counted them."""
    completion_tokens: int
    """Completion tokens as the engine counted them."""
    finish_reason: FinishReason
    """`stop` (end of sequence) or `length` (hit max_new_tokens)."""
    status: Literal["ok"] = "ok"
    """Only finished rows are stored."""

    @classmethod
    def from_case(
        cls, case: Case, *, key: str, output: str, prompt_tokens: int, completion_tokens: int, finish_reason: FinishReason
    ) -> "Recording":
        """The record of `case`'s answer: grid coordinates copied, output stripped as the suite says."""
        coordinates = {name: getattr(case, name) for name in GridRow.model_fields}
        return cls(
            **coordinates, key=key, output=output.strip(),
            prompt_tokens=prompt_tokens, completion_tokens=completion_tokens, finish_reason=finish_reason,
        )


def join_rows(cases: Sequence[Case], recordings: Sequence[Recording]) -> list[Recording]:
    """The recordings in grid order, joined on `row_id` (never on position).

    A library caller may pass recordings in any order; a record without a grid row, a
    grid row without a record, or a row recorded twice is a `FairnessError` naming the first.
    """
    by_id: dict[str, Recording] = {}
    for rec in recordings:
        if rec.row_id in by_id:
            raise FairnessError(f"row `{rec.row_id}` is recorded twice")
        by_id[rec.row_id] = rec
    wanted = {c.row_id for c in cases}
    for rec in recordings:
        if rec.row_id not in wanted:
            raise FairnessError(f"recording `{rec.row_id}` has no row in the grid")
    out = []
    for case in cases:
        found = by_id.get(case.row_id)
        if found is None:
            raise FairnessError(f"grid row `{case.row_id}` has no recording")
        out.append(found)
    return out
