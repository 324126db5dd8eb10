"""The body of a regeneration pull request: the verdict first, then the change in outputs.

A reviewer decides from the first screen, so the body opens with the audit's verdict line
on the new recordings and, right under it, the base-vs-head diff against the recordings
the pull request replaces; provenance (pinned revision, weights checksums, serving engine)
follows for the record.
"""

from __future__ import annotations

import json
from pathlib import Path

from fairness._util.errors import FairnessError
from fairness.audit._audit import FairnessRun
from fairness.recordings._store import Manifest
from fairness.report._render import verdict_line

BODY_LIMIT = 65536
"""GitHub rejects a pull-request body longer than this many characters."""
NO_BASE = "No committed recordings to compare with: this pull request adds the first set."


def load_run(path: str | Path) -> FairnessRun:
    """A `run` output directory (or its results.json) as a FairnessRun."""
    p = Path(path)
    rp = p / "results.json" if p.is_dir() else p
    try:
        return FairnessRun.model_validate(json.loads(rp.read_text(encoding="utf-8")))
    except FileNotFoundError:
        raise FairnessError(f"no results at `{rp}` (pass a `run` output directory or its results.json)") from None
    except (OSError, ValueError) as exc:
        raise FairnessError(f"`{rp}` is not a results.json written by `llm-fairness-check run`: {exc}") from None


def provenance_md(manifest: Manifest) -> str:
    """What was regenerated, pinned: model, revision, weights sha256, engine and server."""
    m, b = manifest.model, manifest.backend
    lines = [
        "## Provenance",
        "",
        f"- suite `{manifest.suite}` {manifest.suite_version}, {manifest.rows}/{manifest.expected_rows} rows"
        f" ({'complete' if manifest.complete else 'incomplete'}), generated {manifest.created} – {manifest.updated}",
        f"- model `{m.id}` from {m.source}" + (f" at revision `{m.revision}`" if m.revision else ""),
    ]
    for name, sha in sorted((m.weights or {}).items()):
        lines.append(f"- weights `{name}` sha256 `{sha}`")
    versions = "".join(f", {k} {v}" for k, v in sorted(b.versions.items()))
    lines.append(f"- engine `{b.engine}` on {b.device} ({b.dtype}{versions})")
    if b.server is not None:
        lines.append(f"- served by {b.server.name} {b.server.version}")
    if not m.is_audited_model:
        lines.append(f"- ⚠️ {m.note}")
    return "\n".join(lines) + "\n"


def pr_body(run: FairnessRun, diff: str | None, manifest: Manifest | None = None) -> str:
    """Verdict line, then the diff against the committed recordings (or why there is none), then provenance."""
    parts = [verdict_line(run), "", "## Change against the committed recordings", "", (diff or NO_BASE).strip(), ""]
    if manifest is not None:
        parts.append(provenance_md(manifest))
    body = "\n".join(parts)
    if len(body) > BODY_LIMIT:
        cut = "\n\n… (truncated; the full diff is in the workflow's artifact)\n"
        body = body[: BODY_LIMIT - len(cut)] + cut
    return body
