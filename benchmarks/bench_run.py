"""Wall time of the whole `run` process on the committed recordings (import, replay, scoring,
metrics, intervals, permutation tests, all outputs), best of N, with and without the
peer-parity evaluators.

Run by hand:  python benchmarks/bench_run.py [--repeat 5]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
REC = ROOT / "recordings/fairness-cards/qwen-v0.1/SmolLM2-135M-Instruct-Q4_1"


def timed(extra: list[str], repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        with tempfile.TemporaryDirectory() as out:
            cmd = [sys.executable, "-m", "fairness.cli", "run", "--recordings", str(REC), "--out", out, "--quiet",
                   "--allow-incomplete", *extra]
            t0 = time.perf_counter()
            subprocess.run(cmd, cwd=ROOT, capture_output=True, check=False)
            best = min(best, time.perf_counter() - t0)
    return best


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    with open(REC / "records.jsonl", encoding="utf-8") as fh:
        rows = sum(1 for _ in fh)
    print(f"{rows} records")
    for label, extra in [
        ("rubric, metrics, intervals (B=2000), permutations (P=2000), all outputs", ["--evaluators", "none"]),
        ("… without permutation tests", ["--evaluators", "none", "--permutations", "0"]),
        ("… plus all peer-parity evaluators", ["--evaluators", "all"]),
    ]:
        print(f"{timed(extra, args.repeat):6.2f} s  {label}")


if __name__ == "__main__":
    main()
