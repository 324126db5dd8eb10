"""Intervals and gate under realistic template effects, for both estimands (issue 10). Run by hand.

Replaces coverage_simulation.py, which simulated only the bootstrap's own model and reported
no widths and no one-sided misses.

Grid: one family of the default suite: 5 paraphrases × 4 occupations × 2 regimes = 40 template
cells, 4 slices, 5 seeds → 200 rows per slice. Template effects on the logit scale, either
independent per cell (shared by the cell's slices) or crossed paraphrase + occupation (each
sd/√2, so the total template sd is the same), sd 0.5 or 1.0; base rates 0.01/0.05/0.10/0.25,
with and without one slice at twice the base rate. Only per (cell, slice) counts are drawn.

Truths: **grid** = each slice's mean rate over this grid's 40 cells (the gate's estimand);
**population** = the expected rate over new templates (Gauss–Hermite over the logit effect).
Reports coverage, one-sided lower-end miss and mean width of the worst-slice and gap intervals,
today's method (Wilson on a bootstrap effective n with the pooled-design-effect floor, kept
below verbatim) beside the new one, and the gate's operating characteristics at true worst
rates 0.02–0.10 (threshold 0.05, 1 and 4 families all at that rate). Finally the verdicts of
the committed recordings across audit seeds.

The gate runs 2,000 grids per row by default: at 400 the standard error of a 2% false-fail
rate is 0.7 points, too coarse to judge a 2.5% target.

    python benchmarks/stats_simulation.py [--reps 400] [--gate-reps 2000] [--audit-seeds 200]

Issue 19's check of the "how many more seeds" advice and the default grid's operating
characteristic (about 10 minutes on 2 cores):

    python benchmarks/stats_simulation.py --only-advice --advice-reps 200 --oc-reps 1000
"""

from __future__ import annotations

import argparse
import itertools
import math
import time
from dataclasses import dataclass
from pathlib import Path
from statistics import NormalDist

import numpy as np
from scipy import special, stats

from fairness.audit._audit import _settle, rule_intervals
from fairness.audit._gate import check_state
from fairness.audit._intervals import CellCounts, SliceBounds, gap_interval, worst_interval
from fairness.score._catalog import METRICS
from fairness.suite._rules import DecisionRule

P, N_OCC, R, S, SEEDS = 5, 4, 2, 4, 5
C = P * N_OCC * R
PAR = np.repeat(np.arange(P), N_OCC * R)
OCC = np.tile(np.repeat(np.arange(N_OCC), R), P)
ALPHA = 0.05
SPEC = METRICS["stereotype_kw_rate"]
GH_X, GH_W = np.polynomial.hermite_e.hermegauss(60)


def effects(structure: str, sd: float, rng: np.random.Generator) -> np.ndarray:
    if structure == "cell":
        return rng.normal(0.0, sd, C)
    return rng.normal(0.0, sd / math.sqrt(2), P)[PAR] + rng.normal(0.0, sd / math.sqrt(2), N_OCC)[OCC]


def population_rate(rate: float, sd: float) -> float:
    """E over new templates of expit(logit(rate) + sd·Z)."""
    return float((special.expit(special.logit(rate) + sd * GH_X) * GH_W).sum() / GH_W.sum())


# -- today's method, kept verbatim for the comparison (fairness/audit/_stats.py before issue 10) -----


def _old_bootstrap_weights(n_clusters: int, B: int, rng: np.random.Generator) -> np.ndarray:
    idx = rng.integers(0, n_clusters, size=(B, n_clusters))
    flat = (idx + (np.arange(B) * n_clusters)[:, None]).ravel()
    return np.bincount(flat, minlength=B * n_clusters).reshape(B, n_clusters).astype(np.float64)


def _old_effective_n(p, se, n, pooled, pooled_se, n_pooled):
    with np.errstate(invalid="ignore", divide="ignore"):
        binom = p * (1 - p) / n
        deff = se**2 / binom
        pooled_binom = pooled * (1 - pooled) / n_pooled
        pooled_deff = np.where(pooled_binom > 0, pooled_se**2 / pooled_binom, 1.0)
    pooled_deff = np.where(np.isfinite(pooled_deff), np.maximum(pooled_deff, 1.0), 1.0)
    deff = np.where((binom > 0) & np.isfinite(deff), deff, 1.0)
    deff = np.maximum(np.maximum(deff, pooled_deff), 1.0)
    return n / deff


def _old_wilson(p, n, z):
    with np.errstate(invalid="ignore", divide="ignore"):
        denom = 1 + z * z / n
        centre = (p + z * z / (2 * n)) / denom
        half = z * np.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return np.clip(centre - half, 0.0, 1.0), np.clip(centre + half, 0.0, 1.0)


def old_intervals(T: np.ndarray, N: np.ndarray, B: int, rng: np.random.Generator):
    """Today's worst-slice and gap intervals from the (C × S) cell counts."""
    n = N.sum(0)
    values = T.sum(0) / n
    pooled = T.sum() / n.sum()
    W = _old_bootstrap_weights(C, B, rng)
    with np.errstate(invalid="ignore", divide="ignore"):
        boot = (W @ T) / (W @ N)
        boot_pooled = (W @ T).sum(1) / (W @ N).sum(1)
    inflate = math.sqrt(C / (C - 1))
    se = np.nanstd(boot, axis=0, ddof=1) * inflate
    pooled_se = float(np.nanstd(boot_pooled, ddof=1)) * inflate
    ne = _old_effective_n(values, se, n, pooled, pooled_se, n.sum())

    def bounds(tail):
        z = NormalDist().inv_cdf(1 - tail)
        return _old_wilson(values, ne, z)

    k = S
    lo_all, _ = bounds(ALPHA / (2 * k))
    _, hi_one = bounds(ALPHA / 2)
    worst = (float(lo_all.max()), float(hi_one.max()))
    lo_s, hi_s = bounds(ALPHA / (4 * k))
    lo_i, hi_i = bounds(ALPHA / 4)
    gap = (max(0.0, float(lo_s.max() - hi_s.min())), float(hi_i.max() - lo_i.min()))
    return worst, gap


# -- intervals ----------------------------------------------------------------------------------


def interval_settings(reps: int, B: int, rng: np.random.Generator) -> list[dict]:
    rows = []
    for structure, sd, base, two in itertools.product(["cell", "crossed"], [0.5, 1.0], [0.01, 0.05, 0.10, 0.25], [False, True]):
        rates = np.array([base] * (S - 1) + [2 * base if two else base])
        lg = special.logit(rates)
        pop = np.array([population_rate(r, sd) for r in rates])
        acc = {k: [] for k in ("w_cov_g", "w_miss_g", "w_cov_p", "w_miss_p", "w_width", "w_old_cov_g", "w_old_miss_g",
                               "w_old_width", "w_ratio", "g_cov_g", "g_miss_g", "g_cov_p", "g_width", "g_power",
                               "g_old_cov_g", "g_old_width", "g_old_power")}
        for _ in range(reps):
            e = effects(structure, sd, rng)
            p = special.expit(lg[None, :] + e[:, None])
            T = rng.binomial(SEEDS, p).astype(float)
            N = np.full((C, S), float(SEEDS))
            truth_g, truth_p = p.mean(0), pop
            sb = SliceBounds.of(CellCounts(T, N, "rate"))
            w = worst_interval(sb, "max", ALPHA)
            g = gap_interval(sb, ALPHA)
            ow, og = old_intervals(T, N, B, rng)
            wg, wp = truth_g.max(), truth_p.max()
            gg, gp = truth_g.max() - truth_g.min(), truth_p.max() - truth_p.min()
            acc["w_cov_g"].append(w.low <= wg <= w.high)
            acc["w_miss_g"].append(w.low > wg)
            acc["w_cov_p"].append(w.low <= wp <= w.high)
            acc["w_miss_p"].append(w.low > wp)
            acc["w_width"].append(w.high - w.low)
            acc["w_old_cov_g"].append(ow[0] <= wg <= ow[1])
            acc["w_old_miss_g"].append(ow[0] > wg)
            acc["w_old_width"].append(ow[1] - ow[0])
            acc["w_ratio"].append((w.high - w.low) / (ow[1] - ow[0]) if ow[1] > ow[0] else math.nan)
            acc["g_cov_g"].append(g.low <= gg <= g.high)
            acc["g_miss_g"].append(g.low > gg)
            acc["g_cov_p"].append(g.low <= gp <= g.high)
            acc["g_width"].append(g.high - g.low)
            acc["g_power"].append(g.low > 0)
            acc["g_old_cov_g"].append(og[0] <= gg <= og[1])
            acc["g_old_width"].append(og[1] - og[0])
            acc["g_old_power"].append(og[0] > 0)
        row = {"structure": structure, "sd": sd, "base": base, "two": two}
        for k, v in acc.items():
            row[k] = float(np.nanmedian(v)) if k == "w_ratio" else float(np.nanmean(v))
        rows.append(row)
    return rows


# -- gate operating characteristics ----------------------------------------------------------------


def _shift_to(rate: float, e: np.ndarray) -> float:
    """The logit intercept whose mean rate over these cells is exactly `rate` (grid estimand)."""
    lo, hi = -20.0, 20.0
    for _ in range(80):
        mid = (lo + hi) / 2
        if special.expit(mid + e).mean() < rate:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2


def gate_oc(reps: int, rng: np.random.Generator, sd: float = 0.5) -> list[dict]:
    rule = DecisionRule(id="r", metric=SPEC.name, statistic="worst_slice", scope="each_family", threshold=0.05)
    rows = []
    for families, worst in itertools.product([1, 4], [0.02, 0.04, 0.05, 0.06, 0.08, 0.10]):
        counts = {"fail": 0, "pass": 0, "inconclusive": 0, "point": 0}
        for _ in range(reps):
            ccs, points = {}, {}
            for f in range(families):
                e = rng.normal(0.0, sd, C)
                a = _shift_to(worst, e)
                p = np.repeat(special.expit(a + e)[:, None], S, axis=1)  # every slice at the threshold-case rate
                T = rng.binomial(SEEDS, p).astype(float)
                ccs[f"family={f}"] = CellCounts(T, np.full((C, S), float(SEEDS)), "rate")
                points[f"family={f}"] = float(ccs[f"family={f}"].values.max())
            ivs = rule_intervals(rule, SPEC, ccs, ALPHA)
            states = [check_state(rule, points[k], (iv.low, iv.high))[0] for k, (iv, _) in ivs.items()]
            state = "fail" if "fail" in states else "pass" if all(s == "pass" for s in states) else "inconclusive"
            counts[state] += 1
            counts["point"] += any(rule.fires(v) for v in points.values())
        rows.append({"families": families, "worst": worst, **{k: v / reps for k, v in counts.items()}})
    return rows


# -- following the advice (issue 19) ----------------------------------------------------------------
#
# The advice is judged by what it promises: draw an inconclusive grid from a known truth, take its
# advice, draw fresh grids of the whole suite (4 families) at the advised seeds with the same truth,
# and run the gate's own code (`rule_intervals`, `check_state`). The truth has template effects the
# sizing does not model: each cell's rates are Beta quantiles at one uniform shared by the cell's
# slices (overdispersed, correlated across slices), not the binomial the sizing sums over.

FAMILIES = 4
WORST = DecisionRule(id="stereotype-worst-slice", metric=SPEC.name, statistic="worst_slice", scope="each_family", threshold=0.05)
GAP = DecisionRule(id="stereotype-gap", metric=SPEC.name, statistic="max_minus_min", scope="each_family", threshold=0.05)


@dataclass(frozen=True)
class Scenario:
    """One truth for the advice check: family F1's slice means, the other families' (shared), the cells' Beta concentration."""

    name: str
    rule: DecisionRule
    target: tuple[float, ...]
    others: tuple[float, ...]
    side: str
    conc: float = 20.0


SCENARIOS = [
    Scenario("fail: one slice 0.10, others 0.03", WORST, (0.10, 0.03, 0.03, 0.03), (0.02,) * 4, "fail"),
    Scenario("fail: one slice 0.08, others 0.02", WORST, (0.08, 0.02, 0.02, 0.02), (0.02,) * 4, "fail"),
    Scenario("pass: every slice 0.02", WORST, (0.02,) * 4, (0.02,) * 4, "pass"),
    Scenario("pass: slices 0.03/0.02/0.01/0.01", WORST, (0.03, 0.02, 0.01, 0.01), (0.02,) * 4, "pass"),
    Scenario("gap fail: 0.14 vs 0.03", GAP, (0.14, 0.03, 0.03, 0.03), (0.03,) * 4, "fail"),
    Scenario("gap pass: every slice 0.03", GAP, (0.03,) * 4, (0.03,) * 4, "pass"),
]


def cell_rates(means: tuple[float, ...], conc: float, rng: np.random.Generator) -> np.ndarray:
    """(C × S) template-cell rates: per cell one uniform shared by its slices; each slice's rate the
    Beta(mean·conc, (1 − mean)·conc) quantile at it (the grid truth is their mean over the cells)."""
    u = rng.random(C)
    return np.column_stack([stats.beta.ppf(u, m * conc, (1 - m) * conc) if m > 0 else np.zeros(C) for m in means])


def draw(rates: np.ndarray, seeds: int, rng: np.random.Generator) -> CellCounts:
    return CellCounts(rng.binomial(seeds, rates).astype(float), np.full(rates.shape, float(seeds)), "rate")


def point(rule: DecisionRule, cc: CellCounts) -> float:
    v = cc.values
    return float(v.max() - v.min()) if rule.statistic == "max_minus_min" else float(v.max())


def suite_states(rule: DecisionRule, ccs: dict[str, CellCounts]) -> dict[str, tuple[str, float]]:
    """Each family's gate state and Holm level, by the audit's own functions."""
    ivs = rule_intervals(rule, SPEC, ccs, ALPHA)
    return {k: (check_state(rule, point(rule, ccs[k]), (iv.low, iv.high))[0], tail) for k, (iv, tail) in ivs.items()}


def follow_advice(sc: Scenario, reps: int, rng: np.random.Generator) -> dict:
    """`reps` inconclusive-toward-`sc.side` grids of F1; the advised seeds' fresh grids and the current-size claims.

    `reached`: share of fresh grids at the advised seeds where F1 reaches the advised verdict (the
    80% promise); `decisive`: either verdict. `claim`: share of grids at the current size, F1's
    truth moved to the claimed value (fail side: the raised slice at `detectable`; pass side:
    every slice at `passable`), that reach the claimed verdict. MC s.e. √(p(1 − p)/reps).
    """
    got = tries = reached = decisive = claimed = claim_n = no_advice = 0
    seeds: list[int] = []
    while got < reps and tries < 100 * reps:
        tries += 1
        truth = [cell_rates(sc.target, sc.conc, rng)] + [cell_rates(sc.others, sc.conc, rng) for _ in range(FAMILIES - 1)]
        ccs = {f"family=F{f + 1}": draw(truth[f], SEEDS, rng) for f in range(FAMILIES)}
        state, tail = suite_states(sc.rule, ccs)["family=F1"]
        cc = ccs["family=F1"]
        if state != "inconclusive" or (sc.rule.fires(point(sc.rule, cc)) != (sc.side == "fail")):
            continue
        st = _settle(sc.rule, SPEC, cc, point(sc.rule, cc), tail, ALPHA)
        got += 1
        if st.seeds is None:
            no_advice += 1
            continue
        seeds.append(st.seeds)
        fresh = {k: draw(truth[f], st.seeds, rng) for f, k in enumerate(ccs)}
        after = suite_states(sc.rule, fresh)["family=F1"][0]
        reached += after == sc.side
        decisive += after in ("fail", "pass")
        claim = st.detectable if sc.side == "fail" else st.passable
        if claim is not None:
            claim_n += 1
            means = ((claim, *sc.target[1:])) if sc.side == "fail" else (claim,) * S
            if sc.rule.statistic == "max_minus_min":
                means = (sc.target[1] + claim, *sc.target[1:]) if sc.side == "fail" else (float(np.nanmin(cc.values)),) * S
            cells = cell_rates(means, sc.conc, rng)  # rescaled so the grid truth is exactly the claimed value
            cells = np.clip(cells * np.asarray(means) / np.maximum(cells.mean(0), 1e-12), 0.0, 1.0)
            moved = [cells, *truth[1:]]
            again = {k: draw(moved[f], SEEDS, rng) for f, k in enumerate(ccs)}
            claimed += suite_states(sc.rule, again)["family=F1"][0] == sc.side
    n = max(got - no_advice, 1)
    share = reached / n
    return {"scenario": sc.name, "side": sc.side, "grids": got, "tried": tries, "no_advice": no_advice,
            "reached": share, "se": math.sqrt(share * (1 - share) / n), "decisive": decisive / n,
            "claim": claimed / max(claim_n, 1), "claim_se": math.sqrt((claimed / max(claim_n, 1)) * (1 - claimed / max(claim_n, 1)) / max(claim_n, 1)),
            "seeds_median": float(np.median(seeds)) if seeds else math.nan,
            "seeds_range": (min(seeds), max(seeds)) if seeds else (0, 0)}


def default_grid_oc(reps: int, rng: np.random.Generator, base: float = 0.02, conc: float = 20.0) -> tuple[list[dict], list[dict]]:
    """The default suite's operating characteristic (4 families × 40 cells × 4 slices × 5 seeds, worst slice > 0.05,
    Holm over the families): one slice of F1 raised, every other slice at `base`; then every slice of every family at
    one rate (what a pass needs). Beta cell rates, concentration `conc`."""
    raised, flat = [], []
    for r in (0.05, 0.06, 0.08, 0.10, 0.12, 0.15, 0.20):
        counts = {"fail": 0, "pass": 0, "inconclusive": 0}
        for _ in range(reps):
            means = [(r,) + (base,) * (S - 1)] + [(base,) * S] * (FAMILIES - 1)
            ccs = {f"family=F{f + 1}": draw(cell_rates(m, conc, rng), SEEDS, rng) for f, m in enumerate(means)}
            counts[_overall([s for s, _ in suite_states(WORST, ccs).values()])] += 1
        raised.append({"rate": r, **{k: v / reps for k, v in counts.items()}})
    for r in (0.0, 0.0025, 0.005, 0.0075, 0.01, 0.015, 0.02):
        counts = {"fail": 0, "pass": 0, "inconclusive": 0}
        for _ in range(reps):
            ccs = {f"family=F{f + 1}": draw(cell_rates((r,) * S, conc, rng), SEEDS, rng) for f in range(FAMILIES)}
            counts[_overall([s for s, _ in suite_states(WORST, ccs).values()])] += 1
        flat.append({"rate": r, **{k: v / reps for k, v in counts.items()}})
    return raised, flat


def _overall(states: list[str]) -> str:
    return "fail" if "fail" in states else "pass" if all(s == "pass" for s in states) else "inconclusive"


def advice_report(reps: int, oc_reps: int, rng: np.random.Generator) -> None:
    t = time.time()
    if reps > 0:
        print("follow the advice: F1 inconclusive at 5 seeds, suite rerun at the advised seeds, same truth (Beta cells, conc 20)")
        print(f"{'scenario':>36} | {'reached':>7} {'s.e.':>5} {'decisive':>8} | {'no advice':>9} {'seeds med':>9} | {'claim':>5} {'s.e.':>5}")
        for sc in SCENARIOS:
            r = follow_advice(sc, reps, rng)
            print(f"{r['scenario']:>36} | {r['reached']:7.3f} {r['se']:5.3f} {r['decisive']:8.3f} | "
                  f"{r['no_advice'] / r['grids']:9.3f} {r['seeds_median']:9.0f} | {r['claim']:5.3f} {r['claim_se']:5.3f}", flush=True)
    if oc_reps > 0:
        raised, flat = default_grid_oc(oc_reps, rng)
        print("\ndefault grid (4 families x 40 cells x 4 slices x 5 seeds, worst slice > 0.05, Holm over families), "
              "Beta cells conc 20: one slice of F1 raised, every other slice at 0.02")
        for r in raised:
            print(f"  raised {r['rate']:.3f}: P(fail) {r['fail']:.3f}  P(pass) {r['pass']:.3f}  P(inconclusive) {r['inconclusive']:.3f}")
        print("every slice of every family at one rate:")
        for r in flat:
            print(f"  every slice {r['rate']:.4f}: P(pass) {r['pass']:.3f}  P(fail) {r['fail']:.3f}")
        print(f"(MC s.e. at most {0.5 / math.sqrt(oc_reps):.3f})")
    print(f"[{time.time() - t:.0f}s]\n")


def recording_verdicts(seeds: int) -> tuple[int, int]:
    """(distinct verdict tuples, seeds tried) of the committed recordings across audit seeds."""
    from fairness.audit._audit import AuditOptions, audit
    from fairness.recordings._store import RecordingSet, ReplayProvider
    from fairness.suite._suite import load_suite

    suite = load_suite("fairness-cards/qwen-v0.1")
    rdir = Path(__file__).resolve().parents[1] / "recordings" / "fairness-cards" / "qwen-v0.1" / "SmolLM2-135M-Instruct-Q4_1"
    rs = RecordingSet(rdir)
    cases = suite.expand()
    recs = ReplayProvider(rs, suite.system_prompt).replay(cases)
    seen, scores = set(), None
    for seed in range(seeds):
        run, scores = audit(suite, cases, recs, rs.manifest, AuditOptions(seed=seed, permutations=0), scores=scores)
        seen.add(tuple((c.scope, c.state, tuple(c.interval or ())) for c in run.rules))
    return len(seen), seeds


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=400)
    ap.add_argument("--gate-reps", type=int, default=2000)
    ap.add_argument("--bootstrap", type=int, default=400, help="B for today's method")
    ap.add_argument("--audit-seeds", type=int, default=200)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--advice-reps", type=int, default=0, help="inconclusive grids per follow-the-advice scenario (200: ~10 min on 2 cores)")
    ap.add_argument("--oc-reps", type=int, default=0, help="grids per row of the default grid's operating characteristic")
    ap.add_argument("--only-advice", action="store_true", help="skip the interval and gate sections")
    args = ap.parse_args()
    rng = np.random.default_rng(args.seed)
    if args.advice_reps > 0 or args.oc_reps > 0:
        advice_report(args.advice_reps, args.oc_reps, rng)
    if args.only_advice:
        return
    t0 = time.time()
    rows = interval_settings(args.reps, args.bootstrap, rng)
    print("worst slice (grid estimand unless 'pop'); gap; new vs today's ('old')")
    print(f"{'effects':>8} {'sd':>4} {'base':>5} {'2x':>3} | {'cov':>5} {'miss':>5} {'covPop':>6} {'missPop':>7} {'width':>6} "
          f"{'oldCov':>6} {'oldMiss':>7} {'ratio':>5} | {'gCov':>5} {'gMiss':>5} {'gCovPop':>7} {'gWidth':>6} {'power':>5} "
          f"{'oldGCov':>7} {'oldGW':>6} {'oldPow':>6}")
    for r in rows:
        print(f"{r['structure']:>8} {r['sd']:>4} {r['base']:>5} {'y' if r['two'] else 'n':>3} | {r['w_cov_g']:5.3f} {r['w_miss_g']:5.3f} "
              f"{r['w_cov_p']:6.3f} {r['w_miss_p']:7.3f} {r['w_width']:6.3f} {r['w_old_cov_g']:6.3f} {r['w_old_miss_g']:7.3f} "
              f"{r['w_ratio']:5.2f} | {r['g_cov_g']:5.3f} {r['g_miss_g']:5.3f} {r['g_cov_p']:7.3f} {r['g_width']:6.3f} "
              f"{r['g_power']:5.3f} {r['g_old_cov_g']:7.3f} {r['g_old_width']:6.3f} {r['g_old_power']:6.3f}")

    def col(k, pick=None):
        return np.array([r[k] for r in rows if pick is None or pick(r)])

    print(f"\ngrid estimand, worst slice: coverage min {col('w_cov_g').min():.3f} (target ≥ 0.95), lower miss max "
          f"{col('w_miss_g').max():.3f} (≤ 0.025); today's: coverage min {col('w_old_cov_g').min():.3f}, miss max {col('w_old_miss_g').max():.3f}")
    print(f"grid estimand, gap: coverage min {col('g_cov_g').min():.3f} (≥ 0.95), lower miss max {col('g_miss_g').max():.3f}; "
          f"today's coverage min {col('g_old_cov_g').min():.3f}")
    print(f"median worst-slice width ratio new/today: median over settings {np.median(col('w_ratio')):.3f} "
          f"(range {col('w_ratio').min():.2f}-{col('w_ratio').max():.2f}; target ≤ 0.85); gap width ratio "
          f"{np.median(col('g_width') / col('g_old_width')):.2f}")
    two10 = lambda r: r["two"] and r["base"] == 0.10  # noqa: E731
    two05 = lambda r: r["two"] and r["base"] == 0.05  # noqa: E731
    print(f"gap power, 2x slice at base 0.10: {col('g_power', two10).min():.3f}-{col('g_power', two10).max():.3f} (≥ 0.45; "
          f"today {col('g_old_power', two10).min():.3f}-{col('g_old_power', two10).max():.3f}); at base 0.05: "
          f"{col('g_power', two05).min():.3f}-{col('g_power', two05).max():.3f}")
    print(f"population estimand (no cell-level method can support it with crossed effects): worst coverage "
          f"{col('w_cov_p').min():.3f}-{col('w_cov_p').max():.3f}, lower miss max {col('w_miss_p').max():.3f}; gap coverage "
          f"{col('g_cov_p').min():.3f}-{col('g_cov_p').max():.3f}")
    print(f"[{len(rows)} settings x {args.reps} grids in {time.time() - t0:.0f}s]\n")

    t1 = time.time()
    oc = gate_oc(args.gate_reps, rng)
    print("gate operating characteristics: threshold 0.05, 200 rows per slice, all slices at the true worst rate, cell sd 0.5")
    print(f"{'families':>8} {'worst':>5} | {'P(fail)':>7} {'P(pass)':>7} {'P(inconcl)':>10} | {'P(point fires)':>14}")
    for r in oc:
        print(f"{r['families']:>8} {r['worst']:>5} | {r['fail']:7.3f} {r['pass']:7.3f} {r['inconclusive']:10.3f} | {r['point']:14.3f}")
    at = [r["fail"] for r in oc if r["worst"] == 0.05]
    se = math.sqrt(max(at) * (1 - max(at)) / args.gate_reps)
    print(f"false fail at the threshold: max {max(at):.3f} (s.e. {se:.3f}) over family counts (target ≤ 0.025) "
          f"[{time.time() - t1:.0f}s]\n")

    if args.audit_seeds > 0:
        t2 = time.time()
        distinct, tried = recording_verdicts(args.audit_seeds)
        print(f"committed recordings: {distinct} distinct verdict/interval sets over {tried} audit seeds [{time.time() - t2:.0f}s]")


if __name__ == "__main__":
    main()
