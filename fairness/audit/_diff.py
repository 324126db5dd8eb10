"""Base-vs-head diff: did a change make a metric's worst slice or gap worse, with confidence?

Each side is an output directory of `run` (results.json + transcripts.jsonl). Estimand: the
change in the grid estimand (each slice's expected value on these template cells if the seeds
were redrawn) from base to head. Each side gets the audit's own exact interval for the
statistic (Korn–Graubard worst slice or paired-Newcombe gap, from per-cell counts), and the
change combines them by MOVER/Newcombe. When both grids hold the same rows the comparison is
**paired**: the correlation of the two sides' worst-slice estimates over the shared template
cells narrows the interval (capped so the variance never drops below the binomial part,
which cannot cancel); the gap's change is combined as if independent (conservative).
No percentile bootstrap: it under-covers a max over slices and values near 0.

Each side's metrics are its own rubric's (results.json `rubric.metrics`; the paper's in older
results). Only the metrics both rubrics define identically (same source, terms, matching and case,
and for a derived flag the same for every flag it combines) are compared; the others are listed in
`not_compared`, and a regression rule on one of them is `undefined`, saying why.
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from pydantic import Field

from fairness._util.canonical import json_number
from fairness._util.errors import FairnessError
from fairness._util.io import load_json
from fairness._util.models import Strict
from fairness.audit._gate import EXIT_CODES, State, check_state, overall_state
from fairness.audit._intervals import CellCounts, SliceBounds, cluster_corr, holm_levels, level_p, mover
from fairness.audit._intervals import gap_interval as gap_ci
from fairness.audit._intervals import worst_interval as worst_ci
from fairness.audit._results import RegressionCheck
from fairness.score._catalog import MetricSpec
from fairness.suite._rules import DecisionRule

DIFF_SCHEMA_VERSION = "1.2"
"""1.2: `not_compared`, the metrics the two sides' rubrics do not share."""


@dataclass(frozen=True)
class Side:
    """One run's per-row data, encoded for resampling."""

    results: dict[str, Any]
    row_ids: list[str]
    slices: list[str]
    slice_codes: np.ndarray
    family: np.ndarray
    families: list[str]
    cell_keys: list[str]
    Y: np.ndarray
    specs: list[MetricSpec]
    definitions: dict[str, dict[str, Any]] = dataclasses.field(default_factory=dict)
    """Each metric's definition (results.json `rubric.metrics`), by name."""


def _results_path(path: Path) -> Path:
    return path / "results.json" if path.is_dir() else path


_REQUIRED = {"suite": ("name", "hash"), "recordings": ("model_id",), "gate": ("state",)}


def check_schema(rp: Path, results: Any) -> None:
    """`results` (read from `rp`) is a results.json of this version's schema major."""
    if not isinstance(results, dict) or "schema_version" not in results or not isinstance(results.get("slices"), list):
        raise FairnessError(f"`{rp}` is not a results.json written by `llm-fairness-check run`")
    from fairness.audit._results import SCHEMA_VERSION

    theirs, ours = str(results["schema_version"]), SCHEMA_VERSION
    if theirs.split(".")[0] != ours.split(".")[0]:
        raise FairnessError(f"`{rp}` has results schema {theirs}; this version reads schema {ours.split('.')[0]}.x only")


def read_results(path: str | Path) -> tuple[Path, dict[str, Any]]:
    """A run's results.json, checked to be one this version can compare: same schema major
    version and every field the diff reads. Cheap: callers use it to vet a baseline up front."""
    rp = _results_path(Path(path))
    results = load_json(rp, missing=f"no results at `{rp}` (pass a `run` output directory or its results.json)",
                        what="results")
    check_schema(rp, results)
    for key, fields in _REQUIRED.items():
        part = results.get(key)
        missing = [f for f in fields if not isinstance(part, dict) or f not in part]
        if missing:
            raise FairnessError(f"`{rp}` lacks `{key}.{missing[0]}` (results of an older version? rerun `run` on it)")
    if not (rp.parent / "transcripts.jsonl").is_file():
        raise FairnessError(
            f"`{rp.parent / 'transcripts.jsonl'}` is missing: `diff` needs the per-row transcripts written next to results.json"
        )
    return rp, results


def load_side(path: str | Path, results: dict[str, Any] | None = None) -> Side:
    """One run's side of the diff: its results.json (or `results`, the run in hand, whose
    transcripts.jsonl lies in the directory `path`) and its per-row transcripts."""
    if results is None:
        rp, results = read_results(path)
    else:
        rp = Path(path) / "results.json"
    tp = rp.parent / "transcripts.jsonl"
    if not tp.is_file():
        raise FairnessError(f"`{tp}` is missing: `diff` needs the per-row transcripts written next to results.json")
    from fairness._util.files import MAX_RECORDS_BYTES, loads_json, read_text_capped

    text = read_text_capped(tp, MAX_RECORDS_BYTES, "transcripts")
    rows = [loads_json(line, f"`{tp}` line {i}") for i, line in enumerate(text.splitlines(), 1) if line.strip()]
    if not all(isinstance(r, dict) for r in rows):
        raise FairnessError(f"`{tp}` holds a line that is not a JSON object")
    need = {"row_id", "family", "paraphrase_id", "placeholders", "slice_id", "regime", "scores"}
    for i, r in enumerate(rows, 1):
        if need - r.keys():
            raise FairnessError(f"`{tp}` row {i} lacks `{sorted(need - r.keys())[0]}`")
    slices = list(results["slices"])
    s_index = {s: i for i, s in enumerate(slices)}
    families = list(dict.fromkeys(r["family"] for r in rows))
    f_index = {f: i for i, f in enumerate(families)}
    specs, definitions = _side_metrics(rp, results)
    try:
        Y = np.array([[float(r["scores"][m.column]) for m in specs] for r in rows])
        codes = np.array([s_index[r["slice_id"]] for r in rows], dtype=np.int64)
    except (KeyError, TypeError, ValueError) as exc:
        raise FairnessError(f"`{tp}` has a malformed row ({type(exc).__name__}: {exc})") from None
    cell_keys = [
        f"{r['family']}|{r['paraphrase_id']}|{json.dumps(r['placeholders'], sort_keys=True)}|{r['regime']}" for r in rows
    ]
    return Side(
        results=results, row_ids=[r["row_id"] for r in rows], slices=slices, slice_codes=codes,
        family=np.array([f_index[r["family"]] for r in rows], dtype=np.int64), families=families,
        cell_keys=cell_keys, Y=Y.reshape(len(rows), len(specs)), specs=specs, definitions=definitions,
    )


def _side_metrics(rp: Path, results: dict[str, Any]) -> tuple[list[MetricSpec], dict[str, dict[str, Any]]]:
    """A run's metric catalogue and definitions, from its results.json (the paper's when it predates them)."""
    rubric = results.get("rubric")
    if rubric is None:
        from fairness.score._rubric import paper_rubric

        paper = paper_rubric()
        return list(paper.metrics.values()), {d["name"]: d for d in paper.definitions("paper")}
    try:
        defs = {d["name"]: d for d in rubric["metrics"]}
        specs = [MetricSpec(d["name"], d["column"], "rate" if d["unit"] == "rate" else "count", d["higher_is_worse"],
                            d["description"]) for d in defs.values()]
    except (KeyError, TypeError) as exc:
        raise FairnessError(f"`{rp}` has a malformed `rubric.metrics` ({type(exc).__name__}: {exc})") from None
    return specs, defs


_COUNTED = ("kind", "source", "of", "match", "case", "terms")
"""What makes two metric definitions count the same thing (not their name, column or wording)."""


def shared_metrics(base: Side, head: Side) -> tuple[list[str], list[str]]:
    """The head's metrics the base defines identically (in the head's order), and why each other one of
    either side is not compared."""
    same: dict[str, bool] = {}

    def identical(name: str) -> bool:
        if name not in same:
            b, h = base.definitions.get(name), head.definitions.get(name)
            same[name] = False  # a cycle cannot occur (rubrics refuse them); this guards the recursion
            ok = b is not None and h is not None and all(b.get(k) == h.get(k) for k in _COUNTED)
            if ok and h is not None and h["source"] in ("any_of", "all_of"):
                ok = all(identical(x) for x in h["of"])
            same[name] = ok
        return same[name]

    shared = [s.name for s in head.specs if identical(s.name)]
    why = [f"`{s.name}`: only in the base's rubric" for s in base.specs if s.name not in head.definitions]
    why += [f"`{s.name}`: only in the head's rubric" if s.name not in base.definitions
            else f"`{s.name}`: defined differently by the base's and the head's rubrics"
            for s in head.specs if s.name not in shared]
    return shared, why


def _only(side: Side, names: list[str]) -> Side:
    """`side` with the metrics `names` only, in that order."""
    index = {s.name: i for i, s in enumerate(side.specs)}
    cols = [index[n] for n in names]
    return dataclasses.replace(side, Y=side.Y[:, cols], specs=[side.specs[i] for i in cols])


class Change(Strict):
    metric: str
    scope: str
    statistic: str
    slice: str | None = None
    """The head's worst slice (worst-slice statistics)."""
    base: float | None
    head: float | None
    change: float | None
    ci: list[float | None] | None
    verdict: str
    """`regressed`, `improved` or `unchanged` (the interval for the change excludes 0, or not)."""


class DiffResult(Strict):
    schema_version: str = DIFF_SCHEMA_VERSION
    base: dict[str, Any]
    head: dict[str, Any]
    paired: bool
    bootstrap: int
    seed: int
    changes: list[Change]
    checks: list[RegressionCheck]
    state: State
    exit_code: int
    not_compared: list[str] = Field(default_factory=list)
    """The metrics the two runs' rubrics do not define identically, and why: they are not compared."""


def _cells(side: Side, mask: np.ndarray, cell_index: dict[str, int]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per (cell, slice) sums (C × S × M) and counts (C × S) over `mask`."""
    C, S, M = len(cell_index), len(side.slices), side.Y.shape[1]
    cl = np.array([cell_index[k] for k, keep in zip(side.cell_keys, mask, strict=True) if keep], dtype=np.int64)
    key = cl * S + side.slice_codes[mask]
    T = np.zeros((C * S, M))
    np.add.at(T, key, side.Y[mask])
    N = np.bincount(key, minlength=C * S).astype(float)
    return T.reshape(C, S, M), N.reshape(C, S), np.bincount(side.slice_codes[mask], minlength=S).astype(float)


def _side_interval(cc: CellCounts, spec: MetricSpec, statistic: str, alpha: float, *,
                   low_tail: float | None = None, high_tail: float | None = None
                   ) -> tuple[float, float, float, int | None, float]:
    """(point, low, high, worst slice, design effect of that slice) of one side's statistic;
    `low_tail`/`high_tail` set one end's one-sided level (default α/2), e.g. for Holm."""
    sb = SliceBounds.of(cc)
    v = cc.values
    live = np.flatnonzero(sb.live)
    if len(live) == 0:
        return math.nan, math.nan, math.nan, None, math.nan
    tails = {"low_tail": low_tail, "high_tail": high_tail}
    if statistic == "max_minus_min":
        iv = gap_ci(sb, alpha, **tails)
        return float(np.nanmax(v[live]) - np.nanmin(v[live])), iv.low, iv.high, None, math.nan
    worst = "min" if spec.higher_is_worse is False else "max"
    w = int(live[np.argmin(v[live])] if worst == "min" else live[np.argmax(v[live])])
    iv = worst_ci(sb, worst, alpha, **tails)
    return float(v[w]), iv.low, iv.high, w, float(sb.deff[w])


@dataclass(frozen=True)
class _Tables:
    """One scope's per (cell, slice) sums and counts on both sides."""

    Tb: np.ndarray
    Nb: np.ndarray
    Th: np.ndarray
    Nh: np.ndarray


def _change(t: _Tables, i: int, spec: MetricSpec, statistic: str, paired: bool, alpha: float,
            breach_low: bool = True, tail: float | None = None) -> tuple[float, float, float, float, float, int | None]:
    """Point change head − base, its MOVER interval and the head's worst slice (see the module docstring)."""
    cb, ch = CellCounts(t.Tb[:, :, i], t.Nb, spec.kind), CellCounts(t.Th[:, :, i], t.Nh, spec.kind)

    def corr(wb: int, wh: int) -> float:
        return cluster_corr(t.Th[:, wh, i], t.Nh[:, wh], t.Tb[:, wb, i], t.Nb[:, wb])

    return side_change(cb, ch, spec, statistic, alpha, breach_low=breach_low, tail=tail, corr=corr if paired else None)


def side_change(cb: CellCounts, ch: CellCounts, spec: MetricSpec, statistic: str, alpha: float, *,
                breach_low: bool = True, tail: float | None = None, corr: Callable[[int, int], float] | None = None
                ) -> tuple[float, float, float, float, float, int | None]:
    """(base, head, change head − base, its MOVER interval, the head's worst slice) from each side's counts.

    `tail` sets the one-sided level of the interval's breaching end (the lower end when
    `breach_low`): the head's matching end and the base's opposite end are taken at it. `corr`
    (paired sides, worst slices only) gives the correlation of the two worst slices' estimates,
    capped so the variance never drops below the binomial part; None: independent sides."""
    head_tails = {"low_tail": tail} if breach_low else {"high_tail": tail}
    base_tails = {"high_tail": tail} if breach_low else {"low_tail": tail}
    pb, lb, ub, wb, db = _side_interval(cb, spec, statistic, alpha, **base_tails)
    ph, lh, uh, wh, dh = _side_interval(ch, spec, statistic, alpha, **head_tails)
    r = 0.0
    if corr is not None and statistic != "max_minus_min" and wb is not None and wh is not None and np.isfinite([db, dh]).all():
        r = corr(wb, wh)
        r = min(max(r, 0.0), 1.0 - 1.0 / min(db, dh))
    d = ph - pb
    if not np.isfinite([pb, lb, ub, ph, lh, uh]).all():
        return pb, ph, d, math.nan, math.nan, wh
    lo, hi = mover(d, ph - lh, uh - ph, pb - lb, ub - pb, r)
    return pb, ph, d, lo, hi, wh


def diff_runs(base_path: str | Path, head_path: str | Path, *, rules: list[DecisionRule] | None = None,
              B: int = 2000, seed: int = 20260325, alpha: float = 0.05) -> DiffResult:
    """Compare two runs' output directories; `B` and `seed` are recorded for provenance only (the intervals are exact)."""
    return diff_sides(load_side(base_path), load_side(head_path), rules=rules, B=B, seed=seed, alpha=alpha)


def diff_sides(base: Side, head: Side, *, rules: list[DecisionRule] | None = None,
               B: int = 2000, seed: int = 20260325, alpha: float = 0.05) -> DiffResult:
    """Every metric's change from `base` to `head` per scope, and the regression checks of `rules`."""
    if base.slices != head.slices:
        raise FairnessError(f"base and head audit different slices ({base.slices} vs {head.slices})")
    shared, not_compared = shared_metrics(base, head)
    base, head = _only(base, shared), _only(head, shared)
    paired = base.row_ids == head.row_ids
    scopes = ["overall"] + [f"family={f}" for f in head.families if f in base.families]
    changes: list[Change] = []
    tables: dict[str, _Tables] = {}
    for scope in scopes:
        fam = scope.split("=", 1)[1] if "=" in scope else None
        masks = [np.ones(len(side.row_ids), bool) if fam is None else side.family == side.families.index(fam) for side in (base, head)]
        if paired:
            keys = list(dict.fromkeys(k for k, m in zip(head.cell_keys, masks[1], strict=True) if m))
            ib = ih = {k: i for i, k in enumerate(keys)}
        else:
            kb = list(dict.fromkeys(k for k, m in zip(base.cell_keys, masks[0], strict=True) if m))
            kh = list(dict.fromkeys(k for k, m in zip(head.cell_keys, masks[1], strict=True) if m))
            ib, ih = {k: i for i, k in enumerate(kb)}, {k: i for i, k in enumerate(kh)}
        Tb, Nb, _ = _cells(base, masks[0], ib)
        Th, Nh, _ = _cells(head, masks[1], ih)
        t = tables[scope] = _Tables(Tb, Nb, Th, Nh)
        for i, spec in enumerate(head.specs):
            if spec.higher_is_worse is None:
                continue
            for statistic in ("worst_slice", "max_minus_min"):
                pb, ph, change, lo, hi, w = _change(t, i, spec, statistic, paired, alpha)
                verdict = change_verdict(spec, statistic, lo, hi)
                changes.append(Change(metric=spec.name, scope=scope, statistic=statistic,
                                      slice=head.slices[w] if w is not None and statistic == "worst_slice" else None,
                                      base=json_number(pb), head=json_number(ph),
                                      change=json_number(change), ci=[json_number(lo), json_number(hi)], verdict=verdict))
    checks = regression_checks(rules or [], head, tables, paired, alpha)
    state = overall_state([c.state for c in checks]) if checks else "pass"
    return DiffResult(
        base=_describe(base), head=_describe(head), paired=paired, bootstrap=B, seed=seed,
        changes=changes, checks=checks, state=state, exit_code=EXIT_CODES[state], not_compared=not_compared,
    )


def change_verdict(spec: MetricSpec, statistic: str, lo: float, hi: float) -> str:
    """`regressed` / `improved` when the change's interval [lo, hi] excludes 0 in the worse / better direction, else `unchanged`."""
    w_lo, w_hi = (lo, hi) if spec.higher_is_worse or statistic == "max_minus_min" else (-hi, -lo)
    return "regressed" if w_lo > 0 else "improved" if w_hi < 0 else "unchanged"


def regression_checks(rules: list[DecisionRule], head: Side, tables: dict[str, _Tables], paired: bool,
                      alpha: float) -> list[RegressionCheck]:
    """Each regression rule in each scope it quantifies over, decided by the one gate rule.

    The breaching end of each change's interval is Holm-adjusted across the scopes of an
    `each_family` rule (as the head's own rule checks are), and the gate reads the unrounded
    interval."""
    out: list[RegressionCheck] = []
    for rule in rules:
        if rule.kind == "regression":
            out += _rule_regressions(rule, head, tables, paired, alpha)
    return out


def _rule_regressions(rule: DecisionRule, head: Side, tables: dict[str, _Tables], paired: bool,
                      alpha: float) -> list[RegressionCheck]:
    statistic = "max_minus_min" if rule.statistic == "max_minus_min" else "worst_slice"
    scopes = ["overall"] if rule.scope == "overall" else [s for s in tables if s.startswith("family=")]
    i = next((j for j, s in enumerate(head.specs) if s.name == rule.metric), None)
    if i is None:  # not a metric both rubrics define identically
        return [RegressionCheck(rule=rule.id, scope=scope, metric=rule.metric, statistic=statistic, slice=None,
                                base=None, head=None, change=None, ci=None, threshold=rule.threshold,
                                comparator=rule.comparator, state="undefined",
                                reason=f"`{rule.metric}` is not defined identically by the base's and the head's "
                                       "rubrics, so its change is not measured") for scope in scopes]
    spec = head.specs[i]
    low = rule.comparator in (">", ">=")

    def at(scope: str, tail: float | None) -> tuple[float, float, float, float, float, int | None]:
        return _change(tables[scope], i, spec, statistic, paired, alpha, breach_low=low, tail=tail)

    return regression_checks_over(rule, statistic, scopes, at, head.slices, alpha)


ChangeAt = Callable[[str, float | None], tuple[float, float, float, float, float, int | None]]


def regression_checks_over(rule: DecisionRule, statistic: str, scopes: list[str], at: ChangeAt, slices: list[str],
                           alpha: float, what: str = "from base to head") -> list[RegressionCheck]:
    """One rule's regression check in each scope, Holm-adjusted across the scopes, decided by the one gate rule.

    `at(scope, tail)` is the scope's `side_change` with its breaching end at one-sided level `tail`
    (None: α/2); a scope whose change cannot be computed is `undefined`."""
    low = rule.comparator in (">", ">=")

    def beyond(scope: str) -> Callable[[float], bool]:
        def check(level: float) -> bool:
            *_, lo, hi, _w = at(scope, level)
            end = lo if low else hi
            return math.isfinite(end) and rule.fires(end)
        return check

    live = [s for s in scopes if math.isfinite(at(s, None)[2])]
    levels = dict(zip(live, holm_levels([level_p(beyond(s)) for s in live], alpha / 2), strict=True))
    out = []
    for scope in scopes:
        if scope not in levels:
            out.append(RegressionCheck(rule=rule.id, scope=scope, metric=rule.metric, statistic=statistic, slice=None,
                                       base=None, head=None, change=None, ci=None, threshold=rule.threshold,
                                       comparator=rule.comparator, state="undefined", reason="no change could be computed"))
            continue
        pb, ph, change, lo, hi, w = at(scope, levels[scope])
        interval = (lo, hi) if math.isfinite(lo) and math.isfinite(hi) else None
        state, _, why = check_state(rule, change, interval, gate_on="interval")  # the one gate rule
        out.append(RegressionCheck(
            rule=rule.id, scope=scope, metric=rule.metric, statistic=statistic,
            slice=slices[w] if w is not None and statistic == "worst_slice" else None,
            base=json_number(pb), head=json_number(ph), change=json_number(change),
            ci=[json_number(lo), json_number(hi)], threshold=rule.threshold, comparator=rule.comparator,
            state=state, reason=f"change {change:+.4g} {what}; {why}"))
    return out


def _describe(side: Side) -> dict[str, Any]:
    r = side.results
    return {"suite": r["suite"]["name"], "suite_hash": r["suite"]["hash"], "model_id": r["recordings"]["model_id"],
            "gate": r["gate"]["state"], "rows": len(side.row_ids)}


def diff_md(d: DiffResult, limit: int = 40) -> str:
    icon = {"pass": "✅", "fail": "❌", "inconclusive": "⚠️", "undefined": "❔"}[d.state]
    reg = [c for c in d.changes if c.verdict == "regressed"]
    imp = [c for c in d.changes if c.verdict == "improved"]
    lines = [
        "### Base vs head",
        "",
        f"{icon} **{d.state.upper()}** — {len(reg)} metric changes regressed and {len(imp)} improved with 95% confidence "
        f"({'paired by grid cell' if d.paired else 'unpaired: the grids differ'}; exact per-side intervals combined by MOVER).",
        "",
    ]
    if d.checks:
        lines += ["| rule | scope | change [95% CI] | threshold | state |", "|---|---|---|---|---|"]
        for check in d.checks:
            ci = f" [{check.ci[0]:+.3f}, {check.ci[1]:+.3f}]" if check.ci and None not in check.ci else ""
            change = "n/a" if check.change is None else f"{check.change:+.3f}"
            lines.append(f"| {check.rule} | {check.scope} | {change}{ci} | {check.threshold:g} | {check.state} |")
        lines.append("")
    shown = sorted(reg + imp, key=lambda c: -abs(c.change or 0))[:limit]
    if shown:
        lines += ["| metric | scope | statistic | base | head | change [95% CI] | verdict |", "|---|---|---|---|---|---|---|"]
        for c in shown:
            lo, hi = c.ci or (None, None)
            lines.append(f"| {c.metric} | {c.scope} | {c.statistic} | {c.base} | {c.head} | {c.change:+.3f} [{lo:+.3f}, {hi:+.3f}] | {c.verdict} |")
    else:
        lines.append("_No metric changed with 95% confidence._")
    if d.not_compared:
        lines += ["", "**Not compared** (the two rubrics differ): " + "; ".join(d.not_compared) + "."]
    return "\n".join(lines) + "\n"
