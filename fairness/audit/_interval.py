"""The one interval type, shared by the audit's statistics and the peer-parity evaluators."""

from __future__ import annotations

from dataclasses import dataclass

from fairness._util.canonical import json_number


@dataclass(frozen=True)
class Interval:
    """Bounds [low, high] of a statistic; NaN bounds when the data cannot support one.

    `method` names the construction (`simultaneous-max`, `expanded-percentile` …); the
    resampling fields are filled where a bootstrap produced the interval.
    """

    low: float
    high: float
    method: str
    confidence: float | None = None
    """Nominal coverage, e.g. 0.95."""
    n_resamples: int | None = None
    """Bootstrap resamples behind the bounds."""
    n_clusters: int | None = None
    """Independent units resampled (templates, prompts or BBQ question templates)."""

    def as_list(self) -> list[float | None]:
        """[low, high] as results files store numbers (rounded; None where not finite)."""
        return [json_number(self.low), json_number(self.high)]

    def covers(self, value: float) -> bool:
        return bool(self.low <= value <= self.high)
