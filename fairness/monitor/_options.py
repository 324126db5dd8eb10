"""`MonitorOptions`: everything one `monitor` run is asked to do, checked before any log is read."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator, model_validator

from fairness._util.models import Strict
from fairness.audit._gate import DEFAULT_FAIL_ON, FailOn, GateOn
from fairness.monitor._engine import WindowSpec

DEFAULT_SUITE = "fairness-cards/qwen-v0.1"


class MonitorOptions(Strict):
    """The typed options behind `llm-fairness-check monitor` (the CLI only builds this)."""

    logs: list[str] = Field(min_length=1)
    """Log files, globs or directories (JSONL plain or gzip, Parquet or CSV; one format per run)."""
    mapping: str
    """The mapping YAML file (see `llm-fairness-check schema mapping`)."""
    out: str
    """Output directory: monitor.json, summary.md and junit.xml."""
    suite: str = DEFAULT_SUITE
    """Built-in suite name or suite YAML path: its rules, scorer mode and `min_group_size`."""
    sample: int = Field(default=1, ge=1, le=1_000_000_000)
    """Keep 1 record in `sample` (by the md5 of its id): deterministic on every machine."""
    window: str = "day"
    """`day` (UTC), `week` (ISO) or a number N: consecutive runs of N sampled records ordered by time, then id."""
    reference: str = "previous"
    """What each window is compared with: `previous`, `window:LABEL`, or a grid audit's results.json (or its run directory)."""
    engine: Literal["duckdb", "spark"] = "duckdb"
    """`duckdb` (embedded, the default) or `spark` (PySpark, for logs at scale); both give the same monitor.json."""
    spark_master: str | None = Field(default=None, min_length=1)
    """The Spark master URL for `engine: spark` (default `local[2]`: two cores of this machine); only with spark."""
    examples: int = Field(default=0, ge=0, le=100)
    """Write this many sampled records' texts into monitor.json (default 0: no log text is written anywhere)."""
    fail_on: FailOn = DEFAULT_FAIL_ON
    """Which states fail the process (as `run`)."""
    gate_on: GateOn = "interval"
    """`interval` (a verdict must be earned by the interval) or `point` (as `run`)."""
    alpha: float = Field(default=0.05, gt=0, lt=0.5)
    """Intervals are 1 − alpha."""

    @field_validator("window")
    @classmethod
    def _window(cls, v: str) -> str:
        window_spec(v)
        return v

    @model_validator(mode="after")
    def _spark_master_needs_spark(self) -> MonitorOptions:
        if self.spark_master is not None and self.engine != "spark":
            raise ValueError("--spark-master is for --engine spark")
        return self

    def window_spec(self) -> WindowSpec:
        return window_spec(self.window)


def window_spec(value: str) -> WindowSpec:
    """`day`, `week` or a positive number of records per window."""
    if value in ("day", "week"):
        return WindowSpec(value)  # type: ignore[arg-type]
    if value.isdigit() and 0 < int(value) <= 1_000_000_000:
        return WindowSpec("rows", int(value))
    raise ValueError(f"--window must be day, week or a positive number of records, got `{value}`")
