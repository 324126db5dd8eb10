"""Stage 2 (live) — generating recordings: the resumable loop, engines, model fetch and dry-run costing.

Engines import their heavy libraries lazily; importing this package imports none of them.
"""

from fairness.generate._loop import generate

__all__ = ["generate"]
