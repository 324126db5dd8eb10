"""The card's own words for a suite: what it states under `card:`, else the paper's text for the
paper's built-in suite, else a neutral line saying the suite did not state it."""

from __future__ import annotations

from fairness.suite._suite import BUILTIN_SUITES, CardText, Suite

PAPER_CARD = CardText(
    intended_use=[
        "Illustrative probe of prompt-family sensitivity for a single LLM.",
        "Pull-request gate on committed recordings (replay).",
    ],
    out_of_scope=[
        "Production deployment claims for any served system built on top of this model.",
        "Hiring, credit, healthcare, or other allocative decisions.",
        "Claims that generalise to other model versions or families.",
    ],
    model_description="The model named in the recordings' manifest, audited as a base model with a fixed system prompt.",
    contact="The llm-fairness-check maintainers, through the project's issue tracker.",
)
"""The paper's text, used only for the paper's built-in suite (for the keys it leaves out)."""

NOT_STATED = CardText(
    intended_use=["Not stated: the suite does not say what this audit is for (suite key `card.intended_use`)."],
    out_of_scope=["Not stated: the suite does not say which uses this audit does not support (suite key `card.out_of_scope`)."],
    model_description="Not stated: the suite does not describe the audited model (suite key `card.model_description`).",
    contact="Not stated: the suite names no contact (suite key `card.contact`).",
)
"""What a user suite's card says for a key the suite leaves out."""


def card_text(suite: Suite) -> CardText:
    """Every key of the card's text filled: the suite's own, else the default for this suite."""
    fallback = PAPER_CARD if suite.name in BUILTIN_SUITES else NOT_STATED
    own = suite.card or CardText()
    return CardText(**{name: getattr(own, name) if getattr(own, name) is not None else getattr(fallback, name)
                       for name in CardText.model_fields})
