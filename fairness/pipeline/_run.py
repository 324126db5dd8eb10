"""The main job: replay a suite's recordings, audit them and write every output.

Inputs are all validated before anything is written, and each output is written
atomically, so a bad input never leaves a half-written or clobbered file behind.
"""

from __future__ import annotations

import contextlib
import json
import operator
import os
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path
from types import SimpleNamespace
from typing import Any, NamedTuple, TextIO

import numpy as np
import pydantic_core

from fairness._util.canonical import encode_str, sha256_file
from fairness._util.errors import FairnessError
from fairness._util.files import check_output_dir, check_output_file, staged_outputs, write_atomic, write_error
from fairness.audit._audit import AuditOptions, FairnessRun, audit, audit_cells
from fairness.audit._gate import with_regressions
from fairness.audit._results import Caveat, Comparison
from fairness.evaluators._inputs import Sample, record_sample
from fairness.pipeline import _baseline
from fairness.pipeline._commands import replay_command, shown_path
from fairness.pipeline._options import RunOptions
from fairness.pipeline._plugins import PluginScoring, check_plugins, with_plugins
from fairness.pipeline._stream import NotStreamable, stream_cells
from fairness.recordings._record import join_rows
from fairness.recordings._store import MANIFEST, RecordingSet, ReplayProvider, read_manifest, verify_files
from fairness.report._html import card_html
from fairness.report._junit import junit_xml
from fairness.report._render import card, card_md, card_yaml, results_json, summary_md
from fairness.score._rubric import ScoreTable
from fairness.suite._rules import DecisionRule
from fairness.suite._runs import SeedRun, seed_runs
from fairness.suite._suite import Suite, load_suite

OUTPUTS = ("results.json", "transcripts.jsonl", "summary.md", "card.yaml", "card.md", "card.html")


class RunOutputs(NamedTuple):
    run: FairnessRun
    suite: Suite
    out: Path
    files: dict[str, Path]


_TRANSCRIPT = json.JSONEncoder(ensure_ascii=False)
"""What `json.dumps(row, ensure_ascii=False)` builds per call; one per process."""


def _score_column(column: np.ndarray) -> tuple[str, list]:
    """A `%` conversion and the values that make a score column's JSON as `_TRANSCRIPT` writes it."""
    if column.dtype.kind in "iu":
        return "%d", column.tolist()
    if column.dtype.kind == "b":
        return "%s", ["true" if v else "false" for v in column.tolist()]
    return "%s", [_TRANSCRIPT.encode(v) for v in column.tolist()]  # floats: repr, NaN, Infinity


_FINISH = {r: encode_str(r) for r in ("stop", "length")}
"""The JSON of each finish reason a record can hold."""


def transcript_lines(runs: Iterable[SeedRun], outputs: Sequence[str], finish_reasons: Sequence[str],
                     scores: ScoreTable) -> list[str]:
    """The transcript lines (each ending in a newline) of the rows of `runs` joined to their
    records (`outputs[i]` answers the i-th row): one per row, its coordinates, prompt, recorded
    output and scores (`scores` in the rows' order).

    Each line is the JSON of `{row_id, family, paraphrase_id, placeholders, slice, slice_id, regime,
    seed, prompt, output, finish_reason, scores}` (`json.dumps(..., ensure_ascii=False)`), made by
    one `%` format per row: the part a run's rows share (coordinates and prompt) is encoded
    into the format once per run, and the scores fill it as numbers."""
    enc = encode_str
    convs, columns = zip(*map(_score_column, scores.columns.values()), strict=True) if scores.columns else ((), ())
    score_fmt = "{" + ", ".join(f"{enc(k).replace('%', '%%')}: {c}" for k, c in zip(scores.columns, convs, strict=True)) + "}}\n"
    lines: list[str] = []
    reasons = [_FINISH.get(r) or encode_str(r) for r in finish_reasons]
    # one iterator per column, shared by the runs: each run's rows take the next values of each
    bodies, reason_json, values = iter(json_string_bodies(outputs)), iter(reasons), [iter(c) for c in columns]
    for run in runs:
        part = _TRANSCRIPT.encode({
            "family": run.family, "paraphrase_id": run.paraphrase_id, "placeholders": run.placeholders,
            "slice": run.slice, "slice_id": run.slice_id, "regime": run.regime,
        })
        fmt = ('{"row_id": %s, ' + part[1:-1].replace("%", "%%") + ', "seed": %d, "prompt": '
               + enc(run.prompt).replace("%", "%%") + ', "output": "%s", "finish_reason": %s, "scores": ' + score_fmt)
        # the run's ids come first: zip stops there, before taking the next run's values
        lines += map(fmt.__mod__, zip(map(enc, run.row_ids), run.seeds, bodies, reason_json, *values, strict=False))
    if len(lines) != len(outputs):
        raise ValueError(f"{len(outputs)} outputs for {len(lines)} rows")
    return lines


def json_string_bodies(texts: Sequence[str]) -> list[str]:
    """Each text's JSON string as `encode_basestring` writes it, less the quotes.

    pydantic-core encodes the whole list in one call (in Rust; split and decoded, over twice as
    fast as a call per text) with the very same escapes: `\\"`, `\\\\`, `\\b \\f \\n \\r \\t`, other
    control characters as lower-case `\\u00xx`, everything else as it is. Inside an encoded
    string every `"` follows a backslash, so the list splits exactly at each `","`. A text
    it cannot encode (a lone surrogate) sends the list the per-text way."""
    if not texts:
        return []
    try:
        parts = pydantic_core.to_json(list(texts))[2:-2].split(b'","')
    except pydantic_core.PydanticSerializationError:
        parts = []
    if len(parts) != len(texts):
        return [encode_str(t)[1:-1] for t in texts]
    return [p.decode("utf-8") for p in parts]


def write_lines(fh: TextIO, lines: list[str], batch: int = 256) -> None:
    """Write `lines` as UTF-8 a few hundred at a time, each line encoded on its own and the
    bytes written under the text layer: one line with a wide character would widen a joined
    batch of text, and encoding wide text costs about twice as much (joining a chunk's
    megabytes at once costs more in fresh pages than the write itself)."""
    fh.flush()  # nothing of the text layer may be left to land after these bytes
    out = fh.buffer
    for i in range(0, len(lines), batch):
        out.write(b"".join(map(str.encode, lines[i : i + batch])))


_OUTPUT, _FINISH_REASON = operator.itemgetter("output"), operator.itemgetter("finish_reason")


def check_inputs(options: RunOptions) -> None:
    """Every path of a run, checked before any work (nothing is read or written yet); the
    numbers were checked when `options` was built."""
    check_output_dir(options.out)
    rdir = options.recordings
    if not rdir.is_dir():
        raise FairnessError(f"recordings directory `{rdir}` does not exist or is not a directory")
    if options.bbq_recordings is not None and not options.bbq_recordings.is_dir():
        raise FairnessError(f"--bbq-recordings `{options.bbq_recordings}` does not exist or is not a directory")
    if options.bbq_items is not None and not options.bbq_items.exists():
        raise FairnessError(f"--bbq-items `{options.bbq_items}` does not exist")
    check_apart(options.out, rdir, "--out")
    if options.junit is not None:
        check_output_file(options.junit, "--junit")
        check_apart(options.junit, rdir, "--junit")


def check_apart(path: str | Path, recordings: Path, flag: str) -> None:
    """Outputs never go into a recording set's directory: a run must leave its recordings as they are."""
    p, r = Path(path).resolve(), recordings.resolve()
    if (r / MANIFEST).is_file() and (p == r or r in p.parents):
        raise FairnessError(f"{flag} `{path}` is inside the recordings directory `{recordings}`; write outputs elsewhere")


class Resolved(NamedTuple):
    """A run's inputs, resolved and checked before any file is read or any model is loaded."""

    suite: Suite
    rules: tuple[DecisionRule, ...]
    """The suite's rules (or the options'), with every threshold override applied and checked."""
    base_run: _baseline.Base | None = None
    """The base run `options.baseline` names, read once and vetted (a git ref is resolved by `run_audit`)."""

    @property
    def regression_rules(self) -> list[DecisionRule]:
        return [r for r in self.rules if r.kind == "regression"]


def resolve(options: RunOptions, *, recordings_ready: bool = True) -> Resolved:
    """Check every option of a run in one step: the suite, every rule's threshold after the
    overrides, the output paths, the base run and, when `recordings_ready`, the recordings.

    Live mode calls this before generating (`recordings_ready=False`) so that a bad threshold or
    path is refused before the model is loaded, not after the grid is generated."""
    if recordings_ready:
        check_inputs(options)
    else:
        check_output_dir(options.out)
        if options.junit is not None:
            check_output_file(options.junit, "--junit")
    suite = load_suite(options.suite)
    rules = options.audit.effective_rules(suite.rules, suite.compiled_rubric.metrics)
    check_plugins(suite)
    return Resolved(suite, rules, _baseline.base_run(options.baseline) if options.baseline is not None else None)


def run_audit(options: RunOptions) -> RunOutputs:
    """Replay, audit, compare (when a baseline is given) and write every output of the main job.

    All inputs are resolved first (`resolve`); a base revision is audited before the head; the
    outputs are written into a staging directory and moved into `out` together
    (`staged_outputs`), so a refused run or a full disk changes nothing there, and the
    comparison folders an earlier run left behind go in the same move when this run makes
    none. The verdict is decided once (`fairness.audit._gate`) from the head's rule checks and
    the regression checks, before any output is rendered. The rows stream
    (`fairness.pipeline._stream`): without evaluators memory stays flat however large the
    grid; their transcript lines go straight into the staging directory."""
    resolved = resolve(options)
    suite = resolved.suite
    with contextlib.ExitStack() as stack:
        base: _baseline.Base | None = None
        if options.baseline_ref is not None:  # the base first: a bad ref or base set changes nothing in out
            base = stack.enter_context(_baseline.base_at_ref(options.baseline_ref, options, suite,
                                                             workspace=options.workspace))
        else:
            base = resolved.base_run
        drop: set[str] = set()
        try:
            with staged_outputs(options.out, drop) as staging:
                with open(staging / "transcripts.jsonl", "w", encoding="utf-8") as fh:
                    try:
                        run = _audit_rows(suite, options, _Transcripts(fh, options.out))
                    except OSError as exc:
                        raise _InputError(exc) from None
                    fh.flush()
                    os.fsync(fh.fileno())
                diff_md_text = ""
                if base is not None:
                    comparison, d = _baseline.compare(base, staging, run.model_dump(mode="json"),
                                                      resolved.regression_rules, options)
                    run = with_comparison(run, comparison)
                    if d is not None:
                        from fairness.audit._diff import diff_md  # a plain run never diffs

                        diff_md_text = diff_md(d)
                drop |= _baseline.stale_comparison(options.out, sorted(p.name for p in staging.iterdir()),
                                                   keep=options.baseline)
                _write_outputs(run, suite, staging, diff_md_text, replay_command(options))
        except _InputError as err:
            raise err.error from None
    files = {name: options.out / name for name in OUTPUTS}
    if run.comparison is not None and run.comparison.ran:
        files["diff"] = options.out / _baseline.DIFF_DIR / "diff.json"
    if options.junit is not None:
        _write_junit(run, options.junit)
        files["junit.xml"] = options.junit
    return RunOutputs(run, suite, options.out, files)


def with_comparison(run: FairnessRun, comparison: Comparison) -> FairnessRun:
    """`run` with the base-vs-head comparison and its verdict decided again with the regression checks."""
    if not comparison.ran:
        return run.model_copy(update={"comparison": comparison})
    bad = [c for c in comparison.checks if c.state != "pass"]
    reasons = [f"{c.rule} [{c.scope}{f', slice {c.slice}' if c.slice else ''}]: {c.state} — {c.reason}" for c in bad]
    gate = with_regressions(run.gate, [c.state for c in comparison.checks], reasons)
    return run.model_copy(update={"comparison": comparison, "gate": gate})


class _InputError(Exception):
    """An `OSError` met reading the inputs: carried out of `staged_outputs`, which words an
    `OSError` as an output that could not be written."""

    def __init__(self, error: OSError) -> None:
        super().__init__(str(error))
        self.error = error


class _Transcripts:
    """The transcripts file in the staging directory; a failed write is an output error."""

    def __init__(self, fh: TextIO, out: Path) -> None:
        self._fh, self._out = fh, out

    def write(self, lines: list[str]) -> None:
        try:
            write_lines(self._fh, lines)
        except OSError as exc:
            raise write_error(self._out, exc) from None

    def clear(self) -> None:
        self._fh.seek(0)
        self._fh.truncate()


class _Collected:
    """What the evaluators read of every replayed row: its `Sample` and the slice values the
    prompt inserted (masked before the lexical measures)."""

    def __init__(self) -> None:
        self.samples: list[Sample] = []
        self.terms: set[str] = set()

    def add(self, recs: Sequence[Any]) -> None:
        self.samples.extend(map(record_sample, recs))
        self.terms.update(v for rec in recs for v in rec.slice.values())


def _audit_rows(suite: Suite, options: RunOptions, transcripts: _Transcripts) -> FairnessRun:
    """Audit the recorded rows, writing their transcript lines to `transcripts`, and run the
    evaluators `options` asks for.

    Streams when the set is complete with its records in grid order (evaluators then keep one
    `Sample` per row, not the records); otherwise replays in memory.
    """
    rdir = options.recordings
    shown = shown_path(rdir, options.shown_root)
    mode = options.audit.scorer_mode or suite.scorer.mode
    wanted = bool(options.evaluators)
    manifest = read_manifest(rdir)
    if manifest.complete or not options.allow_incomplete:
        verify_files(rdir, manifest.files)
        sha = sha256_file(rdir / MANIFEST)
        collected = _Collected() if wanted else None
        plugins = PluginScoring(suite, options.suite, rdir, mode)

        def on_chunk(runs: list[SeedRun], recs: list[dict[str, Any]], scores: ScoreTable) -> None:
            lines = transcript_lines(runs, list(map(_OUTPUT, recs)), list(map(_FINISH_REASON, recs)), scores)
            transcripts.write(plugins.mark(lines, scores))
            plugins.collect(runs, scores)
            if collected is not None:
                collected.add([SimpleNamespace(**r) for r in recs])

        with contextlib.suppress(NotStreamable):
            design, cells, grid = stream_cells(suite, rdir, manifest, options.audit, on_chunk, score=plugins.score)

            def rerun(audit_options: AuditOptions) -> FairnessRun:
                return audit_cells(suite, design, cells, manifest, audit_options, recordings_path=shown,
                                   manifest_sha256=sha, suite_grid_hash=grid)

            run = with_plugins(rerun(options.audit), plugins, suite, options.audit, rerun)
            return _with_evaluators(run, collected, options)
        transcripts.clear()
    rs = RecordingSet(rdir)
    cases = suite.expand()
    provider = ReplayProvider(rs, suite.system_prompt, suite.name)
    if options.allow_incomplete and not rs.manifest.complete:
        cases, recs = provider.replay_available(cases)
        if not recs:
            raise FairnessError(f"recordings in `{rdir}` hold no row of this suite's grid")
    else:
        recs = provider.replay(cases)
    joined = join_rows(cases, recs)
    plugins = PluginScoring(suite, options.suite, rdir, mode)
    scores = plugins.score([r.output for r in joined], [r.row_id for r in joined])
    sha = sha256_file(rdir / MANIFEST)

    def rerun_rows(audit_options: AuditOptions) -> FairnessRun:
        return audit(suite, cases, recs, rs.manifest, audit_options, recordings_path=shown, manifest_sha256=sha,
                     scores=scores)[0]

    runs = list(seed_runs(cases))
    plugins.collect(runs, scores)
    run = with_plugins(rerun_rows(options.audit), plugins, suite, options.audit, rerun_rows)
    lines = transcript_lines(runs, [r.output for r in joined], [r.finish_reason for r in joined], scores)
    transcripts.write(plugins.mark(lines, scores))
    collected = None
    if wanted:
        collected = _Collected()
        collected.add(recs)
    return _with_evaluators(run, collected, options)


def _with_evaluators(run: FairnessRun, collected: _Collected | None, options: RunOptions) -> FairnessRun:
    """`run` with the peer evaluators' results, when `options` asks for any."""
    if not (options.evaluators or options.bbq_recordings is not None):
        return run
    from fairness.evaluators._adapter import run_evaluators

    extra = run_evaluators(
        collected.samples if collected else [], options.evaluators, mask_terms=collected.terms if collected else (),
        bootstrap=options.audit.bootstrap, seed=options.audit.seed,
        bbq_dir=options.bbq_recordings, bbq_items=options.bbq_items,
    )
    skipped = [Caveat(code="evaluator-skipped", message=f"requested evaluator `{name}` could not run: {why}")
               for name, why in extra.get("skipped", {}).items()]
    for c in skipped:  # never silent: a warning now, and a caveat in every output
        print(f"warning: {c.message}", file=sys.stderr)
    return run.model_copy(update={"evaluators": extra, "caveats": [*run.caveats, *skipped]})


def _write_outputs(run: FairnessRun, suite: Suite, staging: Path, diff_md_text: str = "", replay: str | None = None) -> None:
    """Write the outputs other than the transcripts into `staging`; `replay` is the command the card names."""
    c = card(run, suite, replay_command=replay)
    texts = {
        "results.json": results_json(run),
        "summary.md": summary_md(run, extra_sections=[_peer_md(run), diff_md_text]),
        "card.yaml": card_yaml(c),
        "card.md": card_md(c),
        "card.html": card_html(run, suite, replay),
    }
    for name, text in texts.items():
        write_atomic(staging / name, text)


def _write_junit(run: FairnessRun, path: Path) -> None:
    """JUnit XML for CI test reporters; written after the audit's own outputs."""
    try:
        write_atomic(path, junit_xml(run))
    except OSError as exc:
        raise FairnessError(f"cannot write --junit `{path}`: {exc.strerror or exc}") from None


def _peer_md(run: FairnessRun) -> str:
    if not run.evaluators:
        return ""
    from fairness.evaluators._adapter import evaluators_md

    return evaluators_md(run.evaluators)


def compact_table(run: FairnessRun) -> str:
    head = f"{'family':<7}{'worst stereotype':>18}{'worst pilot harm':>18}{'refusal delta':>15}  {'decision':<12}{'gate'}"
    lines = [head, "-" * len(head)]
    def v(x: float | None) -> str:
        return "n/a" if x is None else f"{x:.3f}"

    lines += [
        f"{f.family:<7}{v(f.worst_slice_stereotype):>18}{v(f.worst_slice_pilot_harm):>18}{v(f.refusal_delta):>15}  {f.decision:<12}{f.state}"
        for f in run.families
    ]
    return "\n".join(lines)


def print_outcome(result: RunOutputs, *, quiet: bool = False, out: TextIO | None = None, err: TextIO | None = None) -> None:
    """The console report of a run: the verdict line first, the comparison, then (unless `quiet`)
    the family table, stability, run caveats and the files written. Renders `run.gate` only."""
    from fairness.report._render import comparison_line, plain, verdict_line

    out, err = out or sys.stdout, err or sys.stderr
    run = result.run
    print(plain(verdict_line(run)), file=out)
    line = comparison_line(run)
    if line:
        print(line, file=out)
    if quiet:
        return
    print(compact_table(run), file=out)
    for s in run.stability:
        print(s.summary, file=out)
    for c in run.caveats:
        if c.code in ("test-model", "stale-recordings", "incomplete-recordings", "empty-outputs"):
            print(f"caveat: {' '.join(c.message.split())}", file=err)
    print(f"wrote {', '.join(str(p) for p in result.files.values())}", file=out)
