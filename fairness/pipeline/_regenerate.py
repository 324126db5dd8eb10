"""Regenerate a model's recordings in place and prepare the pull request that reviews them.

One stable directory per model (`recordings/<suite>/<model>`): a new set is generated (or
merged from shards) into a staging directory beside it and swapped in only once complete,
so the PR check's `recordings:` path never changes, a failed night leaves the committed set
untouched, and the git diff of the PR is the change in outputs (the manifest carries dates).

`regenerate()` is the whole job of the nightly workflow bar git: audit the committed set
(base), regenerate, audit the new set (head), diff them and render the PR body. The
workflow, the `init`-scaffolded workflow and the tests all call it through
`llm-fairness-check regenerate`.
"""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from fairness._util.errors import FairnessError
from fairness._util.files import write_atomic
from fairness.audit._audit import AuditOptions
from fairness.recordings._store import MANIFEST, Manifest, merge_recordings, read_manifest
from fairness.scorers._store import SCORES_DIR
from fairness.suite._suite import load_suite

CONTAINER_MARKERS = ("/.dockerenv", "/run/.containerenv")


def staging_dir(out: Path) -> Path:
    """Where a regeneration of `out` is written before it replaces `out` (same filesystem: renames are cheap)."""
    return out.parent / f".{out.name}.staging"


def swap_in(staging: Path, out: Path) -> None:
    """Replace `out` with `staging` by two renames; if the second fails the old set is put back.

    The old set's recorded plug-in scores (`scores/`) move over: they are keyed by output text, so
    every output the new set shares with the old keeps its score, and `score` records only the rest."""
    old = out.parent / f".{out.name}.old"
    if old.exists():
        shutil.rmtree(old)
    scores = out / SCORES_DIR
    if scores.is_dir() and not (staging / SCORES_DIR).exists():
        shutil.copytree(scores, staging / SCORES_DIR, symlinks=True)
    if out.exists():
        os.rename(out, old)
    try:
        os.rename(staging, out)
    except OSError:
        if old.exists():
            os.rename(old, out)
        raise
    if old.exists():
        shutil.rmtree(old)


def check_paths(out: Path, work: Path) -> None:
    """`out`, its staging directory and `work`, checked before any work: the audits write into
    `work`, and `out` is replaced wholesale, so neither may lie inside the other."""
    from fairness._util.files import check_output_dir
    from fairness.pipeline._run import check_apart

    check_output_dir(out, "--out")
    staging = staging_dir(out)
    if staging.exists() and not staging.is_dir():
        raise FairnessError(f"staging directory `{staging}` of --out exists and is not a directory; remove it")
    check_output_dir(work, "--work")
    check_apart(work, out, "--work")
    w, o = work.resolve(), out.resolve()
    if w == o or o in w.parents or w in o.parents:
        raise FairnessError(f"--work `{work}` and --out `{out}` overlap; the recordings directory is replaced as a whole")


def isolated_environment() -> str:
    """A line naming the isolated environment this runs in; refuses the runner's own Python.

    A self-hosted runner's Python is shared and persistent across jobs: installing into it
    makes nights depend on each other. A venv (e.g. under $RUNNER_TEMP) or a container is fine."""
    if sys.prefix != sys.base_prefix:
        return f"venv at {sys.prefix} (python {sys.executable})"
    marker = next((m for m in CONTAINER_MARKERS if os.path.exists(m)), None)
    if marker:
        return f"container ({marker}), python {sys.executable}"
    raise FairnessError(
        f"refusing to regenerate with the runner's own Python ({sys.executable}); "
        "run in the project's live container image or a fresh venv (python -m venv \"$RUNNER_TEMP/venv\")"
    )


@dataclass
class Regenerated:
    out: Path
    complete: bool
    exit_code: int
    """The gate's exit code on the new recordings (0-4)."""
    body_path: Path | None
    environment: str
    manifest: Manifest | None


def regenerate(
    suite_ref: str,
    out: Path,
    work: Path,
    produce: Callable[[Path], None] | None = None,
    *,
    shards: list[Path] | None = None,
    options: AuditOptions | None = None,
    log: Callable[[str], None] = print,
) -> Regenerated:
    """Audit the committed set, write a new one (by `produce(staging)` or by merging `shards`), swap it in
    when complete, audit it and write `work/pr-body.md`."""
    from fairness.pipeline._diff import run_diff
    from fairness.pipeline._options import RunOptions
    from fairness.pipeline._run import run_audit
    from fairness.report._pr_body import pr_body

    options = options or AuditOptions()
    check_paths(out, work)
    environment = isolated_environment()
    log(f"environment: {environment}")
    if (produce is None) == (shards is None):
        raise FairnessError("regenerate needs either a generator or shard directories to merge, not both")
    suite = load_suite(suite_ref)
    work.mkdir(parents=True, exist_ok=True)
    base, no_diff = None, None
    if (out / MANIFEST).exists():
        try:
            base = run_audit(RunOptions(suite=suite_ref, recordings=out, out=work / "base", audit=options,
                                        allow_incomplete=True))
            log(f"committed recordings: {base.run.gate.state} (exit {base.run.gate.exit_code})")
        except FairnessError as exc:  # e.g. the suite changed: regenerating is exactly what is needed
            no_diff = f"The committed recordings could not be audited with this suite, so there is no diff: {exc}"
            log(no_diff)
    staging = staging_dir(out)
    if shards is not None:
        if staging.exists():
            shutil.rmtree(staging)  # a merge is cheap to redo; never mix two merges
        merge_recordings(shards, staging, suite.expand())
    else:
        assert produce is not None
        produce(staging)
    manifest = read_manifest(staging)
    if not manifest.complete:
        log(f"new recordings are incomplete ({manifest.rows}/{manifest.expected_rows} rows) and stay in "
            f"`{staging}`; `{out}` is unchanged; rerun to continue")
        return Regenerated(out, False, 0, None, environment, manifest)
    swap_in(staging, out)
    log(f"rewrote `{out}` in place: {manifest.rows} rows")
    head = run_audit(RunOptions(suite=suite_ref, recordings=out, out=work / "head", audit=options))
    diff = no_diff
    if base is not None:
        _, diff = run_diff(work / "base", work / "head", suite=suite_ref, out=work, options=options)
    body = pr_body(head.run, diff, manifest)
    write_atomic(work / "pr-body.md", body)
    log(f"new recordings: {head.run.gate.state} (exit {head.run.gate.exit_code}); PR body in `{work / 'pr-body.md'}`")
    return Regenerated(out, True, head.run.gate.exit_code, work / "pr-body.md", environment, manifest)
