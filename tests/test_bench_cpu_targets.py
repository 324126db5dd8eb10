"""benchmarks/bench_cpu_targets.py: how sure its verdict is, and the order its pairs run in.

The CPU figures themselves are measured by hand (`python benchmarks/bench_cpu_targets.py …`)."""

from __future__ import annotations

import importlib.util
import math
import os
import sys
from pathlib import Path

import numpy as np

_spec = importlib.util.spec_from_file_location(
    "bench_cpu_targets", Path(__file__).resolve().parents[1] / "benchmarks" / "bench_cpu_targets.py"
)
assert _spec is not None and _spec.loader is not None
bench = importlib.util.module_from_spec(_spec)
# As a script it may change its process: it puts benchmarks/ on sys.path, and its sibling bench_scale
# raises FAIRNESS_MAX_GRID_ROWS for the runs it starts. Neither may leak into the other tests.
_environ, _path = dict(os.environ), list(sys.path)
try:
    _spec.loader.exec_module(bench)
finally:
    os.environ.clear()
    os.environ.update(_environ)
    sys.path[:] = _path


def test_the_median_interval_is_the_order_statistics_the_binomial_allows():
    # n = 31: P(Binomial(31, ½) ≤ 9) = 0.0147 ≤ 0.025 < P(≤ 10) = 0.0354, so the 10th and 22nd values
    values = [float(v) for v in range(31, 0, -1)]
    assert bench.median_ci(values) == (10.0, 22.0)
    assert bench.median_ci([float(v) for v in range(1, 62)]) == (23.0, 39.0)  # n = 61: 23rd and 39th
    assert bench.median_ci([3.0, 1.0, 2.0, 6.0, 5.0, 4.0]) == (1.0, 6.0)  # n = 6: the range, coverage 62/64
    assert bench.median_ci([1.0, 2.0, 3.0, 4.0, 5.0]) is None  # n = 5: even the range covers only 30/32


def test_the_interval_covers_a_skewed_distributions_median_at_least_95_percent_of_the_time():
    rng = np.random.default_rng(7)
    median = math.exp(0.0)  # lognormal(0, 0.4): a right-skewed ratio, median 1
    hits = 0
    for _ in range(4000):
        lo, hi = bench.median_ci(rng.lognormal(0.0, 0.4, 31).tolist())
        hits += lo <= median <= hi
    assert hits / 4000 >= 0.955  # exact coverage at n = 31 is 0.9706; 4,000 draws have a standard error of 0.0027


def test_the_verdict_is_met_only_when_the_whole_interval_is_under_the_target():
    ratios = [0.58 + 0.001 * i for i in range(31)]  # interval [0.589, 0.601]
    assert bench.verdict(ratios, 0.65) == "met"
    assert bench.verdict(ratios, 0.595) == "unsettled"
    assert bench.verdict(ratios, 0.585) == "MISSED"
    assert bench.verdict([0.6, 0.7], 0.65) == "met (median only: too few pairs for an interval)"
    assert bench.verdict([0.6, 0.8], 0.65) == "MISSED (median only: too few pairs for an interval)"


def test_pairs_alternate_which_tree_runs_first_and_ratios_stay_paired():
    calls: list[str] = []
    cpu = {"A": 2.0, "B": 1.0}

    def measure(tree: Path, args: list[str]) -> float:
        calls.append(tree.name)
        cpu[tree.name] += 0.5  # the machine slows down run after run
        return cpu[tree.name]

    a, b, ratios = bench.paired((Path("A"), []), (Path("B"), []), 4, cpu=measure)
    assert calls == ["A", "B", "B", "A", "A", "B", "B", "A"]
    assert ratios == [1.5 / 2.5, 2.0 / 3.0, 2.5 / 3.5, 3.0 / 4.0]
    assert (a, b) == (3.25, 2.25)
