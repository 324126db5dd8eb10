"""llm-fairness-check: audit a large language model for demographic fairness.

suite → generate | replay → score → metrics → stats → gate → report, one sub-package per
stage (see docs/architecture.md). The names below are the supported API; everything under a
leading underscore may move. Every name loads its stage on first use, so `import fairness`
loads nothing but the version (no pydantic, no numpy); the `TYPE_CHECKING` block shows type
checkers the real imports. `fairness.audit` and `fairness.generate` are the stage packages; their
functions are `fairness.audit.audit` and `fairness.generate.generate` (the main jobs are
`run_audit` and `run_generate`).
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

from fairness._version import __version__

if TYPE_CHECKING:
    from fairness._util.errors import FairnessError
    from fairness.audit import AuditOptions, FairnessRun, check_state, diff_runs, exit_code
    from fairness.generate import EngineOptions, run_generate
    from fairness.monitor import MonitorOptions, MonitorRun, monitor_logs
    from fairness.pipeline import RunOptions, RunOutputs, run_audit
    from fairness.recordings import Manifest, ModelInfo, RecordingSet, ReplayProvider, content_key, merge_recordings
    from fairness.recordings._record import Recording
    from fairness.score import ScoreTable, score_texts
    from fairness.suite import Case, DecisionRule, SamplingParams, Suite, load_suite, parse_suite

_LAZY = {
    "FairnessError": "fairness._util.errors",
    "Recording": "fairness.recordings._record",
    "Case": "fairness.suite",
    "DecisionRule": "fairness.suite",
    "SamplingParams": "fairness.suite",
    "Suite": "fairness.suite",
    "load_suite": "fairness.suite",
    "parse_suite": "fairness.suite",
    "AuditOptions": "fairness.audit",
    "FairnessRun": "fairness.audit",
    "check_state": "fairness.audit",
    "diff_runs": "fairness.audit",
    "exit_code": "fairness.audit",
    "EngineOptions": "fairness.generate",
    "run_generate": "fairness.generate",
    "MonitorOptions": "fairness.monitor",
    "MonitorRun": "fairness.monitor",
    "monitor_logs": "fairness.monitor",
    "RunOptions": "fairness.pipeline",
    "RunOutputs": "fairness.pipeline",
    "run_audit": "fairness.pipeline",
    "Manifest": "fairness.recordings",
    "ModelInfo": "fairness.recordings",
    "RecordingSet": "fairness.recordings",
    "ReplayProvider": "fairness.recordings",
    "content_key": "fairness.recordings",
    "merge_recordings": "fairness.recordings",
    "ScoreTable": "fairness.score",
    "score_texts": "fairness.score",
}

__all__ = [
    "AuditOptions",
    "Case",
    "DecisionRule",
    "EngineOptions",
    "FairnessError",
    "FairnessRun",
    "Manifest",
    "ModelInfo",
    "MonitorOptions",
    "MonitorRun",
    "Recording",
    "RecordingSet",
    "ReplayProvider",
    "RunOptions",
    "RunOutputs",
    "SamplingParams",
    "ScoreTable",
    "Suite",
    "__version__",
    "check_state",
    "content_key",
    "diff_runs",
    "exit_code",
    "load_suite",
    "merge_recordings",
    "monitor_logs",
    "parse_suite",
    "run_audit",
    "run_generate",
    "score_texts",
]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'fairness' has no attribute {name!r}")

