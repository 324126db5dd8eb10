"""The one scorer protocol every scorer plug-in speaks, and the check of its contract.

A scorer takes a batch of texts and returns one float64 per text: 0/1 for a `flag` scorer,
any finite number for a `number` scorer, NaN where it has no valid score. Its `version`
string is recorded with every score it produces (and enters their content keys), so a
changed scorer never passes off old scores as its own.

A scorer may also offer `score_details(texts) -> list[Scored]`: the value plus what it read
(a judge's raw answer), recorded next to each score so an invalid one can be inspected.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal, Protocol, runtime_checkable

import numpy as np

from fairness._util.errors import FairnessError

Output = Literal["flag", "number"]
OUTPUTS: tuple[str, ...] = ("flag", "number")


@runtime_checkable
class Scorer(Protocol):
    """Scores texts one float64 each (`flag`: 0 or 1; `number`: finite); NaN = no valid score."""

    name: str
    """The scorer's name (a built-in's kind, or its entry-point name)."""
    version: str
    """Recorded with every score and part of its content key: change it when scores would change."""
    output: Output
    """`flag` (0/1 per text, a rate metric) or `number` (any finite value)."""

    def score(self, texts: Sequence[str]) -> np.ndarray: ...


@dataclass(frozen=True)
class Scored:
    """One text's score as recorded: the value (NaN when not valid) and what the scorer read."""

    value: float
    valid: bool
    raw: str | None = None
    """The scorer's raw answer (a judge's reply), kept so an invalid score can be inspected."""


def checked_scores(scorer: Scorer, texts: Sequence[str], *, bounds: tuple[float, float] | None = None) -> np.ndarray:
    """Run `scorer` and check its contract: one float per text; a flag scorer's values in {0, 1};
    finite values within `bounds` where given. NaN is allowed everywhere (no valid score)."""
    scores = np.asarray(scorer.score(list(texts)), dtype=np.float64)
    return check_values(scorer, scores, len(texts), bounds)


def check_values(scorer: Scorer, scores: np.ndarray, n: int, bounds: tuple[float, float] | None = None) -> np.ndarray:
    """`checked_scores`' checks on values already computed."""
    if scores.shape != (n,):
        raise FairnessError(f"scorer `{scorer.name}` returned shape {scores.shape} for {n} texts")
    if np.isinf(scores).any():
        raise FairnessError(f"scorer `{scorer.name}` returned an infinite value (use NaN for no valid score)")
    finite = scores[np.isfinite(scores)]
    if getattr(scorer, "output", "number") == "flag" and not np.isin(finite, (0.0, 1.0)).all():
        raise FairnessError(f"scorer `{scorer.name}` is a flag scorer but returned values other than 0, 1 and NaN")
    if bounds is not None and finite.size and (finite.min() < bounds[0] or finite.max() > bounds[1]):
        raise FairnessError(f"scorer `{scorer.name}` returned values outside [{bounds[0]:g}, {bounds[1]:g}]")
    return scores


def details(scorer: Scorer, texts: Sequence[str]) -> list[Scored]:
    """Per-text `Scored` records: the scorer's own `score_details` where it has one, else its values."""
    own = getattr(scorer, "score_details", None)
    if own is not None:
        out = list(own(list(texts)))
        values = np.array([s.value for s in out], dtype=np.float64)
        check_values(scorer, values, len(texts))
        if any(s.valid != bool(np.isfinite(s.value)) for s in out):
            raise FairnessError(f"scorer `{scorer.name}` marked a score valid that is NaN (or invalid that is not)")
        return out
    values = checked_scores(scorer, texts)
    return [Scored(float(v), bool(np.isfinite(v))) for v in values]
