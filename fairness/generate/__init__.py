"""Stage 2 (live) — generating recordings: the resumable loop, engines, model fetch and dry-run costing.

Engines import their heavy libraries lazily; importing this package imports none of them.
"""

from fairness.generate._factory import run_generate
from fairness.generate._loop import generate
from fairness.generate._options import EngineOptions

__all__ = ["EngineOptions", "generate", "run_generate"]
