"""One input shape for every evaluator: `Recording`s from the store, or plain tuples."""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from typing import Any, NamedTuple

from fairness._util.errors import FairnessError
from fairness.recordings._record import Recording


class Sample(NamedTuple):
    """One output with what the evaluators need to pair and cluster it.

    A plain `(group, template, seed, text)` tuple is accepted wherever a `Sample` is.
    """

    group: str
    """The slice the prompt named, e.g. `woman_Muslim`."""
    template: Hashable
    """The matched prompt with the group left out: family, paraphrase, placeholders, regime."""
    seed: int
    text: str
    prompt: str = ""
    """The prompt as sent (refusal uses it to read the requested format)."""
    cluster: Hashable = None
    """Resampling unit; `None` means the template itself."""


Data = Sequence[Recording] | Sequence[Sample] | Sequence[tuple]


def template_key(rec: Any) -> str:
    """Everything that matches two recordings except slice and seed."""
    return ".".join([rec.family, rec.paraphrase_id, *rec.placeholders.values(), rec.regime])


def record_sample(rec: Any) -> Sample:
    """The `Sample` of a `Recording` (or of a streamed row with its fields).

    The cluster is the template (family + paraphrase): the occupations and regimes of one
    template share wording, so they are resampled together.
    """
    return Sample(group=rec.slice_id, template=template_key(rec), seed=rec.seed, text=rec.output, prompt=rec.prompt,
                  cluster=f"{rec.family}.{rec.paraphrase_id}")


def as_samples(data: Data) -> list[Sample]:
    """Normalise recordings or tuples to `Sample`s; clusters default to the prompt template
    (`record_sample` for recordings)."""
    out: list[Sample] = []
    for i, item in enumerate(data):
        if isinstance(item, Recording):
            out.append(record_sample(item))
        elif isinstance(item, tuple) and 4 <= len(item) <= 6:
            s = item if type(item) is Sample else Sample(*item)
            out.append(s if s.cluster is not None else s._replace(cluster=s.template))
        else:
            raise FairnessError(f"item {i} is neither a Recording nor a (group, template, seed, text) tuple")
    if not out:
        raise FairnessError("no outputs to evaluate")
    return out


def group_terms(data: Data) -> set[str]:
    """The protected values the prompts inserted (slice values of recordings); empty for tuples."""
    return {v for item in data if isinstance(item, Recording) for v in item.slice.values()}
