"""Cost of the whole `run` process on the committed recordings (import, replay, scoring,
metrics, intervals, permutation tests, all outputs), with and without the peer-parity
evaluators: wall time (best of N) and CPU time of the child (user + system, median of N),
and the CPU ratio of `--evaluators all` to the default run (issue 13's target: at most 2).

The configurations run alternately, so a busy machine slows them alike.

Run by hand:  python benchmarks/bench_run.py [--repeat 5]
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
REC = ROOT / "recordings/fairness-cards/qwen-v0.1/SmolLM2-135M-Instruct-Q4_1"

CONFIGS = [
    ("rubric, metrics, intervals (B=2000), permutations (P=2000), all outputs", ["--evaluators", "none"]),
    ("… without permutation tests", ["--evaluators", "none", "--permutations", "0"]),
    ("… plus all peer-parity evaluators", ["--evaluators", "all"]),
]


def timed(extra: list[str]) -> tuple[float, float]:
    """(wall seconds, child CPU seconds) of one `run`."""
    with tempfile.TemporaryDirectory() as out:
        cmd = [sys.executable, "-m", "fairness.cli", "run", "--recordings", str(REC), "--out", out, "--quiet",
               "--allow-incomplete", *extra]
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        t0 = time.perf_counter()
        subprocess.run(cmd, cwd=ROOT, capture_output=True, check=False, env={**os.environ, "PYTHONPATH": str(ROOT)})
        wall = time.perf_counter() - t0
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    with open(REC / "records.jsonl", encoding="utf-8") as fh:
        rows = sum(1 for _ in fh)
    print(f"{rows} records; wall: best of {args.repeat}, CPU: median of {args.repeat}")
    runs: list[list[tuple[float, float]]] = [[] for _ in CONFIGS]
    for _ in range(args.repeat):
        for k, (_, extra) in enumerate(CONFIGS):
            runs[k].append(timed(extra))
    cpu = []
    for (label, _), r in zip(CONFIGS, runs, strict=True):
        cpu.append(statistics.median(c for _, c in r))
        print(f"{min(w for w, _ in r):6.2f} s wall  {cpu[-1]:6.2f} s CPU  {label}")
    paired = statistics.median(a[1] / d[1] for a, d in zip(runs[2], runs[0], strict=True))
    print(f"{cpu[2] / cpu[0]:6.2f}×  CPU of `--evaluators all` over the default run (paired median {paired:.2f}×; target ≤ 2)")


if __name__ == "__main__":
    main()
