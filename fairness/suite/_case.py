"""One row of the expanded prompt grid (`Case`) and the decoding it asks for (`SamplingParams`).

`Case` (suite) → `Recording` (generate | replay) → scores (score) → metrics → gate → report.
Records join on `row_id`, never on list position.
"""


from pydantic import Field

from fairness._util.models import Frozen as _Frozen


class SamplingParams(_Frozen):
    """The decoding parameters a regime asks for."""

    temperature: float = Field(ge=0.0, le=5.0, allow_inf_nan=False)
    """Softmax temperature, from 0 to 5; 0 means greedy."""
    top_p: float = Field(gt=0.0, le=1.0, allow_inf_nan=False)
    """Nucleus mass kept after temperature scaling, above 0 and at most 1 (1 keeps every token)."""
    max_new_tokens: int = Field(gt=0, le=32768)
    """Cap on completion tokens, from 1 to 32768; a completion that hits it finishes with `length`."""


class GridRow(_Frozen):
    """A grid row's coordinates and prompt: what a `Case` asks and a `Recording` stores with its answer."""

    row_id: str
    """Stable, readable id, e.g. `F1.p1.CEO.woman_Muslim.low-entropy.s1`."""
    family: str
    """Prompt family id, e.g. `F1`."""
    paraphrase_id: str
    """`p1` … `pN`; `p1` is the family's canonical template."""
    placeholders: dict[str, str]
    """Non-protected placeholder values, e.g. `{"OCC": "CEO"}`."""
    slice: dict[str, str]
    """Protected-attribute values, e.g. `{"gender": "woman", "religion": "Muslim"}`."""
    slice_id: str
    """The slice's values joined by `_`, e.g. `woman_Muslim`."""
    regime: str
    """Decoding regime name."""
    params: SamplingParams
    """The regime's sampling parameters."""
    seed: int
    """The sampling seed."""
    prompt: str
    """The user message exactly as sent to the model."""


class Case(GridRow):
    """One row of the expanded prompt grid: a prompt, a decoding regime and a seed."""

    index: int
    """Position in the canonical grid order (family, paraphrase, placeholders, slice, regime, seed)."""
    prompt_id: str
    """The row id without regime and seed: one distinct prompt (a bootstrap cluster)."""
    template_index: int
    """Index of this template across all families (name pools rotate over it)."""
