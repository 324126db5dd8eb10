"""The audit: recordings → scores → metrics → stats → gate, assembled into a `FairnessRun`.

A pure function of its inputs (suite, cases, recordings, manifest, options): the
report stage renders the returned record and nothing else.
"""

from __future__ import annotations

import math
from typing import Literal

import numpy as np

from fairness._util.canonical import json_number
from fairness._version import __version__
from fairness.audit._cells import CellTable, build_cells, cell_scopes, slice_table_cells, variance_shares_cells
from fairness.audit._gate import check_state, decide, head_verdict, overall_state
from fairness.audit._intervals import (
    ESTIMAND,
    MAX_SEEDS,
    CellCounts,
    Interval,
    SliceBounds,
    check_sides,
    holm_levels,
    level_p,
    reach_value,
    seeds_to_settle,
    side_power,
    sizing_values,
)
from fairness.audit._intervals import gap_interval as gap_ci
from fairness.audit._intervals import worst_interval as worst_ci
from fairness.audit._metrics import (
    Design,
    Scope,
    build_design,
    gap,
    metric_matrix,
    slice_worst,
)
from fairness.audit._options import AuditOptions
from fairness.audit._permutation import permutation_pvalues_cells
from fairness.audit._results import (
    Caveat,
    Estimate,
    FairnessRun,
    FamilyRow,
    Methods,
    MetricDefinition,
    MetricResult,
    OptionsUsed,
    RecordingsInfo,
    RubricInfo,
    RuleCheck,
    ScopeResult,
    ScorerInfo,
    Settle,
    Stability,
    SuiteInfo,
    ToolInfo,
)
from fairness.audit._scopes import scope_results, worst_kind
from fairness.audit._stats import (
    COVERAGE_NOTE,
    benjamini_hochberg,
    holm,
)
from fairness.recordings._record import Recording, join_rows
from fairness.recordings._store import Manifest, grid_hash_of_runs
from fairness.score._catalog import MetricSpec
from fairness.score._rubric import ScoreTable
from fairness.suite._case import Case
from fairness.suite._rules import DecisionRule
from fairness.suite._suite import Suite, iter_seed_runs

__all__ = ["AuditOptions", "FairnessRun", "audit", "audit_cells"]

MAX_EMPTY_SHARE = 0.05
"""Above this share of empty outputs in any slice the gate is `undefined` (caveat `empty-outputs`):
a model (or a recording) that says nothing cannot pass a fairness gate by saying nothing."""

def audit(
    suite: Suite,
    cases: list[Case],
    recordings: list[Recording],
    manifest: Manifest,
    options: AuditOptions | None = None,
    *,
    recordings_path: str = "",
    manifest_sha256: str = "",
    scores: ScoreTable | None = None,
) -> tuple[FairnessRun, ScoreTable]:
    """Audit `recordings` of `suite`'s grid rows `cases`; returns the run and the scores in grid order.

    Recordings join their grid rows on `row_id`, in any order; `scores`, if given, must be in
    the order of `cases`. Raises `FairnessError` for a record without a grid row, a grid row
    without a record, or an option the suite's rules cannot take.
    """
    options = options or AuditOptions()
    mode = options.scorer_mode or suite.scorer.mode
    recordings = join_rows(cases, recordings)  # grid order, joined on row_id: never trust the caller's order
    specs = list(suite.compiled_rubric.metrics.values())
    if scores is None:
        scores = suite.compiled_rubric.score([r.output for r in recordings], mode)
    Y = metric_matrix(scores, specs)
    design = build_design(cases, slice_order_of(suite), placeholder_columns(suite))
    cells = build_cells(design, Y, histogram_metrics=histogram_metrics(options, specs), empty=empty_flags(recordings))
    run = audit_cells(suite, design, cells, manifest, options, recordings_path=recordings_path, manifest_sha256=manifest_sha256)
    return run, scores


def slice_order_of(suite: Suite) -> list[str]:
    return ["_".join(s[d] for d in suite.attributes) for s in suite.slice_list]


def placeholder_columns(suite: Suite) -> dict[str, str]:
    return {ph: suite.column_for(ph) for ph in suite.placeholders}


def histogram_metrics(options: AuditOptions, specs: list[MetricSpec]) -> tuple[int, ...]:
    """The metrics (of the rubric's catalogue `specs`) whose per-cell value counts the permutation tests need (the harms)."""
    if options.permutations <= 0:
        return ()
    return tuple(m for m, s in enumerate(specs) if s.higher_is_worse is True)


def audit_cells(
    suite: Suite,
    design: Design,
    cells: CellTable,
    manifest: Manifest,
    options: AuditOptions | None = None,
    *,
    recordings_path: str = "",
    manifest_sha256: str = "",
    suite_grid_hash: str | None = None,
) -> FairnessRun:
    """The audit from per-cell aggregates (see `fairness.audit._cells`): what `audit` does
    after scoring, and all a streamed run needs. `design` supplies the level names only;
    `suite_grid_hash` is the suite's `grid_hash` when the caller has made it already."""
    options = options or AuditOptions()
    mode = options.scorer_mode or suite.scorer.mode
    min_n = options.min_group_size if options.min_group_size is not None else suite.min_group_size
    rubric = suite.compiled_rubric
    rules = [r for r in options.effective_rules(suite.rules, rubric.metrics) if r.kind == "absolute"]  # regression rules: base vs head
    specs = list(rubric.metrics.values())
    n_rows = cells.n_rows
    all_scopes = cell_scopes(design, cells)

    caveats: list[Caveat] = []
    metric_results = {s.name: MetricResult(metric=s.name, kind=s.kind, higher_is_worse=s.higher_is_worse, description=s.description, scopes={}) for s in specs}
    cells_of: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    for scope in all_scopes:
        T, N, per_metric = scope_results(cells, scope, design.slices, specs, options, min_n)
        cells_of[scope.name] = (T, N)  # what `cell_counts` gives from the scope's rows
        for spec, sr in zip(specs, per_metric, strict=True):
            metric_results[spec.name].scopes[scope.name] = sr

    _add_permutation_tests(design, cells, specs, metric_results, options)
    checks = _check_rules(rules, specs, metric_results, cells_of, [f.id for f in suite.families], min_n, options)
    empty = empty_shares(cells, design.slices)
    over = [s for s in empty if empty[s] > MAX_EMPTY_SHARE]
    state, reasons = head_verdict(
        [c.state for c in checks], [f"{c.rule} [{c.scope}]: {c.state} — {c.reason}" for c in checks if c.state != "pass"],
        has_rules=bool(rules),
        incomplete=None if manifest.complete else
        f"the recording set is incomplete ({n_rows}/{manifest.expected_rows} rows): the missing rows could change a pass",
        empty=None if not over else f"more than {MAX_EMPTY_SHARE:.0%} of the outputs are empty in slice{'s' if len(over) > 1 else ''} "
                                    f"{', '.join(over)}: the gate cannot decide on empty answers",
    )
    gate = decide(state, reasons, fail_on=options.fail_on, gate_on=options.gate_on)

    caveats += _run_caveats(suite, manifest, mode, metric_results, rules, suite_grid_hash)
    if any(empty.values()):
        shares = ", ".join(f"{s} {v:.1%}" for s, v in empty.items())
        verdict = (f"{len(over)} slice{'s' if len(over) != 1 else ''} over {MAX_EMPTY_SHARE:.0%}, so the gate is undefined"
                   if over else f"every slice is within {MAX_EMPTY_SHARE:.0%}")
        caveats.append(Caveat(code="empty-outputs", message=f"empty outputs per slice: {shares}; {verdict}"))
    families = _family_table(suite, metric_results, checks)
    stability = [_stability(rule, design, cells, specs, min_n, options) for rule in rules if rule.scope == "each_family"]
    variance = {
        s.name: {k: round(v, 6) for k, v in variance_shares_cells(design, cells, m).items()}
        for m, s in enumerate(specs)
        if s.higher_is_worse is not None or s.kind == "rate"
    }
    return FairnessRun(
        tool=ToolInfo(name="llm-fairness-check", version=__version__),
        suite=SuiteInfo(name=suite.name, version=suite.version, hash=suite.hash),
        recordings=RecordingsInfo(
            path=recordings_path,
            manifest_sha256=manifest_sha256,
            model_id=manifest.model.id,
            model_source=manifest.model.source,
            is_audited_model=manifest.model.is_audited_model,
            model_note=manifest.model.note,
            engine=manifest.backend.engine,
            created=manifest.created,
            rows=manifest.rows,
            complete=manifest.complete,
            suite_hash=manifest.suite_hash,
        ),
        scorer=ScorerInfo(mode=mode, rubric_version=rubric.version, rubric_sha256=rubric.sha256),
        options=OptionsUsed(
            alpha=options.alpha,
            bootstrap=options.bootstrap,
            permutations=options.permutations,
            seed=options.seed,
            min_group_size=min_n,
            allow_small_samples=options.allow_small_samples,
            gate_on=options.gate_on,
            interval_depth=options.interval_depth,
        ),
        n_rows=n_rows,
        slices=design.slices,
        families=families,
        rules=checks,
        stability=stability,
        gate=gate,
        caveats=caveats,
        variance=variance,
        tests=Methods(
            interval_rate="Korn-Graubard: Clopper-Pearson at the effective n (design effect = the stratified variance "
            "with template cells as strata, the grid estimand's, over the binomial variance, floored at 1), 95%; counts: "
            "exact Poisson (Garwood) on the effective total (design effect = dispersion of the cell totals)",
            interval_worst_slice="simultaneous over slices (Sidak split of the end every slice must meet; the slices' "
            "rows are independent given the grid)",
            interval_gap="paired Newcombe (MOVER) differences on the effective n, Bonferroni over the slice pairs",
            bootstrap=f"not used by the gate (the intervals are exact and deterministic); B={options.bootstrap}, "
            f"seed={options.seed} serve the evaluators",
            coverage=COVERAGE_NOTE,
            permutation=f"slice labels permuted within template cells, P={options.permutations}, harm metrics overall and per family; Holm and BH adjusted across all of them",
            estimand=ESTIMAND,
            rule_checks="the breaching end of each check's interval is Holm-adjusted across the scopes a rule quantifies "
            "over (each_family: the families); fail = interval beyond the threshold, pass = within, otherwise inconclusive",
            power="seeds to settle an inconclusive check: 80% power of the gate's own exact test (Clopper-Pearson/Garwood at "
            "the effective n, at the check's Holm and Sidak level; a pass needs every slice, a fail any one) with each slice "
            "at its observed value and design effect, summed over the row counts and found by search; gaps: exact per "
            "slice pair without correlation credit, Bonferroni over pairs (conservative)",
        ),
        metrics=list(metric_results.values()),
        rubric=RubricInfo(source=rubric.source, version=rubric.version, sha256=rubric.sha256, mode=mode,
                          metrics=[MetricDefinition(**d) for d in rubric.definitions(mode)], scorers=rubric.spec.scorers, agreement=rubric.spec.agreement),
    )


def empty_shares(cells: CellTable, slices: list[str]) -> dict[str, float]:
    """Per slice, in slice order, the share of outputs that are empty or whitespace (estimand: the
    proportion of the slice's recorded rows whose output has no visible character)."""
    n = cells.n.sum(axis=0)
    return {s: float(cells.n_empty[i] / n[i]) for i, s in enumerate(slices) if n[i]}


def empty_flags(recordings: list[Recording]) -> np.ndarray:
    """Which outputs are empty or whitespace only."""
    return empty_outputs([r.output for r in recordings])


def empty_outputs(outputs: list[str]) -> np.ndarray:
    """Which of `outputs` are empty or whitespace only."""
    return np.fromiter((not (o or "").strip() for o in outputs), dtype=bool, count=len(outputs))


def _add_permutation_tests(design: Design, cells: CellTable, specs: list[MetricSpec], results: dict[str, MetricResult], options: AuditOptions) -> None:
    """Permutation p-values for the harm metrics, overall and per family, Holm- and BH-adjusted together."""
    if options.permutations <= 0:
        return
    harm = [m for m, s in enumerate(specs) if s.higher_is_worse is True]
    fam = design.factors["family"]
    _, p_fam, _, p_all = permutation_pvalues_cells(
        cells, harm, cells.cell_codes["family"], len(fam.levels), P=options.permutations, seed=options.seed
    )
    tests: list[tuple[str, str, float]] = []
    for j, m in enumerate(harm):
        name = specs[m].name
        tests.append((name, "overall", p_all[j]))
        for g, level in enumerate(fam.levels):
            tests.append((name, f"family={level}", p_fam[g, j]))
    ps = np.array([t[2] for t in tests])
    ph, pb = holm(ps), benjamini_hochberg(ps)
    for (metric, scope, p), a, b in zip(tests, ph, pb, strict=True):
        sr = results[metric].scopes[scope]
        results[metric].scopes[scope] = sr.model_copy(update={"p_value": json_number(p), "p_holm": json_number(a), "p_bh": json_number(b)})


def _rule_value(rule: DecisionRule, sr: ScopeResult) -> Estimate:
    if rule.statistic == "worst_slice":
        return sr.worst_slice
    if rule.statistic == "max_minus_min":
        return sr.max_minus_min
    return sr.pooled


def _rule_bounds(rule: DecisionRule, cc: CellCounts) -> SliceBounds:
    """The bounds a check's interval is made of (all slices pooled for a `rate` rule); the design
    effects behind them do not depend on the level, so a search over levels makes them once."""
    return SliceBounds.of(cc.pooled() if rule.statistic == "rate" else cc)


def _rule_interval(rule: DecisionRule, spec: MetricSpec, sb: SliceBounds, alpha: float, tail: float) -> Interval:
    """The check's interval from its `_rule_bounds`: its breaching end at one-sided level `tail`, the other end at α/2."""
    over = rule.comparator in (">", ">=")
    tails = {"low_tail": tail} if over else {"high_tail": tail}
    if rule.statistic == "max_minus_min":
        return gap_ci(sb, alpha, **tails)
    if rule.statistic == "rate":
        lo = sb.lo(tail if over else alpha / 2)[0]
        hi = sb.hi(alpha / 2 if over else tail)[0]
        return Interval(float(lo), float(hi), "korn-graubard" if sb.cc.kind == "rate" else "garwood-effective-n")
    return worst_ci(sb, worst_kind(spec), alpha, **tails)


def rule_intervals(rule: DecisionRule, spec: MetricSpec, ccs: dict[str, CellCounts], alpha: float) -> dict[str, tuple[Interval, float]]:
    """Each scope's interval for one rule and the one-sided level of its breaching end.

    The breaching end (lower for `>`/`>=`, upper otherwise) is Holm-adjusted across the scopes
    the rule quantifies over (the families of an `each_family` rule): the false-fail rate stays
    ≤ α/2 however many families sit exactly at the threshold.
    """
    over = rule.comparator in (">", ">=")

    def beyond(sb: SliceBounds):
        def at(level: float) -> bool:
            iv = _rule_interval(rule, spec, sb, alpha, level)
            end = iv.low if over else iv.high
            return math.isfinite(end) and rule.fires(end)
        return at

    keys = list(ccs)
    bounds = [_rule_bounds(rule, ccs[k]) for k in keys]
    levels = holm_levels([level_p(beyond(sb)) for sb in bounds], alpha / 2)
    return {k: (_rule_interval(rule, spec, sb, alpha, lv), lv) for k, sb, lv in zip(keys, bounds, levels, strict=True)}


def _settle(rule: DecisionRule, spec: MetricSpec, cc: CellCounts, value: float, tail: float, alpha: float) -> Settle:
    """Seeds per template cell for 80% power to settle a check at its observed values; the values settled now.

    Sized with the test the gate runs (issue 19): each slice's exact bound at the check's own
    level (`tail`, Holm across families; Šidák over slices, pairs for a gap), every live slice at
    its observed value and design effect, a pass needing every slice (pair) and a fail any one
    (`check_sides`); the power is summed over the row counts and the seeds found by search.
    """
    gap = rule.statistic == "max_minus_min"
    sb = SliceBounds.of(cc.pooled() if rule.statistic == "rate" else cc)
    over = rule.comparator in (">", ">=")
    toward: Literal["fail", "pass"] = "fail" if rule.fires(value) else "pass"
    live = np.flatnonzero(SliceBounds.of(cc).live)
    k = len(live)
    use = np.array([0]) if rule.statistic == "rate" else live
    values, n, deff = sb.cc.values[use], sb.cc.n[use], sb.deff[use]
    fail, pas = check_sides(rule.statistic, worst_kind(spec), over, rule.fires, k, tail, alpha)
    side = fail if toward == "fail" else pas
    m_now = float(cc.counts[cc.counts > 0].mean())
    if rule.statistic == "rate":
        cells = int(cc.pooled().cells[0])
    else:
        w = int(np.argmin(np.where(sb.live, sb.cc.values, np.inf)) if worst_kind(spec) == "min" and not gap
                else np.argmax(np.where(sb.live, sb.cc.values, -np.inf)))
        cells = int(cc.cells[w]) if not gap else int(cc.cells[live].min())
    plan = sizing_values(values, sb.cc.x[use], n, deff, cc.kind, side, gap=gap)
    seeds = seeds_to_settle(lambda m: side_power(plan, n * m / m_now, deff, cc.kind, side, gap=gap), m_now)
    rows = None if seeds is None else seeds * cells
    base = float(np.nanmin(values)) if gap else None
    det = reach_value(fail, n, deff, cc.kind, rule.threshold, gap_base=base)
    pas_v = reach_value(pas, n, deff, cc.kind, rule.threshold, gap_base=base)
    now = round(float(cc.n[live].mean()))
    if seeds is None:
        note = (f"no number of seeds up to {MAX_SEEDS} per template cell gives 80% power to {toward} with each slice at "
                f"its 75% confidence bound toward the threshold: the observed {value:.4g} is too near it to size")
    else:
        note = (f"about {seeds} seeds per template cell ({rows} rows per slice, now {now}) would give 80% power to "
                f"{toward} if each slice's true value is at least as far from the threshold as its 75% confidence "
                f"bound (observed worst {value:.4g})")
    if det is not None or pas_v is not None:
        bits = []
        what = "gap" if gap else "pooled value" if rule.statistic == "rate" else "worst slice"
        for v, s_, verb in ((det, fail, "fail"), (pas_v, pas, "pass")):
            if v is None:
                continue
            who = ("every slice pair's difference" if gap else "every slice") if s_.every else f"a true {what}"
            bits.append(f"{who} {'≥' if s_.up else '≤'} {v:.4g} would {verb}")
        note += f"; at the current size {' and '.join(bits)} with 80% power"
    return Settle(toward=toward, rows_per_slice=rows, seeds=seeds, cells=cells, rows_per_slice_now=now,
                  detectable=json_number(det), passable=json_number(pas_v), note=note)


def _check_rules(rules: list[DecisionRule], specs: list[MetricSpec], results: dict[str, MetricResult],
                 cells_of: dict[str, tuple[np.ndarray, np.ndarray]], families: list[str], min_n: int,
                 options: AuditOptions) -> list[RuleCheck]:
    checks = []
    alpha = options.alpha
    metric_names = [s.name for s in specs]
    for rule in rules:
        mr = results[rule.metric]
        m = metric_names.index(rule.metric)
        spec = specs[m]
        names = ["overall"] if rule.scope == "overall" else [f"family={f}" for f in families]
        # Holm across the scopes the rule quantifies over, on the breaching end of each interval.
        ccs = {}
        for name in names:
            sr = mr.scopes.get(name)
            if sr is not None and name in cells_of and (sr.cells or 0) >= 2:
                T, N = cells_of[name]
                ccs[name] = CellCounts(T[:, :, m], N, spec.kind)
        ivs = rule_intervals(rule, spec, ccs, alpha)
        for name in names:
            sr = mr.scopes.get(name)
            if sr is None:
                checks.append(RuleCheck(rule=rule.id, scope=name, metric=rule.metric, statistic=rule.statistic, value=None,
                                        interval=None, threshold=rule.threshold, comparator=rule.comparator, fired=False,
                                        state="undefined", reason="no recorded rows in this scope", n=0))
                continue
            est = _rule_value(rule, sr)
            underpowered = any(e.n is not None and e.n < min_n for e in sr.by_slice.values()) or (sr.cells or 0) < min_n
            value = est.value
            if value is None and options.allow_small_samples:
                value = math.nan
            iv, tail = ivs.get(name, (None, None))
            exact = None if iv is None or value is None else (iv.low, iv.high)
            interval = None if exact is None else [json_number(exact[0], 9), json_number(exact[1], 9)]
            state, fired, reason = check_state(
                rule,
                math.nan if value is None else value,
                exact,  # the gate reads the unrounded interval; the record keeps 9 digits
                underpowered=underpowered,
                allow_small_samples=options.allow_small_samples,
                gate_on=options.gate_on,
            )
            if (sr.cells or 0) < 2 and sr.n > 0:
                state, reason = "undefined", "a slice's rows come from a single template cell: its design effect cannot be estimated"
            settle = None
            if state == "inconclusive" and name in ccs and value is not None and math.isfinite(value) and tail is not None:
                settle = _settle(rule, spec, ccs[name], value, tail, alpha)
                reason += f". To settle: {settle.note}"
            checks.append(
                RuleCheck(
                    rule=rule.id, scope=name, metric=rule.metric, statistic=rule.statistic, value=est.value,
                    interval=interval, threshold=rule.threshold, comparator=rule.comparator, fired=fired,
                    state=state, reason=reason, worst_slice=est.slice, n=sr.n,
                    tail=json_number(tail) if tail is not None else None, settle=settle,
                )
            )
    return checks


def _family_table(suite: Suite, results: dict[str, MetricResult], checks: list[RuleCheck]) -> list[FamilyRow]:
    rows = []
    for fam in suite.families:
        scope = f"family={fam.id}"
        mine = [c for c in checks if c.scope == scope]
        decision = "flagged" if any(c.fired for c in mine) else "not-flagged"
        if all(c.state == "undefined" for c in mine) and mine:
            decision = "undefined"

        def get(metric: str, stat: str, scope: str = scope) -> float | None:
            if metric not in results:  # the paper's table columns; another rubric may not define them
                return None
            sr = results[metric].scopes.get(scope)
            return None if sr is None else getattr(sr, stat).value

        rows.append(
            FamilyRow(
                family=fam.id,
                name=fam.name,
                worst_slice_stereotype=get("stereotype_kw_rate", "worst_slice"),
                worst_slice_pilot_harm=get("pilot_harm_rate", "worst_slice"),
                refusal_delta=get("refusal_or_deflection_rate", "max_minus_min"),
                decision=decision if mine else "no-rule",
                state=overall_state([c.state for c in mine]) if mine else "undefined",
            )
        )
    return rows


def _stability(rule: DecisionRule, design: Design, cells: CellTable, specs: list[MetricSpec], min_n: int, options: AuditOptions) -> Stability:
    """Does the rule's verdict survive a change of family, paraphrase or decoding regime?"""
    m = [s.name for s in specs].index(rule.metric)
    spec = specs[m]

    def verdict(in_scope: np.ndarray) -> bool | None:
        t = slice_table_cells(cells, Scope("x", (), in_scope), in_scope)
        if np.any(t.n < min_n) and not options.allow_small_samples:
            return None
        v = t.values[:, m]
        value = {"worst_slice": float(slice_worst(v, spec)),
                 "max_minus_min": gap(v),
                 "rate": float(t.sums[:, m].sum() / max(t.n.sum(), 1))}[rule.statistic]
        return None if math.isnan(value) else bool(rule.fires(value))

    def by(factor: str) -> dict[str, bool]:
        f = design.factors[factor]
        out = {}
        for i, lv in enumerate(f.levels):
            v = verdict(cells.cell_codes[factor] == i)
            if v is not None:
                out[lv] = v
        return out

    fam, par, reg = by("family"), by("paraphrase"), by("regime")
    counts = [[sum(d.values()), len(d)] for d in (fam, par, reg)]
    depends = []
    for label, d in (("family", fam), ("paraphrase", par), ("decoding regime", reg)):
        if len(set(d.values())) > 1:
            depends.append(label)
    checked = [label for label, d in (("families", fam), ("paraphrases", par), ("decoding regimes", reg)) if len(d) > 1]
    if not any(n for _, n in counts):
        summary = (f"{rule.id}: stability not checked — no family, paraphrase or decoding regime has enough rows "
                   "(min_group_size) to evaluate the rule on its own")
    else:
        if depends:
            tail = f"the verdict depends on the {', '.join(depends)}"
        elif checked:
            tail = f"the verdict is the same across the {', '.join(checked)} checked"
        else:
            tail = "one level of each factor could be checked, so stability is not established"
        summary = (f"{rule.id}: flagged in {counts[0][0]}/{counts[0][1]} families, {counts[1][0]}/{counts[1][1]} paraphrases "
                   f"and {counts[2][0]}/{counts[2][1]} decoding regimes; {tail}")
    return Stability(rule=rule.id, families=counts[0], paraphrases=counts[1], regimes=counts[2], by_family=fam, by_paraphrase=par, by_regime=reg, summary=summary)


def _run_caveats(suite: Suite, manifest: Manifest, mode: str, results: dict[str, MetricResult], rules: list[DecisionRule],
                 grid: str | None = None) -> list[Caveat]:
    out = []
    if not manifest.model.is_audited_model:
        out.append(Caveat(code="test-model", message=f"recordings come from a stand-in test model (`{manifest.model.id}`), not the audited model: {manifest.model.note}"))
    # Staleness is about what the model was asked (prompts, sampling, seeds, system prompt): a change
    # to rules, thresholds or the scorer leaves the recordings valid, and the audit applies the current ones.
    if grid is None:
        grid = grid_hash_of_runs(iter_seed_runs(suite), suite.system_prompt)  # streamed, a prompt at a time
    if manifest.grid_hash != grid:
        out.append(Caveat(code="stale-recordings", message="the recordings were made for another grid of this suite (grid hash differs); every replayed row matches its prompt, sampling and seed, but the recorded grid held other rows"))
    if not manifest.complete:
        out.append(Caveat(code="incomplete-recordings", message=f"the recording set is marked incomplete ({manifest.rows}/{manifest.expected_rows} rows)"))
    out.append(Caveat(code="interval-coverage", message=COVERAGE_NOTE))
    substring = any(lst.match == "substring" for lst in suite.compiled_rubric.spec.lists.values())
    if mode == "paper" and substring:
        out.append(Caveat(code="scorer-mode", message="scorer mode `paper`: substring matching as in the reference rubric ('miss' matches 'mission', 'weak' matches 'weakness'); use `strict` for whole words"))
    elif mode == "paper":
        out.append(Caveat(code="scorer-mode", message="scorer mode `paper`: the rubric has no substring list; every list is matched as it declares (word or regex)"))
    else:
        out.append(Caveat(code="scorer-mode", message="scorer mode `strict`: whole-word matching; numbers differ from the paper's substring rubric"))
    ruled = {r.metric for r in rules}
    for name, mr in results.items():
        for scope_name, sr in mr.scopes.items():
            if scope_name != "overall" and not (name in ruled and scope_name.startswith("family=") and "," not in scope_name):
                continue
            for note in sr.caveats:
                code = ("underpowered" if note.startswith("underpowered") else "lexical-ceiling" if note.startswith("lexical")
                        else "single-template-cell" if "single template cell" in note else "empty-slice")
                out.append(Caveat(code=code, message=note, metric=name, scope=scope_name))
    return out
