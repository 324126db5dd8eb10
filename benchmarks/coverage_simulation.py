"""Coverage of the 95% intervals, by simulation (issue: statistics and the gate).

Grids with known true per-slice rates (0.01–0.3) and gaps (including 0), per-slice n from
20 to 800, and within-prompt correlation (cells share a Beta-distributed rate across their
seeds and, paired, across slices). For each setting we draw grids, compute the intervals
the audit reports, and count how often they contain the truth: per-slice rates, the
worst-slice value and the max−min gap. Target: 93–97%.

Run by hand:  python benchmarks/coverage_simulation.py [--reps 200] [--bootstrap 400]
"""

from __future__ import annotations

import argparse
import itertools
import time

import numpy as np
from scipy import stats as sps

from fairness.audit._metrics import Design, Factor, Scope
from fairness.audit._stats import gap_interval, scope_stats, slice_intervals, worst_interval
from fairness.score._catalog import METRICS

SPEC = METRICS["stereotype_kw_rate"]


def design(n_cells: int, seeds: int, S: int = 4) -> Design:
    cluster = np.repeat(np.arange(n_cells), S * seeds)
    slices = np.tile(np.repeat(np.arange(S), seeds), n_cells)
    n = len(cluster)
    fam = Factor("family", ["F1"], np.zeros(n, dtype=np.int64))
    return Design(
        row_ids=[str(i) for i in range(n)], slices=[f"s{i}" for i in range(S)], slice_codes=slices,
        factors={"family": fam}, cluster=cluster, n_clusters=n_cells, scope_factors=("family",),
    )


def draw(d: Design, rates: np.ndarray, conc: float, rng: np.random.Generator) -> np.ndarray:
    """Binary outcomes; each cell draws u ~ U(0,1), slice s gets Beta quantile at u (paired, correlated)."""
    u = rng.random(d.n_clusters)
    p_cell = np.stack([sps.beta.ppf(u, r * conc, (1 - r) * conc) for r in rates], axis=1)  # (C × S)
    p = p_cell[d.cluster, d.slice_codes]
    return (rng.random(d.n) < p).astype(float)[:, None]


def run(reps: int, B: int, seed: int) -> list[dict]:
    rng = np.random.default_rng(seed)
    rows = []
    settings = itertools.product(
        [0.01, 0.05, 0.1, 0.3],  # base rate
        [0.0, 0.05],  # gap between the worst slice and the others
        [20, 100, 800],  # rows per slice
        [0.05, 0.2],  # ICC within a cell (1 / (conc + 1))
    )
    for base, gap, n_slice, icc in settings:
        seeds = 5
        n_cells = max(n_slice // seeds, 2)
        d = design(n_cells, seeds)
        rates = np.array([base, base, base, base + gap])
        conc = 1 / icc - 1
        scope = Scope("overall", (), np.ones(d.n, dtype=bool))
        hit_rate = hit_worst = hit_gap = 0.0
        for _ in range(reps):
            Y = draw(d, rates, conc, rng)
            st = scope_stats(d, Y, scope, [SPEC], B, int(rng.integers(1 << 31)))
            lo, hi = slice_intervals(st, [SPEC])
            hit_rate += float(np.mean((lo[:, 0] <= rates) & (rates <= hi[:, 0])))
            w = worst_interval(st, 0, SPEC)
            g = gap_interval(st, 0, SPEC)
            hit_worst += w.low <= rates.max() <= w.high
            hit_gap += g.low <= gap <= g.high
        rows.append({"base": base, "gap": gap, "n": n_slice, "icc": icc, "rate": hit_rate / reps, "worst": hit_worst / reps, "gap_cov": hit_gap / reps})
    return rows


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=200)
    ap.add_argument("--bootstrap", type=int, default=400)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    t0 = time.time()
    rows = run(args.reps, args.bootstrap, args.seed)
    print(f"{'rate':>5} {'gap':>5} {'n/slice':>8} {'icc':>5} | {'slice rate':>10} {'worst':>7} {'gap':>7}")
    for r in rows:
        print(f"{r['base']:>5} {r['gap']:>5} {r['n']:>8} {r['icc']:>5} | {r['rate']:>10.3f} {r['worst']:>7.3f} {r['gap_cov']:>7.3f}")
    for k in ("rate", "worst", "gap_cov"):
        v = np.array([r[k] for r in rows])
        print(f"{k}: mean {v.mean():.3f}, min {v.min():.3f}, share of settings in [0.93, 0.97]: {np.mean((v >= 0.93) & (v <= 0.97)):.2f}, below 0.93: {np.mean(v < 0.93):.2f}")
    print(f"{len(rows)} settings × {args.reps} reps in {time.time() - t0:.0f}s")


if __name__ == "__main__":
    main()
