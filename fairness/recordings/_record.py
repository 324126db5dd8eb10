"""A model's answer to one grid row, as stored on disk: the `Recording` record."""

from __future__ import annotations

from typing import Literal

from fairness._util.models import Frozen as _Frozen
from fairness.suite._case import Case, SamplingParams

FinishReason = Literal["stop", "length"]


class Recording(_Frozen):
    """A model's answer to one `Case`, as stored on disk (one JSONL line)."""

    key: str
    """sha256 of canonical JSON of model, system prompt, prompt, params and seed."""
    row_id: str
    family: str
    paraphrase_id: str
    placeholders: dict[str, str]
    slice: dict[str, str]
    slice_id: str
    regime: str
    params: SamplingParams
    seed: int
    prompt: str
    output: str
    """Completion text, leading/trailing whitespace stripped."""
    prompt_tokens: int
    completion_tokens: int
    finish_reason: FinishReason
    status: Literal["ok"] = "ok"

    @classmethod
    def from_case(
        cls, case: Case, *, key: str, output: str, prompt_tokens: int, completion_tokens: int, finish_reason: FinishReason
    ) -> Recording:
        """The record of `case`'s answer: grid coordinates copied, output stripped as the suite says."""
        return cls(
            key=key, row_id=case.row_id, family=case.family, paraphrase_id=case.paraphrase_id,
            placeholders=case.placeholders, slice=case.slice, slice_id=case.slice_id, regime=case.regime,
            params=case.params, seed=case.seed, prompt=case.prompt, output=output.strip(),
            prompt_tokens=prompt_tokens, completion_tokens=completion_tokens, finish_reason=finish_reason,
        )
