"""`RunOptions`: everything the main job needs, typed and validated once in the library.

The CLI (`run`) and the Action both build one and call `run_audit`; neither re-parses the
other's arguments.
"""


from pathlib import Path
from typing import Any

from pydantic import Field, ValidationError, field_validator, model_validator

from fairness._util.errors import FairnessError, validation_message
from fairness._util.models import Frozen
from fairness.audit._options import AuditOptions
from fairness.evaluators._adapter import EVALUATORS

DEFAULT_SUITE = "fairness-cards/qwen-v0.1"


class RunOptions(Frozen):
    """One main job: which suite and recordings, where to write, which extras, how to audit."""

    recordings: Path
    """Recording directory (manifest.json + records)."""
    out: Path
    """Output directory for results.json, transcripts.jsonl, summary.md, card.yaml and card.md."""
    suite: str = DEFAULT_SUITE
    """Built-in suite name or a suite YAML path."""
    evaluators: tuple[str, ...] = ()
    """Peer-parity evaluators to run (a subset of `EVALUATORS`); empty keeps the gate fast."""
    bbq_recordings: Path | None = None
    """Recorded BBQ answers to score as well."""
    bbq_items: Path | None = None
    """BBQ items JSONL the recordings answer (None: the shipped sample)."""
    allow_incomplete: bool = False
    """Audit the recorded rows of a set whose manifest declares it incomplete (a pass becomes inconclusive)."""
    junit: Path | None = None
    """Also write a JUnit XML report (one testcase per rule check) to this file."""
    audit: AuditOptions = Field(default_factory=AuditOptions)
    """Statistical and gate options."""
    baseline_ref: str | None = None
    """A git revision to compare with: its suite file and recordings are read from the repository's history,
    audited the same way into `<out>/base` and diffed into `<out>/diff`; its regression checks join the verdict."""
    baseline: Path | None = None
    """A base run to compare with instead (an output directory of `run`, or its results.json)."""
    workspace: Path | None = None
    """The git work tree to read `baseline_ref` from (default: the one holding `recordings`)."""
    shown_root: Path | None = None
    """The outputs name the input paths relative to this folder (default: the working directory); the REST
    service names them as its upload's archive does."""

    def __init__(self, **data: Any) -> None:
        try:
            super().__init__(**data)
        except ValidationError as err:
            raise FairnessError(validation_message(err)) from None

    @model_validator(mode="after")
    def _one_baseline(self) -> "RunOptions":
        if self.baseline_ref is not None and self.baseline is not None:
            raise ValueError("`baseline` and `baseline_ref` exclude each other: compare with a base run or a git revision")
        if self.workspace is not None and self.baseline_ref is None:
            raise ValueError("`workspace` (--workspace) is where `baseline_ref` (--baseline-ref) is read from; give it too")
        return self

    @field_validator("evaluators", mode="before")
    @classmethod
    def _known_evaluators(cls, value: Any) -> Any:
        names = (value,) if isinstance(value, str) else tuple(value)
        for name in names:
            if name not in EVALUATORS:
                raise ValueError(f"`evaluators`: unknown evaluator `{name}` (choose from {', '.join(EVALUATORS)} or none)")
        return names


def parse_evaluators(text: str) -> tuple[str, ...]:
    """`counterfactual,refusal`, `all` or `none` → evaluator names (validated by `RunOptions`)."""
    names = tuple(x.strip() for x in text.split(",") if x.strip() and x.strip() != "none")
    return EVALUATORS if names == ("all",) else names
