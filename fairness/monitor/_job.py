"""The monitor job: options → engine → per-cell aggregate → `MonitorRun` → outputs, written in one staged move.

`build_run` is pure (the aggregate in, the record out), so every engine's aggregate gives the
same monitor.json bytes.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from pydantic import ValidationError

from fairness._util.errors import FairnessError, validation_message
from fairness._version import __version__
from fairness.audit._gate import decide, head_verdict
from fairness.audit._results import Caveat, ScorerInfo, SuiteInfo, ToolInfo
from fairness.monitor._drift import RefSide, changes, grid_reference, parse_reference, references, regressions
from fairness.monitor._engine import Aggregate, Engine, ScanJob
from fairness.monitor._mapping import load_mapping
from fairness.monitor._options import MonitorOptions
from fairness.monitor._results import Example, MonitorRun, Reference, SourceInfo
from fairness.monitor._score import scorer_problem
from fairness.monitor._stats import WindowCells, heterogeneity, windows_of
from fairness.monitor._windows import OVERALL, counts_of, rule_checks, scope_of, window_result
from fairness.score._catalog import MetricSpec
from fairness.suite._suite import Suite

OUTPUTS = ("monitor.json", "summary.md", "junit.xml")
HETEROGENEOUS = 3.0
"""A window's slice whose units' rates differ this much (`heterogeneity`: the clustered variance over the binomial
one, ≥ 3) marks traffic of the kind where benchmarks/monitor_coverage.py measured the clustered interval under 95%:
that benchmark's windows reach it 0–2% of the time without unit effects, 1–36% with mild ones (sd 0.5), and
23–95% in every scenario still covering below 0.93."""

METHODS = {
    "interval_rate": "Clopper–Pearson (rates) or Garwood (counts) at the effective sample size n / design effect; "
                     "with a unit field the design effect is the cluster-robust (linearised ratio, CR2: each unit's "
                     "residual over 1 − its share of the records) variance over the binomial one, floored at 1, times "
                     "(t_ν/z)² with ν the effective units: the least of units − 1, (Σn)²/Σn² − 1 and "
                     "2·units/(kurtosis − 1) of the unit residuals (Korn–Graubard)",
    "interval_worst_slice": "the audit's simultaneous worst-slice interval (Šidák over slices) on those bounds",
    "interval_gap": "the audit's paired MOVER/Newcombe gap interval on those bounds, Bonferroni over slice pairs",
    "change": "each window against its reference: the two sides' exact intervals combined by MOVER as independent "
              "(a unit in both windows only narrows the true interval); simultaneous 95% per metric and statistic "
              "(Bonferroni over windows, and slices for per-slice changes), so a drift flag is a 5% false alarm at most",
    "rule_checks": "absolute rules: `each_family` rules in every window (Holm across windows), `overall` rules on "
                   "all windows pooled; regression rules in every window against its reference (Holm across "
                   "windows); each decided by the one gate rule of `run`",
    "coverage": "benchmarks/monitor_coverage.py: heterogeneous unit sizes and unit-level random effects; the "
                "`heterogeneous-units` caveat marks traffic of the kind where it covers below 95%",
}


@dataclass(frozen=True)
class MonitorOutputs:
    run: MonitorRun
    out: Path
    engine: str


def engine_for(name: str, spark_master: str | None = None) -> Engine:
    """The engine a run asked for (its heavy library imported only now)."""
    if name == "duckdb":
        from fairness.monitor._duckdb import DuckDBEngine

        return DuckDBEngine()
    try:
        from fairness.monitor._spark import SparkEngine
    except ImportError as exc:
        raise FairnessError(f"the Spark engine is not available ({exc}); install the `spark` extra") from None
    return SparkEngine(master=spark_master)


def check_options(data: dict) -> MonitorOptions:
    try:
        return MonitorOptions.model_validate(data)
    except ValidationError as err:
        raise FairnessError(validation_message(err, "monitor", MonitorOptions)) from None


def build_run(agg: Aggregate, job: ScanJob, suite: Suite, options: MonitorOptions, *,
              grid_path: str | None = None, n_files: int | None = None) -> MonitorRun:
    """The typed record of one monitor run, from an engine's aggregate alone (pure but for reading a grid reference)."""
    rubric = suite.compiled_rubric
    metrics = rubric.metrics
    min_n, alpha = suite.min_group_size, options.alpha
    table = agg.table
    slices = sorted(set(table.column("slice").to_pylist()), key=lambda s: s.encode())
    windows = windows_of(table, slices)
    results = {w: window_result(wc, alpha, min_n, metrics) for w, wc in windows.items()}
    small = {w: r.underpowered for w, r in results.items()}
    scopes = {scope_of(w): (windows[w], results[w]) for w in windows}
    if windows:
        pooled = windows_of(table, slices, pool=OVERALL)[OVERALL]
        scopes[OVERALL] = (pooled, window_result(pooled, alpha, min_n, metrics))
    checks = rule_checks(list(suite.rules), scopes, alpha=alpha, min_group_size=min_n, gate_on=options.gate_on,
                         metrics=metrics)
    kind, label = parse_reference(options.reference)
    grid: RefSide | None = None
    reference = Reference(kind=kind, window=label if kind == "window" else None)  # type: ignore[arg-type]
    if kind == "results":
        assert grid_path is not None
        reference, grid = grid_reference(grid_path, slices, min_n)
    refs = references(kind, label, windows, small, grid) if windows else {}
    moves = changes(windows, refs, small, alpha, metrics)
    regs = regressions(list(suite.rules), windows, refs, small, alpha, metrics)
    state, reasons = head_verdict([c.state for c in checks],
                                  [f"{c.rule} [{c.scope}]: {c.state} — {c.reason}" for c in checks if c.state != "pass"],
                                  has_rules=any(r.kind == "absolute" for r in suite.rules),
                                  empty=None if agg.rows_sampled else
                                  f"no record to judge: the sample kept none of the {agg.rows_read} records read")
    has_regression = any(r.kind == "regression" for r in suite.rules)
    reg_reasons = [f"{c.rule} [{c.scope}{f', slice {c.slice}' if c.slice else ''}]: {c.state} — {c.reason}"
                   for c in regs if c.state != "pass"]
    gate = decide(state, reasons, fail_on=options.fail_on, gate_on=options.gate_on,
                  regression_states=[c.state for c in regs] if refs and has_regression else None,
                  regression_reasons=reg_reasons)
    drift = [w for w in windows if any(c.scope == scope_of(w) and c.verdict == "regressed" for c in moves)]
    return MonitorRun(
        gate=gate,
        tool=ToolInfo(name="llm-fairness-check", version=__version__),
        suite=SuiteInfo(name=suite.name, version=suite.version, hash=suite.hash),
        scorer=ScorerInfo(mode=job.mode, rubric_version=rubric.version, rubric_sha256=rubric.sha256),
        source=SourceInfo(format=job.format, files=len(job.files) if n_files is None else n_files, mapping=job.mapping,
                          rows_read=agg.rows_read, sample=job.sample, rows_sampled=agg.rows_sampled,
                          window=job.window.label),
        alpha=alpha, min_group_size=min_n, slices=slices, windows=list(results.values()), reference=reference,
        changes=moves, rules=checks, regressions=regs, drift=drift,
        caveats=_caveats(job, results, slices, kind, refs, heterogeneous_windows(windows, metrics)),
        methods=METHODS,
        examples=[Example(**e) for e in agg.examples] if job.examples else None,
    )


def heterogeneous_windows(windows: dict[str, WindowCells], metrics: dict[str, MetricSpec]) -> list[str]:
    """Windows (sorted) with a slice whose units differ strongly in any metric (`HETEROGENEOUS`); none without units."""
    return sorted(w for w, wc in windows.items() if wc.clustered and any(
        bool((heterogeneity(counts_of(wc, spec)) >= HETEROGENEOUS).any()) for spec in metrics.values()))


def _caveats(job: ScanJob, results: dict, slices: list[str], kind: str, refs: dict, mixed: list[str]) -> list[Caveat]:
    out = []
    if job.sample > 1:
        out.append(Caveat(code="sampled", message=f"a deterministic 1/{job.sample} sample of the records: every figure "
                                                   "is about the sampled records' traffic, with intervals for it"))
    small = [w for w, r in results.items() if r.underpowered]
    if small:
        out.append(Caveat(code="underpowered-window", message=f"{len(small)} window(s) have a slice below min_group_size "
                          f"({', '.join(small[:10])}{' …' if len(small) > 10 else ''}): their checks and changes are "
                          "undefined, never a pass"))
    if mixed:
        out.append(Caveat(code="heterogeneous-units", message=f"{len(mixed)} window(s) have a slice whose units' rates "
                          f"differ strongly (clustered variance ≥ {HETEROGENEOUS:g}× the binomial; "
                          f"{', '.join(mixed[:10])}{' …' if len(mixed) > 10 else ''}): in such traffic, above all where "
                          "heavy users are flagged more often, the 95% intervals covered as little as 88.5% in "
                          "benchmarks/monitor_coverage.py (the misses above the upper end), and a window that misses "
                          "looks benign, so read every window of this log set with that margin"))
    if any("(missing)" in s.split("_") for s in slices):
        out.append(Caveat(code="missing-group", message="some records lack a group value: they form slices with "
                                                         "`(missing)` in their name"))
    if kind == "results":
        out.append(Caveat(code="grid-reference", message="the reference is a grid audit (its estimand: that grid's "
                          "template cells), the windows are production traffic: a change mixes a change of model "
                          "behaviour with the change from prompts under test to real prompts"))
    if not refs:
        out.append(Caveat(code="no-reference", message="no window has a reference to compare with (one window and "
                                                        "`--reference previous`?): no drift was measured"))
    return out


@dataclass(frozen=True)
class Prepared:
    """A monitor run whose options, suite, mapping, inputs and output folder are checked: ready to scan."""

    suite: Suite
    job: ScanJob
    out: Path
    grid_path: str | None


def prepare(options: MonitorOptions) -> Prepared:
    """Check every option and file of a run before any log is scanned (a `FairnessError` line on a problem)."""
    from fairness._util.files import check_output_dir
    from fairness.monitor._drift import read_grid_results
    from fairness.monitor._inputs import resolve_inputs
    from fairness.suite._suite import load_suite

    suite = load_suite(options.suite)
    mapping = load_mapping(options.mapping)
    files, fmt = resolve_inputs(options.logs)
    out = check_output_dir(options.out)
    kind, _label = parse_reference(options.reference)
    grid_path = None
    if kind == "results":
        grid_path = str(Path(options.reference) / "results.json") if Path(options.reference).is_dir() else options.reference
        read_grid_results(grid_path)
    problem = scorer_problem(suite.compiled_rubric)
    if problem is not None:
        raise FairnessError(f"suite `{suite.name}`: {problem}; monitor scores with term lists and regexes only")
    job = ScanJob(files=files, format=fmt, mapping=mapping, sample=options.sample, window=options.window_spec(),
                  mode=suite.scorer.mode, examples=options.examples, rubric=suite.compiled_rubric)
    return Prepared(suite=suite, job=job, out=out, grid_path=grid_path)


def monitor_logs(options: MonitorOptions, engine: Engine | None = None) -> MonitorOutputs:
    """Run the monitor job and write its outputs; every option and file is checked (`prepare`) before the logs are scanned."""
    from fairness._util.files import staged_outputs, write_atomic
    from fairness.monitor._render import junit, monitor_json, summary_md

    ready = prepare(options)
    engine = engine or engine_for(options.engine, options.spark_master)
    agg = engine.aggregate(ready.job)
    run = build_run(agg, ready.job, ready.suite, options, grid_path=ready.grid_path)
    with staged_outputs(ready.out) as stage:
        write_atomic(stage / "monitor.json", monitor_json(run))
        write_atomic(stage / "summary.md", summary_md(run))
        write_atomic(stage / "junit.xml", junit(run))
    return MonitorOutputs(run=run, out=ready.out, engine=options.engine)
