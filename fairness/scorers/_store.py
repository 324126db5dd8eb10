"""Recorded scores: what a scorer said about each output, content-keyed, resumable and replayed verified.

Layout, inside a recording set (beside its `manifest.json` and `records.jsonl`)::

    scores/<scorer name>/manifest.json   scorer kind, version, config, provenance, sha256 of scores.jsonl
    scores/<scorer name>/scores.jsonl    one line per distinct output text:
                                         {"key", "value" (null when not valid), "valid", "raw"}

A line's `key` is the sha256 of the canonical JSON of `{"config", "kind", "text", "version"}`
(`config` the scorer's `identity()`: every setting that can change a score), so a score is
reused exactly when the same scorer, configured the same way, saw the same text; rows with
equal outputs share one. A judge's raw answer is kept (`raw`), and an answer that did not
parse is `valid: false` with `value: null`: replay reads it as NaN, never as 0.

Recording (`record_scores`) appends fsynced lines and rewrites the manifest after every batch,
so an interrupted run loses at most a batch and a rerun resumes. Replay (`replay_scores`)
verifies the checksum, checks that the suite still configures the scorer as recorded, and
never builds a scorer: no network, no key, no model.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np
from pydantic import ValidationError

from fairness._util.canonical import canonical_json, sha256_file, sha256_text
from fairness._util.errors import FairnessError, jsonl_models, validation_message
from fairness._util.files import MAX_RECORDS_BYTES, decode_utf8, read_bytes_capped, write_atomic
from fairness._util.io import load_json
from fairness._util.models import Strict
from fairness.recordings._store import DataFile, RecordingSet, repair_tail, today, verify_files
from fairness.scorers._config import ScorerConfig
from fairness.scorers._protocol import Scored, Scorer, details

SCORES_DIR = "scores"
SCORE_MANIFEST = "manifest.json"
SCORE_RECORDS = "scores.jsonl"
FORMAT_VERSION = 1


def scores_dir(recordings: str | Path, name: str) -> Path:
    """Where scorer `name`'s scores of a recording set live."""
    return Path(recordings) / SCORES_DIR / name


def score_keys(kind: str, identity: dict[str, Any], version: str, texts: Sequence[str]) -> list[str]:
    """The content key of each text's score: sha256 of canonical `{"config", "kind", "text", "version"}`."""
    head = '{"config":' + canonical_json(identity) + ',"kind":' + canonical_json(kind) + ',"text":'
    tail = ',"version":' + canonical_json(version) + "}"
    return [sha256_text(head + canonical_json(t) + tail) for t in texts]


class ScoreLine(Strict):
    """One recorded score."""

    key: str
    """Content key (see `score_keys`)."""
    value: float | None
    """The score; null when not valid."""
    valid: bool
    """False when the scorer gave no valid score (a judge answer that did not parse)."""
    raw: str | None = None
    """What the scorer answered (a judge's reply), when it has a raw answer."""


class ScoredFrom(Strict):
    """The recording set whose outputs were scored (provenance; scores are keyed by text, not row)."""

    suite: str
    grid_hash: str
    model_id: str


class ScoreManifest(Strict):
    """Provenance of one scorer's scores of a recording set; `files` pins the scores by sha256."""

    format_version: int = FORMAT_VERSION
    """Version of this format."""
    scorer: str
    """The scorer's name in the rubric (`scorers:` key)."""
    kind: str
    """`judge`, `hf-classifier` or a plug-in's entry-point name."""
    output: Literal["flag", "number"]
    """`flag` (0/1) or `number`."""
    version: str
    """The scorer's version string (part of every key)."""
    config: dict[str, Any]
    """The scorer's settings that can change a score (part of every key)."""
    config_sha256: str
    """sha256 of `config`'s canonical JSON."""
    recordings: ScoredFrom
    """The recording set scored."""
    backend: dict[str, Any]
    """What ran the scorer (a judge's endpoint and client versions, a classifier's weights)."""
    created: str
    """When scoring started (ISO 8601)."""
    updated: str
    """When scores were last written (ISO 8601)."""
    texts: int
    """Distinct outputs of the recording set."""
    scored: int
    """Of those, how many are scored."""
    invalid: int
    """Of those, how many have no valid score (counted, never read as 0)."""
    complete: bool
    """Whether every distinct output is scored."""
    files: list[DataFile]
    """The scores file, pinned by sha256."""


@dataclass(frozen=True)
class ScoreColumn:
    """One scorer's replayed scores, aligned to the texts asked for."""

    scorer: str
    kind: str
    version: str
    output: str
    values: np.ndarray
    """float64, NaN where the recorded score is not valid."""
    raw: list[str | None]
    """The scorer's raw answer per text (None where it has none)."""
    invalid: int
    """Texts whose recorded score is not valid."""


def read_score_manifest(directory: Path) -> ScoreManifest:
    raw = load_json(directory / SCORE_MANIFEST, missing=f"`{directory}` has no {SCORE_MANIFEST}", what="scores manifest")
    if isinstance(raw, dict) and raw.get("format_version", FORMAT_VERSION) != FORMAT_VERSION:
        raise FairnessError(f"scores manifest in `{directory}` has format_version {raw['format_version']!r}; "
                            f"this version reads {FORMAT_VERSION}")
    try:
        return ScoreManifest.model_validate(raw)
    except ValidationError as err:
        raise FairnessError(validation_message(err, f"scores manifest `{directory / SCORE_MANIFEST}`", ScoreManifest)) from None


def read_score_lines(path: Path) -> dict[str, ScoreLine]:
    """The scores file's lines by key; a malformed or repeated line names its line number."""
    text = decode_utf8(read_bytes_capped(path, MAX_RECORDS_BYTES, "scores file"), f"scores file `{path}`")
    out: dict[str, ScoreLine] = {}
    for i, rec in jsonl_models(text, ScoreLine, path):
        if rec.key in out:
            raise FairnessError(f"`{path}` line {i} repeats key {rec.key[:12]}…")
        if rec.valid != (rec.value is not None):
            raise FairnessError(f"`{path}` line {i}: `valid` must be true exactly when `value` is a number")
        out[rec.key] = rec
    return out


def _line(key: str, s: Scored) -> str:
    body = {"key": key, "value": s.value if s.valid else None, "valid": s.valid, "raw": s.raw}
    return json.dumps(body, sort_keys=True, ensure_ascii=False, separators=(",", ":")) + "\n"


def record_command(recordings: str | Path, name: str) -> str:
    """The command that records scorer `name`'s scores (named in every missing-score error)."""
    return f"llm-fairness-check score --recordings {recordings} --scorer {name}"


def record_scores(
    recordings: str | Path, name: str, config: ScorerConfig, *,
    scorer: Scorer | None = None, batch: int | None = None, progress: Callable[[int, int], None] | None = None,
) -> ScoreManifest:
    """Score every distinct output of a verified recording set not scored yet, and record it.

    Resumes what an earlier run recorded; refuses a directory holding another config or
    version of the scorer. A scorer failing part-way (a provider error) leaves every batch
    before it recorded: rerun to resume.
    """
    rs = RecordingSet(recordings)
    texts = list(dict.fromkeys(r.output for r in rs.by_key.values()))
    d = scores_dir(recordings, name)
    old = read_score_manifest(d) if (d / SCORE_MANIFEST).is_file() else None
    if old is not None and (old.kind != config.kind or old.config_sha256 != config.identity_sha256()):
        raise FairnessError(f"`{d}` holds scores of scorer `{name}` configured differently "
                            f"({_differences(old.config, config.identity())}); move it away to rescore")
    scorer = scorer if scorer is not None else _build(name, config)
    try:
        if old is not None and old.version != scorer.version:
            raise FairnessError(f"`{d}` holds scores of scorer `{name}` version `{old.version}`, this scorer is "
                                f"`{scorer.version}`; move it away to rescore")
        keys = score_keys(config.kind, config.identity(), scorer.version, texts)
        path = d / SCORE_RECORDS
        d.mkdir(parents=True, exist_ok=True)
        repair_tail(path)
        done = read_score_lines(path) if path.exists() else {}
        pending = [(k, t) for k, t in dict(zip(keys, texts, strict=True)).items() if k not in done]
        created = old.created if old is not None else today()
        backend = _backend(scorer)

        def seal() -> ScoreManifest:
            wanted = set(keys)
            scored = [line for k, line in done.items() if k in wanted]
            m = ScoreManifest(
                scorer=name, kind=config.kind, output=scorer.output, version=scorer.version, config=config.identity(),
                config_sha256=config.identity_sha256(),
                recordings=ScoredFrom(suite=rs.manifest.suite, grid_hash=rs.manifest.grid_hash, model_id=rs.manifest.model.id),
                backend=backend, created=created, updated=today(), texts=len(wanted), scored=len(scored),
                invalid=sum(not line.valid for line in scored), complete=len(scored) == len(wanted),
                files=[DataFile(path=SCORE_RECORDS, sha256=sha256_file(path), rows=len(done))],
            )
            write_atomic(d / SCORE_MANIFEST, json.dumps(m.model_dump(mode="json"), indent=2, ensure_ascii=False) + "\n")
            return m

        size = batch or _batch_size(config)
        with open(path, "a", encoding="utf-8") as fh:
            for i in range(0, len(pending), size):
                chunk = pending[i:i + size]
                lines = [_line(k, s) for (k, _), s in zip(chunk, details(scorer, [t for _, t in chunk]), strict=True)]
                fh.write("".join(lines))
                fh.flush()
                os.fsync(fh.fileno())
                done.update((k, ScoreLine.model_validate_json(line)) for (k, _), line in zip(chunk, lines, strict=True))
                seal()
                if progress is not None:
                    progress(min(i + size, len(pending)), len(pending))
        return seal()
    finally:
        close = getattr(scorer, "close", None)
        if close is not None:
            close()


def _build(name: str, config: ScorerConfig) -> Scorer:
    from fairness.scorers._registry import build_scorer

    return build_scorer(name, config)


def _backend(scorer: Scorer) -> dict[str, Any]:
    info = getattr(scorer, "backend_info", None)
    return dict(info()) if info is not None else {}


def _batch_size(config: ScorerConfig) -> int:
    return 8 * int(getattr(config, "concurrency", 0) or 0) or 4 * int(getattr(config, "batch_size", 0) or 0) or 64


def _differences(recorded: dict[str, Any], wanted: dict[str, Any]) -> str:
    keys = sorted(k for k in {*recorded, *wanted} if recorded.get(k) != wanted.get(k))
    return "differs in " + ", ".join(f"`{k}`" for k in keys) if keys else "another config"


class RecordedScores:
    """One scorer's verified recorded scores, opened once and looked up by text (chunk after chunk of a
    streamed replay). Opening checks presence, checksum and config; no scorer is ever built."""

    def __init__(self, recordings: str | Path, name: str, config: ScorerConfig, *, command: str | None = None) -> None:
        d = scores_dir(recordings, name)
        self.name, self.directory = name, d
        self.command = command or record_command(recordings, name)
        if not (d / SCORE_MANIFEST).is_file():
            raise FairnessError(f"no recorded scores of scorer `{name}` in `{d}`; record them (needs the scorer's model "
                                f"or network and key) with `{self.command}`")
        m = read_score_manifest(d)
        verify_files(d, m.files)
        if m.kind != config.kind or m.config_sha256 != config.identity_sha256():
            raise FairnessError(f"scores of scorer `{name}` in `{d}` were recorded with another config "
                                f"({_differences(m.config, config.identity())}); record them again with `{self.command}`")
        self.manifest = m
        self._lines = read_score_lines(d / m.files[0].path) if m.files else {}

    def column(self, texts: Sequence[str]) -> ScoreColumn:
        """The scores of `texts`, in order; a text without a recorded score is an error naming the command."""
        m = self.manifest
        keys = score_keys(m.kind, m.config, m.version, texts)
        found = [self._lines.get(k) for k in keys]
        missing = [i for i, f in enumerate(found) if f is None]
        if missing:
            raise FairnessError(f"scorer `{self.name}` has no recorded score for {len(missing)} of {len(texts)} outputs "
                                f"in `{self.directory}` (first: key {keys[missing[0]][:12]}…); record them with "
                                f"`{self.command}`")
        lines = [f for f in found if f is not None]
        values = np.array([np.nan if f.value is None else f.value for f in lines], dtype=np.float64)
        return ScoreColumn(scorer=self.name, kind=m.kind, version=m.version, output=m.output, values=values,
                           raw=[f.raw for f in lines], invalid=int(np.isnan(values).sum()))


def replay_scores(
    recordings: str | Path, name: str, config: ScorerConfig, texts: Sequence[str], *, command: str | None = None,
) -> ScoreColumn:
    """Scorer `name`'s recorded scores of `texts` (one per text, in order), verified; no scorer is built.

    Raises:
        FairnessError: no scores recorded, a checksum mismatch, the suite configures the scorer
            otherwise than recorded, or a text without a score; each names the command that records them.
    """
    return RecordedScores(recordings, name, config, command=command).column(texts)
