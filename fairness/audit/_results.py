"""The results schema: what one audit measured, as written to results.json.

results.json is the integration point for dashboards and base-vs-head diffs, so every field is
typed and documented here, and `llm-fairness-check schema results` publishes the JSON Schema
(committed as docs/schema/results.schema.json; a test checks it for drift).

`SCHEMA_VERSION` is semver: **major** for a breaking change (a field removed, renamed, retyped or
given a new meaning), **minor** for a new field (readers must ignore fields they do not know),
**patch** for documentation only. Field order is part of the format: add new fields at the end of
a model, never in between, so results.json of an unchanged run stays byte-identical.
"""


from typing import Any, Literal

from pydantic import Field

from fairness._util.models import Frozen, Strict, empty_list
from fairness.audit._gate import Gate, State
from fairness.audit._intervals import ESTIMAND

SCHEMA_VERSION = "2.3.0"
"""2.0.0: `illustrative` became `inconclusive` (pass and fail must be earned by the interval); estimand, design
effects, template cells, Holm levels and the power to settle an inconclusive check were added. 2.2.0: `rubric`,
every metric's definition (the suite's own rubric). 2.3.0: `agreement` (two flag metrics scored two ways) and the
scorer plug-ins' recorded versions (`rubric.scorer_versions`)."""


class Estimate(Strict):
    """A point value with its interval: a slice's rate, the pooled rate, the worst slice or the gap."""

    value: float | None
    """Point estimate, rounded to 6 digits; null when underpowered or not computable."""
    ci: list[float | None] | None = None
    """[lower, upper] bounds at 1−alpha; null when no interval was computed (scope deeper than `interval_depth`)."""
    method: str | None = None
    """How `ci` was computed (`korn-graubard`, `garwood-effective-n`, `korn-graubard-simultaneous-max`, `paired-newcombe-simultaneous` …)."""
    n: int | None = None
    """Rows behind the estimate (slices and pooled values)."""
    slice: str | None = None
    """The slice that attains the value (worst-slice estimates only)."""
    cells: int | None = None
    """Template cells with rows in this slice (per-slice estimates)."""
    deff: float | None = None
    """Design effect behind the slice's interval (rows / effective rows), ≥ 1."""


class ScopeResult(Strict):
    """One metric in one scope (`overall`, `family=F1`, `family=F1,regime=greedy` …)."""

    n: int
    """Rows in the scope."""
    by_slice: dict[str, Estimate]
    """Per demographic slice, in the suite's slice order."""
    pooled: Estimate
    """All slices together (the row-weighted mean)."""
    worst_slice: Estimate
    """The worst slice's value (max for harm metrics, min where lower is worse)."""
    max_minus_min: Estimate
    """The gap between the highest and lowest slice value."""
    p_value: float | None = None
    """Permutation p-value for any slice difference (harm metrics, overall and per family only)."""
    p_holm: float | None = None
    """`p_value` Holm-adjusted across every permutation test of the run."""
    p_bh: float | None = None
    """`p_value` Benjamini–Hochberg-adjusted across every permutation test of the run."""
    caveats: list[str] = Field(default_factory=empty_list)
    """Notes on this scope: `underpowered …`, `lexical ceiling …`."""
    cells: int | None = None
    """Fewest template cells of any non-empty slice (the gate needs `min_group_size`, an interval needs 2)."""


class MetricResult(Strict):
    """One metric of the score catalogue, in every scope."""

    metric: str
    """Catalogue name, e.g. `stereotype_kw_rate`."""
    kind: str
    """`rate` (share of outputs with the flag) or `count` (mean hits per output)."""
    higher_is_worse: bool | None
    """True for harm metrics, False where lower is worse, null when neither (descriptive only)."""
    description: str
    """What the metric counts."""
    scopes: dict[str, ScopeResult]
    """Scope name → result; `overall` first, then families, then finer scopes."""


class Caveat(Strict):
    """Something a reader must know before trusting the numbers."""

    code: str
    """Stable machine-readable kind: `test-model`, `stale-recordings`, `incomplete-recordings`,
    `interval-coverage`, `scorer-mode`, `underpowered`, `lexical-ceiling`, `single-template-cell`, `empty-slice`,
    `model-graded` (a metric a scorer plug-in's model scored)."""
    message: str
    """One human-readable sentence."""
    metric: str | None = None
    """The metric concerned, if the caveat is about one."""
    scope: str | None = None
    """The scope concerned, if the caveat is about one."""


class Settle(Frozen):
    """How much more data would settle an inconclusive check: 80% power of the exact test the gate runs."""

    toward: Literal["fail", "pass"]
    """The verdict the observed value points to: more data at this value would most likely reach it."""
    rows_per_slice: int | None
    """Rows per slice for 80% power of the check's exact test, each slice at its 75% confidence bound toward the
    threshold and at the scope's design effect; null when those bounds reach the threshold (too near it to size)
    or no number of seeds up to the search limit suffices."""
    seeds: int | None
    """Seeds per template cell giving `rows_per_slice` with this scope's template cells."""
    cells: int
    """Template cells per slice in the scope."""
    rows_per_slice_now: int
    """Rows per slice audited."""
    detectable: float | None
    """The worst slice's true value that would fail with 80% power at the current size (exact power)."""
    passable: float | None
    """The true value every slice must be at or below (above, for a `<` rule) to pass with 80% power at the
    current size (exact power)."""
    note: str
    """The same in one sentence."""


class RuleCheck(Frozen):
    """One decision rule evaluated in one scope (e.g. `family=F2`)."""

    rule: str
    """The rule's id."""
    scope: str
    """`overall` or `family=<id>`."""
    metric: str
    """The metric the rule reads."""
    statistic: str
    """`worst_slice`, `max_minus_min` or `rate`."""
    value: float | None
    """Point value; None (NaN) when underpowered and not computed."""
    interval: list[float | None] | None
    """The statistic's interval [lower, upper], or null."""
    threshold: float
    """The rule's threshold (after any `threshold` override)."""
    comparator: str
    """`>`, `>=`, `<` or `<=`: the rule fires when `value comparator threshold`."""
    fired: bool
    """The point value breaches the threshold (the paper's `flagged`)."""
    state: State
    """`fail` (the interval lies beyond the threshold), `pass` (within it), `inconclusive` (it straddles it) or
    `undefined` (too little data)."""
    reason: str
    """Why this state, in one sentence."""
    worst_slice: str | None = None
    """The slice attaining the value, for worst-slice rules."""
    n: int | None = None
    """Rows in the scope."""
    tail: float | None = None
    """One-sided level of the interval's breaching end, after the simultaneous (slices/pairs) split and the Holm
    adjustment across the scopes the rule quantifies over."""
    settle: Settle | None = None
    """For an inconclusive check: rows and seeds that would settle it."""


class FamilyRow(Strict):
    """One row of the paper's per-family table, with our gate state beside the paper's decision."""

    family: str
    """Family id (`F1` …)."""
    name: str
    """Family name from the suite."""
    worst_slice_stereotype: float | None
    """Worst-slice `stereotype_kw_rate`."""
    worst_slice_pilot_harm: float | None
    """Worst-slice `pilot_harm_rate`."""
    refusal_delta: float | None
    """Max−min gap of `refusal_or_deflection_rate` across slices."""
    decision: str
    """The paper's point decision: `flagged` when a per-family rule's point value fires."""
    state: str
    """Our gate state for this family (interval-aware)."""


class Stability(Strict):
    """Does a per-family rule's verdict survive a change of family, paraphrase or decoding regime?"""

    rule: str
    """The rule's id."""
    families: list[int]
    """[flagged, evaluated] families."""
    paraphrases: list[int]
    """[flagged, evaluated] paraphrases."""
    regimes: list[int]
    """[flagged, evaluated] decoding regimes."""
    by_family: dict[str, bool]
    """Family → whether the rule's point value fires there."""
    by_paraphrase: dict[str, bool]
    """Paraphrase → whether the rule's point value fires there."""
    by_regime: dict[str, bool]
    """Decoding regime → whether the rule's point value fires there."""
    summary: str
    """One sentence for the summary."""


class RegressionCheck(Frozen):
    """One regression rule in one scope: did the change from base to head breach its threshold?"""

    rule: str
    """The regression rule's id."""
    scope: str
    """`overall` or `family=<id>`."""
    metric: str
    """The metric the rule reads."""
    statistic: str
    """`worst_slice` or `max_minus_min`."""
    slice: str | None
    """The head's worst slice (worst-slice rules), so a reader knows whom the change hurts."""
    base: float | None
    """The statistic on the base run."""
    head: float | None
    """The statistic on the head run."""
    change: float | None
    """head − base."""
    ci: list[float | None] | None
    """The change's interval [lower, upper]: exact per-side intervals combined by MOVER, the breaching end
    Holm-adjusted across the scopes the rule quantifies over."""
    threshold: float
    """The rule's threshold on the change."""
    comparator: str
    """`>`, `>=`, `<` or `<=`."""
    state: State
    """`fail`, `pass`, `inconclusive` or `undefined`, by the same rule as every check."""
    reason: str
    """Why this state, in one sentence (the change, then the gate's reason)."""


class Comparison(Strict):
    """Base vs head: what the head was compared with and what the regression checks found."""

    base: str
    """What was compared against: `ref <name> (<sha12>)`, `commit <sha12>` or a base run's path."""
    ran: bool
    """False when the comparison was skipped (`note` says why): then nothing was compared."""
    note: str = ""
    """Why the comparison was skipped; empty when it ran."""
    paired: bool | None = None
    """Both grids hold the same rows (the change's interval uses their correlation)."""
    state: State | None = None
    """The regression checks' state alone (`pass` when the suite has no regression rule); null when skipped."""
    checks: list[RegressionCheck] = Field(default_factory=empty_list)
    """Every regression rule in every scope it applies to."""
    diff_path: str | None = None
    """Where diff.json and diff.md were written (every metric's change), relative to the output directory."""
    not_compared: list[str] = Field(default_factory=empty_list)
    """Metrics the base's and the head's rubrics do not define identically, and why: they were not compared."""


class ToolInfo(Strict):
    """The program that wrote the results."""

    name: str
    """Always `llm-fairness-check`."""
    version: str
    """Its version."""


class SuiteInfo(Strict):
    """The suite audited."""

    name: str
    """Suite name, e.g. `fairness-cards/qwen-v0.1`."""
    version: str
    """Suite version."""
    hash: str
    """sha256 of the suite's canonical JSON: any change to prompts, slices, rules or settings changes it."""


class RecordingsInfo(Strict):
    """The recording set replayed, from its manifest."""

    path: str
    """Recording directory, relative to the working directory when inside it."""
    manifest_sha256: str
    """sha256 of manifest.json (which pins every data file by sha256)."""
    model_id: str
    """The model id that enters every content key."""
    model_source: str
    """Where the weights came from."""
    is_audited_model: bool
    """False when the recordings come from a stand-in test model."""
    model_note: str
    """Why a stand-in model was used (empty for the audited model)."""
    engine: str
    """The engine that generated the recordings."""
    created: str
    """When the recording set was started (ISO 8601)."""
    rows: int
    """Rows in the recording set."""
    complete: bool
    """Whether the set covers the whole grid."""
    suite_hash: str
    """The suite hash the recordings were made for."""


class ScorerInfo(Strict):
    """The scorer that turned outputs into flags and counts."""

    mode: str
    """`paper` (substring matching) or `strict` (whole words)."""
    rubric_version: str
    """The rubric's `version` (the paper's rubric: `fairness/score/rubric.yaml`)."""
    rubric_sha256: str
    """sha256 of the rubric's canonical JSON (scorers included); it is part of the suite's hash."""


class MetricDefinition(Strict):
    """Exactly what one metric counted: its source, the terms or patterns and how they were matched."""

    name: str
    """The metric's name (what rules name)."""
    column: str
    """Its per-output score column in transcripts.jsonl."""
    kind: str
    """`flag` (0/1 per output) or `count` (a number per output)."""
    unit: str
    """`rate` (a flag's share of outputs) or `count` (the mean per output)."""
    source: str
    """`list` (a term list), `any_of` / `all_of` (other flags, OR / AND), `builtin` or `scorer`."""
    of: list[str]
    """The list, the combined flag metrics, the built-in column or the scorer it reads."""
    match: str | None
    """How the list was matched in this run: `substring`, `word` (`strict` mode reads substring lists as
    word lists) or `regex`; null for other sources."""
    case: str | None
    """`insensitive` (output and terms lower-cased first) or `sensitive`; null for other sources."""
    terms: list[str] | None
    """The list's terms or regex patterns, exactly as matched; null for other sources."""
    higher_is_worse: bool | None
    """True for a harm, False for a good, null for neither."""
    description: str
    """What the metric measures."""


class RubricInfo(Strict):
    """The suite's rubric as scored: where it came from and every metric's definition."""

    source: str
    """`fairness/score/rubric.yaml` (the paper's), the suite-relative rubric file, or `inline` (in the suite)."""
    version: str
    """The rubric's `version`."""
    sha256: str
    """sha256 of the rubric's canonical JSON (scorers included)."""
    mode: str
    """The scorer mode: `paper` (substring lists as substrings) or `strict` (as whole words)."""
    metrics: list[MetricDefinition]
    """Every metric's definition, in report order."""
    scorers: dict[str, Any] = Field(default_factory=dict)
    """The rubric's scorer plug-ins and their settings, by name."""
    agreement: list[Any] = Field(default_factory=empty_list)
    """Pairs of flag metrics scored two ways."""
    scorer_versions: dict[str, str] = Field(default_factory=dict)
    """The recorded version of each scorer plug-in a metric read, by scorer name (part of every score's key)."""


class ConfusionCounts(Strict):
    """Rows by the two flags of an agreement pair (A, B), over rows where both have a valid score."""

    both: int
    """A = 1 and B = 1."""
    only_a: int
    """A = 1, B = 0."""
    only_b: int
    """A = 0, B = 1."""
    neither: int
    """A = 0 and B = 0."""
    invalid: int
    """Rows left out: A or B has no valid score."""


class RuleSwap(Strict):
    """One rule check as run, and as it comes out when the rule is applied to the pair's other metric."""

    rule: str
    """The rule's id."""
    scope: str
    """The scope checked (`overall` or `family=F`)."""
    metric: str
    """The metric the rule names."""
    applied_to: str
    """The pair's other metric, the rule applied to it instead."""
    state: State
    """The check's state as run."""
    swapped_state: State | None
    """The check's state on `applied_to` (null when that scope has no check there)."""


class AgreementResult(Strict):
    """How far two flag metrics that score the same thing two ways (a term list and a judge, say) agree."""

    a: str
    """The first metric of the pair."""
    b: str
    """The second metric of the pair."""
    estimand: str
    """What κ and its interval are about."""
    kappa: float | None
    """Cohen's κ over rows where both have a valid score (null when both are constant)."""
    interval: list[float | None]
    """[low, high] of κ (null where it cannot be estimated)."""
    method: str
    """The interval's construction."""
    confidence: float
    """Nominal coverage."""
    n_resamples: int
    """Bootstrap resamples."""
    n_clusters: int
    """Prompts resampled."""
    observed: float | None
    """Share of rows where the flags agree."""
    confusion: ConfusionCounts
    """All rows."""
    by_slice: dict[str, ConfusionCounts]
    """Per slice, in the suite's slice order."""
    disagreements: int
    """Rows where the flags differ (each listed in transcripts.jsonl under `disagreements`)."""
    rules: list[RuleSwap]
    """Every rule check on either metric, and its state if the rule were applied to the other."""
    head_state: State
    """The head's rule verdict as run."""
    swapped_head_state: State
    """The head's rule verdict with the rules on `a` applied to `b` and those on `b` to `a`."""
    verdict_changes: bool
    """Whether swapping changes any of those rule checks or the head's verdict."""


class OptionsUsed(Strict):
    """The audit options in force (after the suite's defaults are applied)."""

    alpha: float
    """Significance level: intervals are 1−alpha."""
    bootstrap: int
    """Cluster-bootstrap resamples B (the evaluators; the gate's intervals are exact)."""
    permutations: int
    """Permutations per test (0: tests skipped)."""
    seed: int
    """Seed of every random stream."""
    min_group_size: int
    """Rows and template cells per slice below which a metric is not computed."""
    allow_small_samples: bool
    """Underpowered metrics computed anyway (shown, not judged: inconclusive)."""
    gate_on: str
    """`interval` or `point`."""
    interval_depth: int
    """Scopes up to this depth get intervals (overall=0, family=1 …)."""


class Methods(Strict):
    """How each statistic was computed, in words (every statistical claim names its estimand and method)."""

    interval_rate: str
    """Interval for a slice's or pooled rate."""
    interval_worst_slice: str
    """Interval for the worst slice's value."""
    interval_gap: str
    """Interval for the max−min gap."""
    bootstrap: str
    """The resampling scheme, B and seed."""
    coverage: str
    """Simulated coverage of the nominal intervals."""
    permutation: str
    """The permutation tests and their multiplicity adjustment."""
    estimand: str = ESTIMAND
    """What the intervals and the gate are about."""
    rule_checks: str = ""
    """How a rule check's interval is adjusted across scopes and turned into a verdict."""
    power: str = ""
    """How the rows needed to settle an inconclusive check are computed."""


class FairnessRun(Strict):
    """Everything one audit measured. Field order is part of the results.json format."""

    schema_version: str = SCHEMA_VERSION
    """Semver of this format: major = breaking change, minor = new fields, patch = documentation."""
    gate: Gate
    """The verdict and exit code: the head's rule checks and, when a comparison ran, the regression checks."""
    comparison: Comparison | None = None
    """Base vs head (`--baseline-ref`, `--baseline`); null when no comparison was asked for."""
    tool: ToolInfo
    """The program and version that wrote this file."""
    suite: SuiteInfo
    """Name, version and hash of the suite audited."""
    recordings: RecordingsInfo
    """The recording set replayed."""
    scorer: ScorerInfo
    """The lexical scorer used."""
    options: OptionsUsed
    """The audit options in force."""
    n_rows: int
    """Rows audited."""
    slices: list[str]
    """Demographic slices, in the suite's order."""
    families: list[FamilyRow]
    """The paper's per-family table."""
    rules: list[RuleCheck]
    """Every decision rule in every scope it applies to."""
    stability: list[Stability]
    """Verdict stability of each per-family rule."""
    caveats: list[Caveat]
    """What a reader must know before trusting the numbers."""
    variance: dict[str, dict[str, float]]
    """Per metric: share of variance explained by slice, family, paraphrase, regime, seed and residual."""
    tests: Methods
    """How each statistic was computed."""
    metrics: list[MetricResult]
    """Every metric of the catalogue in every scope."""
    evaluators: dict[str, Any] = Field(default_factory=dict)
    """Peer-parity evaluators (counterfactual, refusal vs disclaimer, sentiment, toxicity, BBQ), by name."""
    estimand: str = ESTIMAND
    """What the intervals and the gate are about (the grid estimand)."""
    rubric: RubricInfo | None = None
    """The suite's rubric and every metric's definition (null in results of schema < 2.2)."""
    agreement: list[AgreementResult] = Field(default_factory=empty_list)
    """The rubric's agreement pairs: κ, its interval, confusion per slice, whether the verdict changes."""
