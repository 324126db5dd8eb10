"""Scorer plug-ins in a replayed audit: their recorded scores as rubric columns, and the agreement section.

`PluginScoring` is made once per audited recording set. It opens the recorded scores of
every scorer a rubric metric reads (`fairness.scorers._suite.SuiteScores`: verified, no
network, no model), scores each chunk of outputs with them (`score`), and keeps the two
flag columns of each `agreement:` pair with each row's prompt, slice and id (`collect`), so
the agreement section (`agreement_results`) and the transcripts' `disagreements` (`mark`)
come from the very values the audit read.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from fairness.audit._audit import AuditOptions
from fairness.audit._results import AgreementResult, Caveat, ConfusionCounts, FairnessRun, RuleSwap
from fairness.score._rubric import ScoreTable
from fairness.suite._runs import SeedRun
from fairness.suite._suite import Suite

if TYPE_CHECKING:
    from fairness.scorers._agreement import Agreement, Confusion
    from fairness.scorers._suite import SuiteScores


def score_command(suite_ref: str, recordings: Path, name: str) -> str:
    """The command that records scorer `name`'s scores for this suite and recording set."""
    return f"llm-fairness-check score --suite {suite_ref} --recordings {recordings} --scorer {name}"


def check_plugins(suite: Suite) -> None:
    """The rubric's `scorers:` settings and `agreement:` pairs, checked before any file is read."""
    rubric = suite.compiled_rubric
    if rubric.spec.scorers or rubric.spec.agreement:
        from fairness.scorers._config import parse_scorers
        from fairness.scorers._suite import agreement_pairs

        parse_scorers(rubric.spec.scorers, "rubric `scorers`")
        agreement_pairs(rubric)


class PluginScoring:
    """The rubric's plug-in columns and agreement rows for one recording set."""

    def __init__(self, suite: Suite, suite_ref: str, recordings: Path, mode: str) -> None:
        self.rubric, self.mode = suite.compiled_rubric, mode
        self.scores: SuiteScores | None = None
        self.pairs: list[tuple[str, str]] = []
        if self.rubric.spec.scorers or self.rubric.spec.agreement:  # the paper's rubric has neither: nothing to load
            from fairness.scorers._suite import SuiteScores, agreement_pairs

            self.scores = SuiteScores(self.rubric, recordings, lambda name: score_command(suite_ref, recordings, name))
            self.pairs = agreement_pairs(self.rubric)
        names = dict.fromkeys(m for pair in self.pairs for m in pair)
        self._columns: dict[str, list[np.ndarray]] = {m: [] for m in names}
        self._prompts: list[str] = []
        self._slices: list[str] = []

    def score(self, outputs: Sequence[str], row_ids: Sequence[str]) -> ScoreTable:
        """The rubric's columns for `outputs`, the plug-in ones from their recorded scores."""
        external = self.scores.external(outputs, row_ids) if self.scores else None
        return self.rubric.score(list(outputs), self.mode, external=external)  # type: ignore[arg-type]

    def collect(self, runs: Sequence[SeedRun], scores: ScoreTable) -> None:
        """Keep the agreement pairs' columns and each row's prompt and slice (rows of `runs`, in order)."""
        if not self.pairs:
            return
        for metric, parts in self._columns.items():
            parts.append(np.asarray(scores.columns[self.rubric.metrics[metric].column], dtype=np.float64))
        for run in runs:
            self._prompts += [run.prompt_id] * len(run.seeds)
            self._slices += [run.slice_id] * len(run.seeds)

    def mark(self, lines: list[str], scores: ScoreTable) -> list[str]:
        """Transcript lines with `"disagreements": ["a~b", …]` (the pairs whose flags differ on that row)."""
        if not self.pairs:
            return lines
        col = {m: np.asarray(scores.columns[self.rubric.metrics[m].column], dtype=np.float64) for m in self._columns}
        differ = [(f"{a}~{b}", col[a] != col[b]) for a, b in self.pairs]  # NaN != x is True; refused before here
        out = []
        for i, line in enumerate(lines):
            names = [name for name, d in differ if d[i]]
            out.append(line[:-2] + ', "disagreements": ' + json.dumps(names, ensure_ascii=False) + "}\n")
        return out

    def agreements(self, seed: int, n_resamples: int, confidence: float) -> list[Agreement]:
        """κ, interval and confusion counts of each pair over every collected row."""
        from fairness.scorers._agreement import agreement

        cols = {m: np.concatenate(parts) if parts else np.zeros(0) for m, parts in self._columns.items()}
        return [agreement(cols[a], cols[b], self._prompts, self._slices, names=(a, b), n_resamples=n_resamples,
                          confidence=confidence, seed=seed) for a, b in self.pairs]


def _counts(c: Confusion) -> ConfusionCounts:
    return ConfusionCounts(both=c.both, only_a=c.only_a, only_b=c.only_b, neither=c.neither, invalid=c.invalid)


def _num(x: float) -> float | None:
    return None if not np.isfinite(x) else round(float(x), 6)


def agreement_results(
    plugins: PluginScoring, run: FairnessRun, suite: Suite, options: AuditOptions,
    rerun: Callable[[AuditOptions], FairnessRun],
) -> list[AgreementResult]:
    """The agreement section: each pair's κ and confusions, and its rules re-checked on the other metric
    (`rerun` audits the same scores under other options: no rows are read again)."""
    out = []
    rules = list(options.rules if options.rules is not None else suite.rules)
    for ag in plugins.agreements(options.seed, options.bootstrap, 1 - options.alpha):
        swap = {ag.a: ag.b, ag.b: ag.a}
        mine = [r for r in rules if r.kind == "absolute" and r.metric in swap]
        checks, swapped_checks, swapped_state = [], {}, run.gate.head_state
        if mine:
            swapped_rules = tuple(r.model_copy(update={"metric": swap[r.metric]}) if r in mine else r for r in rules)
            other = rerun(options.model_copy(update={"rules": swapped_rules}))
            swapped_checks = {(c.rule, c.scope): c.state for c in other.rules}
            swapped_state = other.gate.head_state
            checks = [c for c in run.rules if c.rule in {r.id for r in mine}]
        swaps = [RuleSwap(rule=c.rule, scope=c.scope, metric=c.metric, applied_to=swap[c.metric], state=c.state,
                          swapped_state=swapped_checks.get((c.rule, c.scope))) for c in checks]
        order = [s for s in run.slices if s in ag.by_slice] + [s for s in ag.by_slice if s not in run.slices]
        out.append(AgreementResult(
            a=ag.a, b=ag.b, estimand=ag.estimand, kappa=_num(ag.kappa), interval=ag.interval.as_list(),
            method=ag.interval.method, confidence=float(ag.interval.confidence or 0.0),
            n_resamples=int(ag.interval.n_resamples or 0), n_clusters=int(ag.interval.n_clusters or 0),
            observed=_num(ag.observed), confusion=_counts(ag.confusion),
            by_slice={s: _counts(ag.by_slice[s]) for s in order}, disagreements=int(ag.disagreements.size),
            rules=swaps, head_state=run.gate.head_state, swapped_head_state=swapped_state,
            verdict_changes=swapped_state != run.gate.head_state or any(s.state != s.swapped_state for s in swaps),
        ))
    return out


def model_graded_caveats(plugins: PluginScoring) -> list[Caveat]:
    """One `model-graded` caveat per metric a judge or classifier scores: its values are a model's reading."""
    out = []
    scores = plugins.scores
    if scores is None:
        return []
    for metric, name in scores.metrics.items():
        config, version = scores.configs[name], scores.versions()[name]
        what = {"judge": "an LLM judge", "hf-classifier": "a classifier"}.get(config.kind, f"the plug-in `{config.kind}`")
        model = getattr(config, "model", None)
        out.append(Caveat(code="model-graded", metric=metric, message=(
            f"scored by {what}{f' (`{model}`)' if model else ''}, scorer `{name}` version `{version}`, from recorded "
            "scores: a model's reading of each output, with its own errors and biases, not ground truth")))
    return out


def with_plugins(run: FairnessRun, plugins: PluginScoring, suite: Suite, options: AuditOptions,
                 rerun: Callable[[AuditOptions], FairnessRun]) -> FairnessRun:
    """`run` with the scorer plug-ins' recorded versions and the agreement section, where the rubric has them."""
    update: dict = {}
    if plugins.scores and run.rubric is not None:
        update["rubric"] = run.rubric.model_copy(update={"scorer_versions": plugins.scores.versions()})
        update["caveats"] = [*run.caveats, *model_graded_caveats(plugins)]
    if plugins.pairs:
        update["agreement"] = agreement_results(plugins, run, suite, options, rerun)
    return run.model_copy(update=update) if update else run
