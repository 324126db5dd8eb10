"""The "how many more seeds" advice keeps its promise on fresh grids (issue 19).

Exact outcomes with a fixed seed; the full measurement is `benchmarks/stats_simulation.py --advice-reps 200`.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import numpy as np

_spec = importlib.util.spec_from_file_location("stats_simulation", Path(__file__).resolve().parents[1] / "benchmarks" / "stats_simulation.py")
assert _spec is not None and _spec.loader is not None
sim = importlib.util.module_from_spec(_spec)
sys.modules.setdefault("stats_simulation", sim)
_spec.loader.exec_module(sim)


def test_fail_side_advice_reaches_fail_on_fresh_grids():
    """One slice at 0.10, the others 0.03, Beta cell rates: 15 inconclusive grids, each followed at its advised seeds."""
    r = sim.follow_advice(sim.SCENARIOS[0], 15, np.random.default_rng(19))
    assert (r["grids"], r["no_advice"], round(r["reached"] * (r["grids"] - r["no_advice"]))) == FAIL_SIDE


def test_pass_side_advice_reaches_pass_on_fresh_grids():
    """Every slice at 0.02: a pass needs all four slices' upper bounds under 0.05 at once."""
    r = sim.follow_advice(sim.SCENARIOS[2], 15, np.random.default_rng(19))
    assert (r["grids"], r["no_advice"], round(r["reached"] * (r["grids"] - r["no_advice"]))) == PASS_SIDE


FAIL_SIDE = (15, 0, 15)  # 15 grids, advice for all, all 15 reach fail
PASS_SIDE = (15, 1, 14)  # one grid too near the threshold to size; the other 14 reach pass
