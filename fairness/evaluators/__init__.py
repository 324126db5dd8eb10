"""Evaluators over recorded outputs: counterfactual divergence, refusal, sentiment/toxicity, BBQ.

Each takes `Recording`s (or plain `(group, template, seed, text)` tuples), is a pure
function of them plus a seed, and returns a frozen dataclass with point estimates,
cluster-bootstrap intervals and a caveat.
"""

from fairness.audit._interval import Interval
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
