"""Evaluators over recorded outputs: counterfactual divergence, refusal, sentiment/toxicity, BBQ.

Each takes `Recording`s (or plain `(group, template, seed, text)` tuples), is a pure
function of them plus a seed, and returns a frozen dataclass with point estimates,
cluster-bootstrap intervals and a caveat.

Submodules load on first use (PEP 562), so importing one evaluator, or the adapter's
list of names, does not pull in SciPy or every other evaluator.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from fairness.audit._intervals import Interval
    from fairness.evaluators._inputs import Sample
    from fairness.evaluators._resample import GroupRates
    from fairness.evaluators.bbq import (
        BbqItem,
        BbqReport,
        BbqScores,
        Parsed,
        bbq_evaluate,
        bbq_prompt,
        bbq_scores,
        load_bbq,
        parse_answer,
        sample_path,
    )
    from fairness.evaluators.bbq_recordings import BbqManifest, record_bbq, replay_bbq
    from fairness.evaluators.counterfactual import CounterfactualReport, Divergence, counterfactual_divergence
    from fairness.evaluators.refusal import RefusalReport, classify, paper_refusal, refusal_disparity, requested_format
    from fairness.evaluators.sentiment import (
        LexicalToxicityScorer,
        ScoreDisparity,
        TextScorer,
        VaderScorer,
        available_scorers,
        load_scorer,
        sentiment_disparity,
        toxicity_disparity,
    )

_LAZY = {
    "Sample": "fairness.evaluators._inputs",
    "GroupRates": "fairness.evaluators._resample",
    "Interval": "fairness.audit._intervals",
    "BbqItem": "fairness.evaluators.bbq",
    "BbqReport": "fairness.evaluators.bbq",
    "BbqScores": "fairness.evaluators.bbq",
    "Parsed": "fairness.evaluators.bbq",
    "bbq_evaluate": "fairness.evaluators.bbq",
    "bbq_prompt": "fairness.evaluators.bbq",
    "bbq_scores": "fairness.evaluators.bbq",
    "load_bbq": "fairness.evaluators.bbq",
    "parse_answer": "fairness.evaluators.bbq",
    "sample_path": "fairness.evaluators.bbq",
    "BbqManifest": "fairness.evaluators.bbq_recordings",
    "record_bbq": "fairness.evaluators.bbq_recordings",
    "replay_bbq": "fairness.evaluators.bbq_recordings",
    "CounterfactualReport": "fairness.evaluators.counterfactual",
    "Divergence": "fairness.evaluators.counterfactual",
    "counterfactual_divergence": "fairness.evaluators.counterfactual",
    "RefusalReport": "fairness.evaluators.refusal",
    "classify": "fairness.evaluators.refusal",
    "paper_refusal": "fairness.evaluators.refusal",
    "refusal_disparity": "fairness.evaluators.refusal",
    "requested_format": "fairness.evaluators.refusal",
    "LexicalToxicityScorer": "fairness.evaluators.sentiment",
    "ScoreDisparity": "fairness.evaluators.sentiment",
    "TextScorer": "fairness.evaluators.sentiment",
    "VaderScorer": "fairness.evaluators.sentiment",
    "available_scorers": "fairness.evaluators.sentiment",
    "load_scorer": "fairness.evaluators.sentiment",
    "sentiment_disparity": "fairness.evaluators.sentiment",
    "toxicity_disparity": "fairness.evaluators.sentiment",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'fairness.evaluators' has no attribute {name!r}")
    value = getattr(import_module(module), name)
    globals()[name] = value
    return value


__all__ = [
    "BbqItem",
    "BbqManifest",
    "BbqReport",
    "BbqScores",
    "CounterfactualReport",
    "Divergence",
    "GroupRates",
    "Interval",
    "LexicalToxicityScorer",
    "Parsed",
    "RefusalReport",
    "Sample",
    "ScoreDisparity",
    "TextScorer",
    "VaderScorer",
    "available_scorers",
    "bbq_evaluate",
    "bbq_prompt",
    "bbq_scores",
    "classify",
    "counterfactual_divergence",
    "load_bbq",
    "load_scorer",
    "paper_refusal",
    "parse_answer",
    "record_bbq",
    "refusal_disparity",
    "replay_bbq",
    "requested_format",
    "sample_path",
    "sentiment_disparity",
    "toxicity_disparity",
]
