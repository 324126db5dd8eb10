"""llm-fairness-check: audit a large language model for demographic fairness.

suite → generate | replay → score → metrics → stats → gate → report.
"""

from __future__ import annotations

__version__ = "0.1.0"

from ._errors import FairnessError
from ._records import Case, Recording, SamplingParams
from ._rules import DecisionRule
from ._suite import Suite, load_suite, parse_suite

__all__ = [
    "Case",
    "DecisionRule",
    "FairnessError",
    "Recording",
    "SamplingParams",
    "Suite",
    "__version__",
    "load_suite",
    "parse_suite",
]
