"""llm-fairness-check: audit a large language model for demographic fairness.

suite → generate | replay → score → metrics → stats → gate → report.

The public names below are the supported API; modules with a leading underscore may move.
Heavier stages load on first use, so `import fairness` stays cheap.
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

__version__ = "0.1.0"

from ._errors import FairnessError
from ._records import Case, Recording, SamplingParams
from ._rules import DecisionRule
from ._suite import Suite, load_suite, parse_suite

_LAZY = {
    "AuditOptions": "._audit",
    "FairnessRun": "._audit",
    "audit": "._audit",
    "run_audit": "._run",
    "score_texts": "._score",
    "RecordingSet": "._recording",
    "ReplayProvider": "._recording",
    "content_key": "._recording",
    "merge_recordings": "._recording",
    "generate": "._generate",
    "diff_runs": "._diff",
    "check_state": "._gate",
    "exit_code": "._gate",
}

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
    *_LAZY,
]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(import_module(_LAZY[name], __name__), name)
    raise AttributeError(f"module 'fairness' has no attribute {name!r}")
