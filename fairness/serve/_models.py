"""The service's own response bodies (results.json keeps its own schema, `fairness.audit._results`)."""

from __future__ import annotations

from typing import Literal

from pydantic import ConfigDict

from fairness._util.models import Frozen
from fairness.audit._gate import State

Kind = Literal["recordings"]
"""What an upload holds. Only `recordings` (a recording set) for now; `monitor` (a monitor batch) is reserved."""
Status = Literal["queued", "running", "done", "failed"]


class Documented(Frozen):
    """A response model whose field docstrings are its OpenAPI descriptions."""

    model_config = ConfigDict(frozen=True, extra="forbid", use_attribute_docstrings=True)


class Links(Documented):
    """Where to read an audit."""

    audit: str
    """`GET`: 202 and this status while queued or running, then 200 and results.json (422 and this status if it failed)."""
    status: str
    """`GET`: this status at any time."""
    files: dict[str, str]
    """Each output file by name (`card.html`, `card.md`, `card.yaml`, `summary.md`, `junit.xml`, `results.json`),
    ready once the audit is done."""


class AuditStatus(Documented):
    """One audit job: where it stands and, once done, its verdict."""

    id: str
    """The audit's id (random, 32 hex digits)."""
    kind: Kind
    """What was uploaded."""
    status: Status
    """`queued` (waiting for a worker), `running`, `done` (results ready) or `failed` (see `error`)."""
    submitted_at: str
    """When the upload was accepted (UTC, ISO 8601)."""
    started_at: str | None = None
    """When a worker started the audit."""
    finished_at: str | None = None
    """When the audit finished or failed."""
    error: str | None = None
    """Why the audit failed: one line naming what to fix in the upload (failed only)."""
    gate_state: State | None = None
    """The verdict (`gate.state` of results.json) once done."""
    passed: bool | None = None
    """Whether the gate passed under the `fail_on` policy (`gate.passed`) once done."""
    links: Links
    """Where to read it."""


class ErrorBody(Documented):
    """Every refusal (4xx) that is not an audit's own status: one line naming what to fix."""

    error: str
    """What was wrong, in one line."""


class Health(Documented):
    """The service is up; how busy it is."""

    status: Literal["ok"]
    """Always `ok` when the service answers."""
    version: str
    """llm-fairness-check's version."""
    queued: int
    """Audits waiting for a worker."""
    running: int
    """Audits running now."""
    queue_size: int
    """Most audits that may wait; one more upload is 429."""
    auth: bool
    """Whether requests other than this one need the bearer token."""
