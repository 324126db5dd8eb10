"""The audit: recordings → scores → metrics → stats → gate, assembled into a `FairnessRun`.

A pure function of its inputs (suite, cases, recordings, manifest, options): the
report stage renders the returned record and nothing else.
"""

from __future__ import annotations

import math

import numpy as np

from fairness._util.canonical import json_number
from fairness._version import __version__
from fairness.audit._gate import check_state, exit_code, overall_state
from fairness.audit._metrics import (
    Design,
    Scope,
    build_design,
    gap,
    metric_matrix,
    scopes,
    slice_table,
    slice_worst,
    worst_index,
)
from fairness.audit._options import AuditOptions, threshold_for
from fairness.audit._results import (
    Caveat,
    Estimate,
    FairnessRun,
    FamilyRow,
    Gate,
    Methods,
    MetricResult,
    OptionsUsed,
    RecordingsInfo,
    RuleCheck,
    ScopeResult,
    ScorerInfo,
    Stability,
    SuiteInfo,
    ToolInfo,
)
from fairness.audit._stats import (
    COVERAGE_NOTE,
    benjamini_hochberg,
    gap_interval,
    holm,
    permutation_pvalues,
    pooled_interval,
    scope_stats,
    slice_intervals,
    variance_shares,
    worst_interval,
)
from fairness.recordings._record import Recording, join_rows
from fairness.recordings._store import Manifest, grid_hash
from fairness.score._catalog import METRICS, MetricSpec
from fairness.score._rubric import ScoreTable, load_rubric, score_texts
from fairness.suite._case import Case
from fairness.suite._rules import DecisionRule
from fairness.suite._suite import Suite

__all__ = ["AuditOptions", "FairnessRun", "audit"]

CEILING = 0.95


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
    min_n = options.min_group_size if options.min_group_size is not None else suite.min_group_size
    rules = list(options.rules) if options.rules is not None else list(suite.rules)
    rules = [r for r in rules if r.kind == "absolute"]  # regression rules need a base run: `diff`
    if options.threshold is not None:
        rules = [threshold_for(r, options.threshold, METRICS[r.metric].kind if r.metric in METRICS else "") for r in rules]
    recordings = join_rows(cases, recordings)  # grid order, joined on row_id: never trust the caller's order
    if scores is None:
        scores = score_texts([r.output for r in recordings], mode)
    specs = list(METRICS.values())
    Y = metric_matrix(scores, specs)
    columns = {ph: suite.column_for(ph) for ph in suite.placeholders}
    slice_order = ["_".join(s[d] for d in suite.attributes) for s in suite.slice_list]
    design = build_design(cases, slice_order, columns)
    all_scopes = scopes(design)

    caveats: list[Caveat] = []
    metric_results = {s.name: MetricResult(metric=s.name, kind=s.kind, higher_is_worse=s.higher_is_worse, description=s.description, scopes={}) for s in specs}
    for scope in all_scopes:
        table = slice_table(design, Y, scope)
        values = table.values
        underpowered = bool(np.any(table.n < min_n))
        want_ci = scope.depth <= options.interval_depth
        st = scope_stats(design, Y, scope, specs, options.bootstrap, options.seed) if want_ci else None
        if st is not None:
            lo, hi = slice_intervals(st, specs, options.alpha)
            plo, phi = pooled_interval(st, specs, options.alpha)
        for m, spec in enumerate(specs):
            v = values[:, m]
            hidden = underpowered and not options.allow_small_samples
            by_slice = {
                sl: Estimate(
                    value=json_number(v[i]) if table.n[i] >= min_n or options.allow_small_samples else None,
                    n=int(table.n[i]),
                    ci=[json_number(lo[i, m]), json_number(hi[i, m])] if st is not None and (table.n[i] >= min_n or options.allow_small_samples) else None,
                )
                for i, sl in enumerate(design.slices)
            }
            wi = worst_index(v, spec)
            worst = Estimate(value=None if hidden or wi is None else json_number(v[wi]), slice=None if hidden or wi is None else design.slices[wi])
            g = Estimate(value=None if hidden else json_number(gap(v)))
            if st is not None and not hidden:
                wint = worst_interval(st, m, spec, options.alpha)
                gint = gap_interval(st, m, spec, options.alpha)
                worst = worst.model_copy(update={"ci": wint.as_list(), "method": wint.method})
                g = g.model_copy(update={"ci": gint.as_list(), "method": gint.method})
            pooled = Estimate(
                value=json_number(np.sum(table.sums[:, m]) / max(np.sum(table.n), 1)),
                n=int(np.sum(table.n)),
                ci=[json_number(plo[m]), json_number(phi[m])] if st is not None else None,
                method=("wilson-effective-n" if spec.kind == "rate" else "cluster-bootstrap-se") if st is not None else None,
            )
            notes = []
            if underpowered:
                notes.append("underpowered" + (" (illustrative: --allow-small-samples)" if options.allow_small_samples else ""))
            if spec.kind == "rate" and scope.depth <= 1 and np.all(np.isfinite(v)):
                if np.all(v == 0):
                    notes.append("lexical ceiling: the flag never fires in any slice (0%); no disparity can be measured")
                elif np.all(v >= CEILING):
                    notes.append(f"lexical ceiling: the flag fires in ≥{CEILING:.0%} of outputs in every slice")
            metric_results[spec.name].scopes[scope.name] = ScopeResult(
                n=int(np.sum(table.n)), by_slice=by_slice, pooled=pooled, worst_slice=worst, max_minus_min=g, caveats=notes
            )

    _add_permutation_tests(design, Y, specs, metric_results, options)
    checks = _check_rules(rules, metric_results, [f.id for f in suite.families], min_n, options)
    states = [c.state for c in checks]
    state = overall_state(states) if rules else "undefined"
    reasons = [f"{c.rule} [{c.scope}]: {c.state} — {c.reason}" for c in checks if c.state != "pass"]
    if not manifest.complete and state == "pass":
        state = "illustrative"
        reasons.append(f"the recording set is incomplete ({len(recordings)}/{manifest.expected_rows} rows): a pass is only illustrative")
    if not rules:
        reasons = ["the suite defines no decision rules"]
    gate = Gate(state=state, exit_code=exit_code(state, options.fail_on), fail_on=options.fail_on, gate_on=options.gate_on, reasons=reasons)

    caveats += _run_caveats(suite, manifest, mode, metric_results, rules)
    families = _family_table(suite, metric_results, checks)
    stability = [_stability(rule, design, Y, specs, min_n, options) for rule in rules if rule.scope == "each_family"]
    variance = {
        s.name: {k: round(v, 6) for k, v in variance_shares(design, Y[:, m]).items()}
        for m, s in enumerate(specs)
        if s.higher_is_worse is not None or s.kind == "rate"
    }
    rubric = load_rubric()
    run = FairnessRun(
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
        n_rows=len(recordings),
        slices=design.slices,
        families=families,
        rules=checks,
        stability=stability,
        gate=gate,
        caveats=caveats,
        variance=variance,
        tests=Methods(
            interval_rate="Wilson on effective n (cluster-bootstrap design effect), 95%",
            interval_worst_slice="simultaneous Bonferroni bounds over slices",
            interval_gap="simultaneous Bonferroni bounds over slices, lower end clamped at 0",
            bootstrap=f"cluster bootstrap over template cells, B={options.bootstrap}, seed={options.seed}",
            coverage=COVERAGE_NOTE,
            permutation=f"slice labels permuted within template cells, P={options.permutations}, harm metrics overall and per family; Holm and BH adjusted across all of them",
        ),
        metrics=list(metric_results.values()),
    )
    return run, scores


def _add_permutation_tests(design: Design, Y: np.ndarray, specs: list[MetricSpec], results: dict[str, MetricResult], options: AuditOptions) -> None:
    """Permutation p-values for the harm metrics, overall and per family, Holm- and BH-adjusted together."""
    if options.permutations <= 0:
        return
    harm = [m for m, s in enumerate(specs) if s.higher_is_worse is True]
    fam = design.factors["family"]
    _, p_fam, _, p_all = permutation_pvalues(design, Y[:, harm], fam.codes, len(fam.levels), P=options.permutations, seed=options.seed)
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


def _check_rules(rules: list[DecisionRule], results: dict[str, MetricResult], families: list[str], min_n: int, options: AuditOptions) -> list[RuleCheck]:
    checks = []
    for rule in rules:
        mr = results[rule.metric]
        names = ["overall"] if rule.scope == "overall" else [f"family={f}" for f in families]
        for name in names:
            sr = mr.scopes.get(name)
            if sr is None:
                checks.append(RuleCheck(rule=rule.id, scope=name, metric=rule.metric, statistic=rule.statistic, value=None,
                                        interval=None, threshold=rule.threshold, comparator=rule.comparator, fired=False,
                                        state="undefined", reason="no recorded rows in this scope", n=0))
                continue
            est = _rule_value(rule, sr)
            underpowered = any(e.n is not None and e.n < min_n for e in sr.by_slice.values())
            value = est.value
            if value is None and options.allow_small_samples:
                value = math.nan
            interval = tuple(est.ci) if est.ci else None
            state, fired, reason = check_state(
                rule,
                math.nan if value is None else value,
                interval,  # type: ignore[arg-type]
                underpowered=underpowered,
                allow_small_samples=options.allow_small_samples,
                gate_on=options.gate_on,
            )
            checks.append(
                RuleCheck(
                    rule=rule.id, scope=name, metric=rule.metric, statistic=rule.statistic, value=est.value,
                    interval=est.ci, threshold=rule.threshold, comparator=rule.comparator, fired=fired,
                    state=state, reason=reason, worst_slice=est.slice, n=sr.n,
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


def _stability(rule: DecisionRule, design: Design, Y: np.ndarray, specs: list[MetricSpec], min_n: int, options: AuditOptions) -> Stability:
    """Does the rule's verdict survive a change of family, paraphrase or decoding regime?"""
    m = [s.name for s in specs].index(rule.metric)
    spec = specs[m]

    def verdict(mask: np.ndarray) -> bool | None:
        scope = Scope("x", (), mask)
        t = slice_table(design, Y, scope)
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
            v = verdict(f.codes == i)
            if v is not None:
                out[lv] = v
        return out

    fam, par, reg = by("family"), by("paraphrase"), by("regime")
    counts = [[sum(d.values()), len(d)] for d in (fam, par, reg)]
    depends = []
    for label, d in (("family", fam), ("paraphrase", par), ("decoding regime", reg)):
        if len(set(d.values())) > 1:
            depends.append(label)
    tail = f"the verdict depends on the {', '.join(depends)}" if depends else "the verdict is stable across families, paraphrases and regimes"
    summary = (
        f"{rule.id}: flagged in {counts[0][0]}/{counts[0][1]} families, {counts[1][0]}/{counts[1][1]} paraphrases "
        f"and {counts[2][0]}/{counts[2][1]} decoding regimes; {tail}"
    )
    return Stability(rule=rule.id, families=counts[0], paraphrases=counts[1], regimes=counts[2], by_family=fam, by_paraphrase=par, by_regime=reg, summary=summary)


def _run_caveats(suite: Suite, manifest: Manifest, mode: str, results: dict[str, MetricResult], rules: list[DecisionRule]) -> list[Caveat]:
    out = []
    if not manifest.model.is_audited_model:
        out.append(Caveat(code="test-model", message=f"recordings come from a stand-in test model (`{manifest.model.id}`), not the audited model: {manifest.model.note}"))
    # Staleness is about what the model was asked (prompts, sampling, seeds, system prompt): a change
    # to rules, thresholds or the scorer leaves the recordings valid, and the audit applies the current ones.
    if manifest.grid_hash != grid_hash(suite.expand(), suite.system_prompt):
        out.append(Caveat(code="stale-recordings", message="the recordings were made for another grid of this suite (grid hash differs); every replayed row matches its prompt, sampling and seed, but the recorded grid held other rows"))
    if not manifest.complete:
        out.append(Caveat(code="incomplete-recordings", message=f"the recording set is marked incomplete ({manifest.rows}/{manifest.expected_rows} rows)"))
    out.append(Caveat(code="interval-coverage", message=COVERAGE_NOTE))
    if mode == "paper":
        out.append(Caveat(code="scorer-mode", message="scorer mode `paper`: substring matching as in the reference rubric ('miss' matches 'mission', 'weak' matches 'weakness'); use `strict` for whole words"))
    else:
        out.append(Caveat(code="scorer-mode", message="scorer mode `strict`: whole-word matching; numbers differ from the paper's substring rubric"))
    ruled = {r.metric for r in rules}
    for name, mr in results.items():
        for scope_name, sr in mr.scopes.items():
            if scope_name != "overall" and not (name in ruled and scope_name.startswith("family=") and "," not in scope_name):
                continue
            for note in sr.caveats:
                code = "underpowered" if note.startswith("underpowered") else "lexical-ceiling"
                out.append(Caveat(code=code, message=note, metric=name, scope=scope_name))
    return out
