"""Issue 13's CPU and memory targets, measured as ratios in one run on this machine.

1. The default `run` on the committed 3,200 records: this tree's CPU ÷ a baseline tree's (the
   code before the scale work: `git worktree add ../base ca8781b`), paired and alternating
   so both see the same load; target ≤ 0.5.
2. `run --evaluators all` ÷ the default `run` (this tree, paired); target ≤ 2.
3. 320,000 synthetic rows ÷ 3,200 synthetic rows (this tree; `bench_scale.make_set`), with
   peak RSS; targets ≤ 12 and ≤ 400 MiB. `--big` adds 3,200,000 rows (≤ 1 GiB).
4. Issue 19, item 8 (start-up): with `--startup-baseline`, the default `run` ÷ the same run in
   a tree at 00e2f3f (`git worktree add ../base00e2 00e2f3f`), paired; target ≤ 0.65. Imports
   were most of a default run's CPU, `scipy.special`'s the largest (`fairness._util.special`).

CPU is user + system time of the `run` process (`getrusage(RUSAGE_CHILDREN)` of a wrapper), so
import time counts, as a user pays it. Each pair runs A and B back to back, in alternating order
(A first in odd pairs, B first in even ones), so a drift in the machine's state does not favour either.

Estimand of a ratio row: the median, over such pairs, of B's CPU ÷ A's CPU. It is printed with a
distribution-free 95% interval (order statistics of the pair ratios; `median_ci`), and the verdict
says how sure it is: `met` when the whole interval is at or under the target, `MISSED` when it is
all over it, `unsettled` when it straddles the target (more pairs may settle it). The interval
covers the sampling noise of independent pairs; it does not cover a change of machine state
between runs of the benchmark (on a busy machine the baseline's spinning OpenBLAS threads cost it
relatively more CPU, which lowers the ratio), so runs taken at different times can disagree by more
than it: compare runs taken on an idle machine.

Run by hand:  python benchmarks/bench_cpu_targets.py --baseline ../base [--startup-baseline ../base00e2]
              [--repeat 7] [--big]
              python benchmarks/bench_cpu_targets.py --startup-baseline ../base00e2 --startup-only --repeat 61
Compile both trees' bytecode first (`python -m compileall -q fairness`), or the first runs pay for it.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

from bench_scale import WRAPPER, make_set  # noqa: E402

REC = "recordings/fairness-cards/qwen-v0.1/SmolLM2-135M-Instruct-Q4_1"


def run_cpu(tree: Path, args: list[str]) -> dict:
    """CPU seconds and peak RSS of one `run` of the package in `tree` (its own `fairness`, via PYTHONPATH)."""
    with tempfile.TemporaryDirectory() as out:
        cmd = [sys.executable, "-m", "fairness.cli", "run", "--out", out, "--quiet", *args]
        env = {**os.environ, "PYTHONPATH": str(tree)}
        res = subprocess.run([sys.executable, "-c", WRAPPER, *cmd], cwd=tree, env=env, capture_output=True, text=True,
                             check=True)
    data = json.loads(res.stdout)
    if data["rc"] not in (0, 1, 3):  # gate outcomes; 2 is an error
        raise SystemExit(f"run failed in {tree} ({data['rc']}): {data['stderr']}")
    return data


def paired(a: tuple[Path, list[str]], b: tuple[Path, list[str]], repeat: int,
           cpu: Callable[[Path, list[str]], float] | None = None) -> tuple[float, float, list[float]]:
    """Median CPU of a and of b, and the per-pair ratios b ÷ a; a pair runs a then b, the next b then a."""
    measure = cpu or (lambda tree, args: run_cpu(tree, args)["cpu"])
    ca, cb = [], []
    for i in range(repeat):
        if i % 2:
            cb.append(measure(*b))
            ca.append(measure(*a))
        else:
            ca.append(measure(*a))
            cb.append(measure(*b))
    return statistics.median(ca), statistics.median(cb), [y / x for x, y in zip(ca, cb, strict=True)]


def median_ci(values: list[float], level: float = 0.95) -> tuple[float, float] | None:
    """Distribution-free interval for the median of the distribution `values` are drawn from:
    [x₍ₖ₎, x₍ₙ₊₁₋ₖ₎] of the sorted values, with the largest k such that P(Binomial(n, ½) < k) ≤
    (1 − level)/2, so it covers the median with probability ≥ level for independent draws of a
    continuous variable (no normality assumed). None when n is too small for any (n < 6 at 95%)."""
    n, tail = len(values), (1 - level) / 2
    below, k = 0.0, 0
    while k < n and below + math.comb(n, k) / 2**n <= tail:
        below += math.comb(n, k) / 2**n
        k += 1
    if k == 0:
        return None
    xs = sorted(values)
    return xs[k - 1], xs[n - k]


def verdict(ratios: list[float], target: float) -> str:
    """`met`, `MISSED` or `unsettled` (the 95% interval of the median ratio straddles `target`); with
    too few pairs for an interval, the median alone decides and the verdict says so."""
    ci = median_ci(ratios)
    if ci is None:
        return ("met" if statistics.median(ratios) <= target else "MISSED") + " (median only: too few pairs for an interval)"
    lo, hi = ci
    return "met" if hi <= target else "MISSED" if lo > target else "unsettled"


def row(name: str, a: float, b: float, ratios: list[float], target: float) -> str:
    ci = median_ci(ratios)
    interval = f" [{ci[0]:.2f}–{ci[1]:.2f}]" if ci is not None else ""
    spread = f" ({min(ratios):.2f}–{max(ratios):.2f})" if len(ratios) > 1 else ""
    return (f"| {name} | {a:.2f} | {b:.2f} | {statistics.median(ratios):.2f}{interval}{spread} | ≤ {target:.2f} | "
            f"{verdict(ratios, target)} |")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--baseline", type=Path, help="a checkout of the code before the scale work (ca8781b)")
    ap.add_argument("--startup-baseline", type=Path, help="a checkout of 00e2f3f, before issue 19's start-up work")
    ap.add_argument("--startup-only", action="store_true", help="only the start-up row (needs --startup-baseline)")
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--big", action="store_true", help="also run 3,200,000 rows (minutes, ~3 GB of disk)")
    args = ap.parse_args()
    if args.startup_only and args.startup_baseline is None:
        ap.error("--startup-only needs --startup-baseline")
    if not args.startup_only and args.baseline is None:
        ap.error("--baseline is required (or --startup-only with --startup-baseline)")
    rows = ["| measure | A: CPU (s) | B: CPU (s) | B ÷ A: median [95% CI] (range) | target | |", "|---|---:|---:|---:|---:|---|"]

    if args.startup_baseline is not None:
        a, b, r = paired((args.startup_baseline, ["--recordings", REC]), (ROOT, ["--recordings", REC]), args.repeat)
        rows.append(row("default run: A 00e2f3f, B this tree", a, b, r, 0.65))
        if args.startup_only:
            print("\n".join(rows))
            return
    a, b, r = paired((args.baseline, ["--recordings", REC]), (ROOT, ["--recordings", REC]), args.repeat)
    rows.append(row("default run: A baseline, B this tree", a, b, r, 0.50))
    a, b, r = paired((ROOT, ["--recordings", REC]), (ROOT, ["--recordings", REC, "--evaluators", "all"]), args.repeat)
    rows.append(row("A default run, B `--evaluators all`", a, b, r, 2.00))

    with tempfile.TemporaryDirectory() as tmp:
        where = Path(tmp)
        small = make_set(3_200, where)
        large = make_set(320_000, where)
        s_args = ["--suite", str(small[0]), "--recordings", str(small[1])]
        l_args = ["--suite", str(large[0]), "--recordings", str(large[1])]
        cs, cl, rss = [], [], []
        for _ in range(max(1, args.repeat // 3)):
            cs.append(run_cpu(ROOT, s_args)["cpu"])
            m = run_cpu(ROOT, l_args)
            cl.append(m["cpu"])
            rss.append(m["maxrss_kib"] / 1024)
        ratios = [y / x for x, y in zip(cs, cl, strict=True)]
        rows.append(row("A 3,200 rows, B 320,000 rows", statistics.median(cs), statistics.median(cl), ratios, 12.0))
        rows.append(f"| peak RSS at 320,000 rows | | {max(rss):.0f} MiB | | ≤ 400 MiB | {'met' if max(rss) <= 400 else 'MISSED'} |")
        if args.big:
            for p in large[1].iterdir():
                p.unlink()
            big = make_set(3_200_000, where)
            m = run_cpu(ROOT, ["--suite", str(big[0]), "--recordings", str(big[1])])
            mib = m["maxrss_kib"] / 1024
            rows.append(f"| 3,200,000 rows: CPU {m['cpu']:.0f} s, peak RSS | | {mib:.0f} MiB | | ≤ 1 GiB | "
                        f"{'met' if mib <= 1024 else 'MISSED'} |")
    print("\n".join(rows))


if __name__ == "__main__":
    main()
