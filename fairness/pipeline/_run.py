"""The main job: replay a suite's recordings, audit them and write every output.

Inputs are all validated before anything is written, and each output is written
atomically, so a bad input never leaves a half-written or clobbered file behind.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path

from fairness._util.canonical import sha256_file
from fairness._util.errors import FairnessError
from fairness.audit._audit import AuditOptions, FairnessRun, audit, audit_cells
from fairness.pipeline._stream import NotStreamable, stream_cells
from fairness.recordings._record import Recording
from fairness.recordings._store import MANIFEST, RecordingSet, ReplayProvider, read_manifest, verify_files, write_atomic
from fairness.report._render import card, card_md, card_yaml, results_json, summary_md
from fairness.score._rubric import ScoreTable
from fairness.suite._suite import Suite, load_suite

OUTPUTS = ("results.json", "transcripts.jsonl", "summary.md", "card.yaml", "card.md")


@dataclass(frozen=True)
class RunOutputs:
    run: FairnessRun
    suite: Suite
    out: Path
    files: dict[str, Path]


def _display_path(path: Path) -> str:
    """A path safe to commit and print: relative to the working directory when inside it."""
    try:
        return os.path.relpath(path.resolve(), Path.cwd())
    except ValueError:
        return path.name


def transcripts_jsonl(run_cases, recordings, scores: ScoreTable) -> str:
    lines = []
    for i, (case, rec) in enumerate(zip(run_cases, recordings)):
        row = {
            "row_id": case.row_id,
            "family": case.family,
            "paraphrase_id": case.paraphrase_id,
            "placeholders": case.placeholders,
            "slice": case.slice,
            "slice_id": case.slice_id,
            "regime": case.regime,
            "seed": case.seed,
            "prompt": case.prompt,
            "output": rec.output,
            "finish_reason": rec.finish_reason,
            "scores": scores.row(i),
        }
        lines.append(json.dumps(row, ensure_ascii=False, sort_keys=False))
    return "\n".join(lines) + "\n"


def run_audit(
    suite_ref: str,
    recordings_dir: str | Path,
    out: str | Path,
    options: AuditOptions = AuditOptions(),
    *,
    evaluators: tuple[str, ...] = (),
    bbq_dir: str | Path | None = None,
    bbq_items: str | Path | None = None,
    allow_incomplete: bool = False,
) -> RunOutputs:
    suite = load_suite(suite_ref)
    rdir = Path(recordings_dir)
    out = Path(out)
    if out.exists() and not out.is_dir():
        raise FairnessError(f"--out `{out}` exists and is not a directory")
    with contextlib.ExitStack() as stack:
        # transcripts go to a temporary file as the rows stream by; copied into --out at the end
        transcripts = stack.enter_context(tempfile.TemporaryFile("w+", encoding="utf-8"))
        run, recs = _audit_rows(suite, rdir, options, transcripts, streamable=not evaluators and bbq_dir is None,
                                allow_incomplete=allow_incomplete)
        return _finish(run, suite, recs, out, transcripts, evaluators=evaluators, options=options,
                       bbq_dir=bbq_dir, bbq_items=bbq_items)


def _audit_rows(suite: Suite, rdir: Path, options: AuditOptions, transcripts, *, streamable: bool,
                allow_incomplete: bool) -> tuple[FairnessRun, list[Recording] | None]:
    """Audit the recorded rows, writing their transcript lines to `transcripts`.

    Streams (flat memory, no recordings returned) when no evaluator needs every output and
    the records are in grid order; otherwise replays in memory and returns the recordings.
    """
    kw = {"recordings_path": _display_path(rdir), "manifest_sha256": ""}
    if streamable:
        manifest = read_manifest(rdir)
        if manifest.complete or not allow_incomplete:
            verify_files(rdir, manifest)
            kw["manifest_sha256"] = sha256_file(rdir / MANIFEST)
            try:
                design, cells = stream_cells(
                    suite, rdir, manifest, options,
                    lambda cases, recs, scores: transcripts.write(transcripts_jsonl(cases, recs, scores)),
                )
                return audit_cells(suite, design, cells, manifest, options, **kw), None
            except NotStreamable:
                transcripts.seek(0)
                transcripts.truncate()
    rs = RecordingSet(rdir)
    cases = suite.expand()
    provider = ReplayProvider(rs, suite.system_prompt)
    if allow_incomplete and not rs.manifest.complete:
        cases, recs = provider.replay_available(cases)
        if not recs:
            raise FairnessError(f"recordings in `{rdir}` hold no row of this suite's grid")
    else:
        recs = provider.replay(cases)
    kw["manifest_sha256"] = sha256_file(rdir / MANIFEST)
    run, scores = audit(suite, cases, recs, rs.manifest, options, **kw)
    transcripts.write(transcripts_jsonl(cases, recs, scores))
    return run, recs


def _finish(run: FairnessRun, suite: Suite, recs: list[Recording] | None, out: Path, transcripts, *,
            evaluators: tuple[str, ...], options: AuditOptions, bbq_dir, bbq_items) -> RunOutputs:
    if evaluators or bbq_dir is not None:
        from fairness.evaluators._adapter import run_evaluators

        extra = run_evaluators(
            recs, evaluators, bootstrap=options.bootstrap, seed=options.seed,
            bbq_dir=Path(bbq_dir) if bbq_dir is not None else None,
            bbq_items=Path(bbq_items) if bbq_items is not None else None,
        )
        run = run.model_copy(update={"evaluators": extra})
    c = card(run, suite)
    transcripts.flush()
    transcripts.seek(0)
    texts = {
        "results.json": results_json(run),
        "transcripts.jsonl": transcripts,
        "summary.md": summary_md(run, extra_sections=[_peer_md(run)]),
        "card.yaml": card_yaml(c),
        "card.md": card_md(c),
    }
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise FairnessError(f"cannot create --out `{out}`: {exc.strerror or exc}") from None
    files = {}
    for name, text in texts.items():
        write_atomic(out / name, text)
        files[name] = out / name
    return RunOutputs(run, suite, out, files)


def _peer_md(run: FairnessRun) -> str:
    if not run.evaluators:
        return ""
    from fairness.evaluators._adapter import evaluators_md

    return evaluators_md(run.evaluators)


def compact_table(run: FairnessRun) -> str:
    head = f"{'family':<7}{'worst stereotype':>18}{'worst pilot harm':>18}{'refusal delta':>15}  {'decision':<12}{'gate'}"
    lines = [head, "-" * len(head)]
    for f in run.families:
        def v(x):
            return "n/a" if x is None else f"{x:.3f}"
        lines.append(f"{f.family:<7}{v(f.worst_slice_stereotype):>18}{v(f.worst_slice_pilot_harm):>18}{v(f.refusal_delta):>15}  {f.decision:<12}{f.state}")
    return "\n".join(lines)
