"""The monitor's results schema: what one `monitor` run measured, as written to monitor.json.

Published by `llm-fairness-check schema monitor` (docs/schema/monitor.schema.json, checked for
drift). Semver as results.json's. Nothing here holds log text except `examples`, which is
written only when `--examples N` asks for it. Nothing depends on the engine or the machine, so
every engine writes the same bytes.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from fairness._util.models import Strict
from fairness.audit._diff import Change
from fairness.audit._gate import Gate
from fairness.audit._results import Caveat, Estimate, RegressionCheck, RuleCheck, ScorerInfo, SuiteInfo, ToolInfo
from fairness.monitor._mapping import Mapping
from fairness.monitor._stats import ESTIMAND

MONITOR_SCHEMA_VERSION = "1.0.0"


class SourceInfo(Strict):
    """The logs read and how they were sampled."""

    format: Literal["jsonl", "parquet", "csv"]
    """The files' format."""
    files: int
    """Log files read."""
    mapping: Mapping
    """The mapping in force (field names only)."""
    rows_read: int
    """Records in the files."""
    sample: int
    """The sampling rate 1/`sample`: a record is kept iff the first 15 hex digits of md5(its id) are ≡ 0 mod `sample`."""
    rows_sampled: int
    """Records the sample kept: every statistic is about these."""
    window: str
    """How records are windowed: `day` (UTC), `week` (ISO) or `N rows` (consecutive sampled records by time, then id)."""


class WindowMetric(Strict):
    """One metric in one window: every slice's value and interval, the worst slice, the gap and the pooled value."""

    metric: str
    """The metric's name in the catalogue."""
    by_slice: dict[str, Estimate]
    """Per slice (in `slices` order; slices without records left out): value, 95% interval, records (`n`),
    units (`cells`, with a unit field) and design effect."""
    pooled: Estimate
    """All slices together."""
    worst_slice: Estimate
    """The worst slice's value with the simultaneous interval over slices."""
    max_minus_min: Estimate
    """The gap between the highest and lowest slice value, with its simultaneous interval."""


class WindowResult(Strict):
    """One window: its records, whether it is large enough to judge, and every metric."""

    window: str
    """The window's label (`YYYY-MM-DD`, `YYYY-Www` or `r000000`)."""
    n: int
    """Sampled records in the window."""
    units: int | None
    """Distinct units in the window; null without a unit field."""
    underpowered: list[str]
    """Slices with fewer records (or units) than `min_group_size`: the window's checks are undefined."""
    metrics: list[WindowMetric]
    """Every metric of the catalogue, in catalogue order."""


class Reference(Strict):
    """What each window's change is measured against."""

    kind: Literal["previous", "window", "results"]
    """`previous`: the window before; `window`: one chosen window; `results`: a grid audit's results.json (its
    `overall` scope)."""
    window: str | None = None
    """The chosen window (`window`)."""
    suite: str | None = None
    """The grid audit's suite name (`results`)."""
    model_id: str | None = None
    """The grid audit's model (`results`)."""


class Example(Strict):
    """One sampled record's text (only with `--examples N`)."""

    window: str
    slice: str
    text: str


class MonitorRun(Strict):
    """Everything one monitor run measured. Field order is part of the format."""

    schema_version: str = MONITOR_SCHEMA_VERSION
    """Semver of this format."""
    gate: Gate
    """The verdict and exit code: the windows' rule checks and the regression checks against the reference."""
    tool: ToolInfo
    """The program and version that wrote this file."""
    suite: SuiteInfo
    """The suite whose rules, scorer mode and `min_group_size` were applied."""
    scorer: ScorerInfo
    """The scorer used."""
    source: SourceInfo
    """The logs, the mapping and the sample."""
    alpha: float
    """Intervals are 1 − alpha."""
    min_group_size: int
    """Records (and units, with a unit field) per slice below which a window's checks are undefined."""
    slices: list[str]
    """Every slice seen, sorted."""
    windows: list[WindowResult]
    """Per window, in time order."""
    reference: Reference
    """What the changes are measured against."""
    changes: list[Change]
    """Per window (`scope`) against its reference: each metric's per-slice (`statistic` `slice`), worst-slice and
    gap change with a MOVER interval simultaneous at 95% per metric and statistic (Bonferroni over windows and
    slices); `regressed`/`improved` when it excludes 0 (the drift flags), `undefined` when either side is underpowered."""
    rules: list[RuleCheck]
    """Every absolute decision rule: `each_family` rules in each window (scope `window=W`, Holm across windows),
    `overall` rules on all windows pooled."""
    regressions: list[RegressionCheck]
    """Every regression rule in each window against its reference (Holm across windows)."""
    drift: list[str]
    """Windows with at least one `regressed` change of a harm metric (the drift flags), in time order."""
    caveats: list[Caveat]
    """What a reader must know before trusting the numbers."""
    estimand: str = ESTIMAND
    """What the intervals and the gate are about."""
    methods: dict[str, str] = Field(default_factory=dict)
    """How each statistic was computed, in words."""
    examples: list[Example] | None = None
    """Sampled records' texts: null unless `--examples N` was given (no log text is written by default)."""
