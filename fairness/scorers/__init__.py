"""Scorer plug-ins: anything that turns a batch of output texts into one number or flag each.

The one protocol (`Scorer`, in `_protocol`): a `name`, a `version` string recorded with every
score, an `output` kind (`flag`: 0/1, or `number`) and `score(texts) -> float64 array`, NaN
where the scorer has no valid score for a text (a judge answer that did not parse). Built in:
`vader` and `lexical-toxicity` (the sentiment evaluator's), `judge` (an LLM through any
OpenAI-compatible endpoint, OpenAI or Anthropic) and `hf-classifier` (a Hugging Face
text-classification model); others register under the entry-point group `fairness.scorers`.

Scores that need a model or the network are recorded once (`llm-fairness-check score`) into
the recording set, content-keyed and checksummed (`_store`), and replayed with no network,
key or model: a replayed audit reads them like it reads recorded generations.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from fairness.scorers._agreement import Agreement, agreement
    from fairness.scorers._config import ScorerConfig, parse_scorers
    from fairness.scorers._protocol import Scorer, checked_scores
    from fairness.scorers._registry import ENTRY_POINT_GROUP, available_scorers, build_scorer, load_scorer
    from fairness.scorers._store import ScoreColumn, record_scores, replay_scores

_EXPORTS = {
    "Agreement": "_agreement", "agreement": "_agreement",
    "ScorerConfig": "_config", "parse_scorers": "_config",
    "Scorer": "_protocol", "checked_scores": "_protocol",
    "ENTRY_POINT_GROUP": "_registry", "available_scorers": "_registry", "build_scorer": "_registry",
    "load_scorer": "_registry",
    "ScoreColumn": "_store", "record_scores": "_store", "replay_scores": "_store",
}


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(name)
    import importlib

    return getattr(importlib.import_module(f"fairness.scorers.{_EXPORTS[name]}"), name)


__all__ = [
    "ENTRY_POINT_GROUP", "Agreement", "ScoreColumn", "Scorer", "ScorerConfig", "agreement", "available_scorers",
    "build_scorer", "checked_scores", "load_scorer", "parse_scorers", "record_scores", "replay_scores",
]
