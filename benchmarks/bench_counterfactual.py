"""Counterfactual divergence on the full default grid: the speed goal (under 10 s on one core).

Moved out of the tests, where a wall-clock bound is flaky on a loaded runner.

Run by hand:  python benchmarks/bench_counterfactual.py [--repeat 3]
"""

from __future__ import annotations

import argparse
import time

from fairness.evaluators.counterfactual import counterfactual_divergence
from fairness.recordings._record import Recording
from fairness.suite._suite import load_suite

GOAL_S = 10.0


def grid_recordings() -> list[Recording]:
    """Synthetic outputs for every default grid row (benchmark input only, never committed)."""
    return [
        Recording.from_case(c, key=f"k{c.index}", output=f"seed {c.seed} text great {c.slice_id}", prompt_tokens=1,
                            completion_tokens=1, finish_reason="stop")
        for c in load_suite("fairness-cards/qwen-v0.1").expand()
    ]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    recs = grid_recordings()
    times = []
    for _ in range(args.repeat):
        t0 = time.perf_counter()
        counterfactual_divergence(recs, n_resamples=1000, n_permutations=199)
        times.append(time.perf_counter() - t0)
    best = min(times)
    print(f"{len(recs)} rows, 1000 resamples, 199 permutations: best {best:.2f}s of {args.repeat} "
          f"({'meets' if best < GOAL_S else 'misses'} the {GOAL_S:g}s goal)")


if __name__ == "__main__":
    main()
