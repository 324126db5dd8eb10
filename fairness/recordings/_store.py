"""The recording store: manifest + JSONL records, written resumably and replayed verified.

Layout of a recording set (`recordings/<suite>/<model>/`)::

    manifest.json    provenance, sha256 of each data file, row counts
    records.jsonl    one `Recording` per grid row (or records.jsonl.gz)

Records hold no timestamps, so regenerating a grid with the same settings and software
reproduces the data file byte for byte; only the manifest carries dates.
"""


import bisect
import datetime as _dt
import functools
import gzip
import hashlib
import itertools
import json
import os
import zlib
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, ValidationError
from pydantic_core import SchemaValidator

from fairness._util.canonical import canonical_json, sha256_file, sha256_text
from fairness._util.errors import FairnessError, validation_message
from fairness._util.files import MAX_RECORDS_BYTES, decode_utf8, write_atomic
from fairness._util.io import load_json
from fairness._util.models import Strict, empty_list
from fairness.recordings._record import Recording
from fairness.suite._case import Case, SamplingParams
from fairness.suite._runs import SeedRun, seed_runs

FORMAT_VERSION = 1
MANIFEST = "manifest.json"
RECORDS = "records.jsonl"


def content_key(model_id: str, system_prompt: str, prompt: str, params: SamplingParams, seed: int) -> str:
    """sha256 of the canonical JSON of everything that determines an output.

    Numbers are canonicalised, so `temperature: 0` and `temperature: 0.0` give one key.
    The object `{"model", "params", "prompt", "seed", "system_prompt"}` is written member by
    member in sorted-key order, which is exactly its `canonical_json` (each member canonical,
    the regime's params cached), ~5x faster than walking the dict: replay keys every row.
    """
    return sha256_text(
        '{"model":' + canonical_json(model_id)
        + ',"params":' + _params_json(params)
        + ',"prompt":' + canonical_json(prompt)
        + ',"seed":' + str(int(seed))  # an int's canonical JSON
        + ',"system_prompt":' + canonical_json(system_prompt) + "}"
    )


class ContentKeys:
    """`content_key` for one model and system prompt, row after row: the sha256 state of the part
    up to the seed is kept while the prompt and params repeat (a grid's seeds of one prompt and
    regime are consecutive) and copied for each seed, so the prompt is encoded once, not per row."""

    def __init__(self, model_id: str, system_prompt: str) -> None:
        self._head = '{"model":' + canonical_json(model_id) + ',"params":'
        self._tail = (',"system_prompt":' + canonical_json(system_prompt) + "}").encode("utf-8")
        self._prompt: str | None = None
        self._params: SamplingParams | None = None
        self._state = hashlib.sha256()
        self._seeds: dict[int, bytes] = {}  # each seed's bytes to the end of the object

    def of_runs(self, runs: Iterable[SeedRun]) -> list[str]:
        """The keys of the rows of `runs`, in order."""
        keys: list[str] = []
        state, prompt, params, seeds = self._state, self._prompt, self._params, self._seeds
        for run in runs:
            if run.params is not params or run.prompt != prompt:
                prompt, params = run.prompt, run.params
                text = self._head + _params_json(params) + ',"prompt":' + canonical_json(prompt) + ',"seed":'
                state = hashlib.sha256(text.encode("utf-8"))
            for seed in run.seeds:
                if (rest := seeds.get(seed)) is None:
                    rest = seeds[seed] = str(int(seed)).encode("ascii") + self._tail
                h = state.copy()
                h.update(rest)
                keys.append(h.hexdigest())
        self._state, self._prompt, self._params = state, prompt, params
        return keys


@functools.lru_cache(maxsize=256)
def _params_json(params: SamplingParams) -> str:
    return canonical_json(params.model_dump())


def grid_hash(cases: Iterable[Any], system_prompt: str) -> str:
    """Hash of what the grid asks a model, independent of which model answers.

    The sha256 of the canonical JSON of `{"system_prompt", "rows": [[row_id, prompt, params,
    seed], …]}`, fed to the hash a block of rows at a time (sorted keys: `rows` first), so a
    streamed grid is hashed without holding its rows. `cases` are `Case`s or rows with their fields.
    """
    return grid_hash_of_runs(seed_runs(cases), system_prompt)


def grid_hash_of_runs(runs: Iterable[SeedRun], system_prompt: str) -> str:
    """`grid_hash` of the rows of `runs` (a suite's own: `iter_seed_runs`)."""
    h, rest = GridHash(), iter(runs)
    while block := list(itertools.islice(rest, 64)):
        h.update(block)
    return h.hexdigest(system_prompt)


@functools.lru_cache(maxsize=4096)
def _seed_json(typed: tuple[type, int]) -> str:
    """A seed's canonical JSON, cached by (type, value): `True` is not `1`."""
    return canonical_json(typed[1])


class GridHash:
    """`grid_hash` fed a block of seed runs at a time, so a streamed replay hashes the grid as
    it walks it instead of walking it twice. A run's prompt and params are encoded once."""

    def __init__(self) -> None:
        self._h = hashlib.sha256(b'{"rows":[')
        self._sep = ""
        self._prompt: tuple[Any, str] = (None, "")
        self._params: tuple[Any, str] = (None, "")

    def update(self, runs: Iterable[SeedRun]) -> None:
        """Add the rows of the next runs (one encode and hash update per call)."""
        (last_prompt, prompt_json), (last_params, params_json) = self._prompt, self._params
        parts: list[str] = []
        for run in runs:
            if run.prompt != last_prompt:
                last_prompt, prompt_json = run.prompt, canonical_json(run.prompt)
            if run.params is not last_params:
                last_params, params_json = run.params, _params_json(run.params)
            row = "[%s," + f"{prompt_json},{params_json}".replace("%", "%%") + ",%s]"
            seeds = [_seed_json((type(x), x)) for x in run.seeds]
            parts += map(row.__mod__, zip(map(canonical_json, run.row_ids), seeds, strict=True))
        self._prompt, self._params = (last_prompt, prompt_json), (last_params, params_json)
        if parts:
            self._h.update((self._sep + ",".join(parts)).encode("utf-8"))
            self._sep = ","

    def hexdigest(self, system_prompt: str) -> str:
        h = self._h.copy()
        h.update(('],"system_prompt":' + canonical_json(system_prompt) + "}").encode("utf-8"))
        return h.hexdigest()


class DataFile(Strict):
    """One data file of a recording set, pinned by sha256."""

    path: str
    """Relative to the recording directory."""
    sha256: str
    """sha256 of the file's bytes (as stored, compressed or not)."""
    rows: int
    """Records in the file."""


class ModelInfo(Strict):
    """The model that produced the recordings."""

    id: str
    """The model id that enters every content key."""
    source: str
    """Where the weights came from (hub id, local file name, registry package)."""
    weights_file: str | None = None
    """The weights file name, when local weights were used."""
    weights_sha256: str | None = None
    """sha256 of the weights file, when local weights were used."""
    revision: str | None = None
    """The hub commit the weights were loaded from (a pin, not a branch name); None for local files."""
    weights: dict[str, str] | None = None
    """sha256 of every weights file actually loaded, by file name (None in manifests that predate it)."""
    is_audited_model: bool = True
    """False when these are a stand-in test model's outputs, not the audited model's."""
    note: str = ""
    """Why a stand-in model was used, or what to know about the model."""


class ServerInfo(Strict):
    """The serving engine behind an OpenAI-compatible endpoint, as it reports itself."""

    name: str
    """e.g. `vllm`"""
    version: str


class BackendInfo(Strict):
    """The engine that ran the model."""

    engine: str
    """`llamacpp`, `transformers`, `openai`, `anthropic` …"""
    versions: dict[str, str]
    """Library versions of the engine."""
    dtype: str
    """Numeric type of the weights and activations (`n/a` for hosted APIs)."""
    device: str
    """Where the model ran (`cpu`, `cuda:0`, an API host …)."""
    details: dict[str, Any] = Field(default_factory=dict)
    """Engine-specific settings that can change outputs (threads, context size …)."""
    server: ServerInfo | None = None
    """The serving engine behind an OpenAI-compatible `--base-url`, where the server reports it."""


class FileChange(Strict):
    """One data file whose checksum a reseal rewrote."""

    path: str
    """Relative to the recording directory."""
    old_sha256: str
    """The sha256 the manifest held before the reseal."""
    new_sha256: str
    """The sha256 of the file as resealed."""


class ManifestEvent(Strict):
    """A deliberate change to a recording set after it was recorded (e.g. a reseal)."""

    action: Literal["reseal"]
    """What was done: `reseal` rewrote the data files' checksums after a deliberate edit."""
    by: str
    """Who did it (`--by`, else git's user.name <user.email>, else $USER)."""
    at: str
    """When, in UTC (ISO 8601)."""
    reason: str
    """Why, as given with `--reason`."""
    changes: list[FileChange]
    """The data files whose sha256 changed, old and new."""


class Manifest(Strict):
    """Provenance of a recording set; `files` pins each data file by sha256."""

    format_version: int = FORMAT_VERSION
    """Version of the recording format (records and manifest)."""
    suite: str
    """Name of the suite recorded."""
    suite_version: str
    """Version of the suite recorded."""
    suite_hash: str
    """Hash of the suite recorded (any change to the suite changes it)."""
    grid_hash: str
    """Hash of the grid rows (ids, prompts, params, seeds) and system prompt: what must match to resume or merge."""
    model: ModelInfo
    """The model that produced the recordings."""
    backend: BackendInfo
    """The engine that ran it."""
    system_prompt: str
    """The system prompt sent with every row."""
    regimes: list[dict[str, Any]]
    """The suite's decoding regimes as requested."""
    effective_sampling: dict[str, dict[str, Any]]
    """Per regime, the sampling the engine really applied (defaults from the model's config included)."""
    seeds: list[int]
    """The seeds of every prompt."""
    batch_plan: dict[str, Any]
    """How rows were grouped into calls (outputs can depend on it)."""
    shard: str | None = None
    """`K/N` when this set holds one deterministic shard of the grid."""
    created: str
    """When the set was started (ISO 8601)."""
    updated: str
    """When the set was last written (ISO 8601)."""
    expected_rows: int
    """Grid rows this set (or shard) should hold."""
    rows: int
    """Rows recorded."""
    complete: bool
    """Whether every expected row is recorded."""
    files: list[DataFile]
    """The data files, each pinned by sha256."""
    history: list[ManifestEvent] = Field(default_factory=empty_list)
    """Deliberate changes since recording (reseals), oldest first; empty (and omitted) when none."""


def today() -> str:
    return _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def read_manifest(directory: Path) -> Manifest:
    path = directory / MANIFEST
    if not directory.is_dir():
        raise FairnessError(f"recordings directory `{directory}` does not exist or is not a directory")
    raw = load_json(path, missing=f"recordings directory `{directory}` has no {MANIFEST}", what="manifest")
    if isinstance(raw, dict) and raw.get("format_version", FORMAT_VERSION) != FORMAT_VERSION:
        raise FairnessError(
            f"manifest `{path}` has format_version {raw['format_version']!r}; this version reads {FORMAT_VERSION}"
        )
    try:
        return Manifest.model_validate(raw)
    except ValidationError as err:
        raise FairnessError(validation_message(err, f"manifest `{path}`", Manifest)) from None


def write_manifest(directory: Path, manifest: Manifest) -> None:
    data = manifest.model_dump(mode="json")
    if not data["history"]:  # a set never resealed keeps the manifest bytes it always had
        del data["history"]
    write_atomic(directory / MANIFEST, json.dumps(data, indent=2, ensure_ascii=False) + "\n")


def record_line(rec: Recording) -> str:
    """One record as one canonical JSON line (sorted keys: stable bytes)."""
    return json.dumps(rec.model_dump(mode="json"), sort_keys=True, ensure_ascii=False, separators=(",", ":")) + "\n"


def _iter_line_blocks(path: Path, size: int) -> Iterator[tuple[int, int, list[bytes]]]:
    """(first line number, byte offset of the first line, a block of about `size` raw lines)
    of a data file, gzip or plain, size-capped.

    Corrupt compression and over-size files are a `FairnessError`, never a traceback, raised
    only after the lines read before the fault are yielded (as a line-by-line reader would)."""
    lineno, offset = 1, 0  # of the block's first line
    for block, read_error in _raw_blocks(path, size):
        lines, error, length = block, read_error, sum(map(len, block))
        if offset + length > MAX_RECORDS_BYTES:  # the lines that end within the limit, then the refusal
            ends = list(itertools.accumulate(map(len, lines), initial=offset))[1:]
            lines = lines[: bisect.bisect_right(ends, MAX_RECORDS_BYTES)]
            error = FairnessError(f"data file `{path}` is over the {MAX_RECORDS_BYTES:,}-byte limit")
        if lines:
            yield lineno, offset, lines
        if error is not None:
            raise error
        lineno, offset = lineno + len(lines), offset + length


def _raw_blocks(path: Path, size: int) -> Iterator[tuple[list[bytes], FairnessError | None]]:
    """Blocks of raw lines, each with the read error that ended the file there (the last only)."""
    lines: list[bytes] = []
    try:
        if not path.is_file():
            raise FairnessError(f"data file `{path}` is missing or not a file")
        if path.suffix != ".gz":
            with open(path, "rb") as fh:
                while block := fh.readlines(size * 1024):  # in C; a size hint in bytes
                    yield block, None
            return
        with gzip.open(path, "rb") as fh:
            for line in fh:  # line by line: the lines before a corrupt stretch are kept
                lines.append(line)
                if len(lines) == size:
                    yield lines, None
                    lines = []
    except FairnessError as exc:
        yield [], exc
        return
    except (EOFError, zlib.error, gzip.BadGzipFile) as exc:
        yield lines, FairnessError(f"data file `{path}` is not a valid gzip file (truncated or corrupt): {exc}")
        return
    except OSError as exc:
        yield lines, FairnessError(f"cannot read data file `{path}`: {exc.strerror or exc}")
        return
    yield lines, None


def _parse_record(path: Path, lineno: int, offset: int, raw: bytes) -> Recording | None:
    """One raw line as `iter_records` reads it (None for a blank line); a bad line is its one-line error."""
    line = decode_utf8(raw, f"data file `{path}`", base_offset=offset)
    if not line.strip():
        return None
    try:
        return Recording.model_validate_json(line)
    except ValidationError as err:
        raise FairnessError(validation_message(err, f"`{path}` line {lineno}", Recording)) from None


def iter_records(path: Path) -> Iterator[Recording]:
    for lineno, offset, lines in _iter_line_blocks(path, 1024):
        yield from _parse_block(path, lineno, offset, lines)


@functools.cache
def _record_fields() -> SchemaValidator | None:
    """`Recording`'s own field validators without the model around them (None when the model's
    schema is more than its fields: a custom `__init__` or a model validator). A field that holds
    a plain model (`params`) is validated as a dict of that model's fields (`_as_typed_dict`):
    building a model a row cost more than a third of reading the record."""
    schema = Recording.__pydantic_core_schema__
    if not _plain_model(schema):
        return None
    fields = {name: {**f, "schema": _as_typed_dict(f["schema"]) or f["schema"]}
              for name, f in schema["schema"]["fields"].items()}
    return SchemaValidator({**schema["schema"], "fields": fields}, schema.get("config"))


def _plain_model(schema: Any) -> bool:
    """A model schema that is nothing but its fields: no custom `__init__`, no model validator,
    no computed field, no extras schema."""
    return (isinstance(schema, dict) and schema.get("type") == "model" and not schema.get("custom_init")
            and not schema.get("post_init") and schema["schema"].get("type") == "model-fields"
            and not schema["schema"].get("computed_fields") and "extras_schema" not in schema["schema"])


_PLAIN_FIELD_KEYS = {"type", "schema", "metadata"}
_PLAIN_CONFIG_KEYS = {"extra_fields_behavior", "title"}


def _as_typed_dict(schema: Any) -> dict | None:
    """A plain model's schema (`_plain_model`) as a typed dict of the very same field schemas and
    extra-field rule: it accepts and refuses exactly the same input (a refused line is worded
    by the model itself), and makes a dict instead of an instance. None for anything else:
    an alias, a field-level setting or a config beyond these keeps the model."""
    if not _plain_model(schema) or not set(schema.get("config", {})) <= _PLAIN_CONFIG_KEYS:
        return None
    fields = schema["schema"]["fields"]
    if any(not set(f) <= _PLAIN_FIELD_KEYS or f["type"] != "model-field" for f in fields.values()):
        return None
    extra = schema.get("config", {}).get("extra_fields_behavior", "ignore")
    return {
        "type": "typed-dict", "extra_behavior": extra,
        "fields": {name: {"type": "typed-dict-field", "schema": f["schema"], "required": f["schema"]["type"] != "default"}
                   for name, f in fields.items()},
    }


RECORD_BLOCK = 1024
"""Lines read per block."""


def iter_record_blocks(path: Path, size: int = RECORD_BLOCK) -> Iterator[list[dict[str, Any]]]:
    """`iter_records` as blocks of field dicts (`Recording`'s fields and values, `params` a dict
    of its fields, blank lines skipped), for a streamed replay that keeps no record: each line passes the very validators
    `Recording` applies, straight from its bytes (UTF-8 checked first), without a frozen model
    per row. A line they refuse is read again as `iter_records` reads it, which skips it when
    blank and otherwise words its error, raised after the records before it are yielded: a
    reader that stops early (a replay that finds the records out of grid order) never sees it."""
    fields = _record_fields()
    validate = fields.validate_json if fields is not None else None
    for lineno, offset, lines in _iter_line_blocks(path, size):
        block: list[dict[str, Any]] = []
        try:
            for i, raw in enumerate(lines):
                if validate is not None:
                    try:
                        if raw.isascii() or _is_utf8(raw):
                            block.append(validate(raw)[0])
                            continue
                    except ValidationError:
                        pass
                rec = _parse_record(path, lineno + i, offset + sum(map(len, lines[:i])), raw)
                if rec is not None:
                    block.append(dict(rec))
        except FairnessError:
            yield block
            raise
        yield block


def _parse_block(path: Path, lineno: int, offset: int, lines: list[bytes]) -> Iterator[Recording]:
    """`iter_records` over raw lines that start at line `lineno`, byte `offset`."""
    for i, raw in enumerate(lines):
        if (rec := _parse_record(path, lineno + i, offset, raw)) is not None:
            yield rec
        offset += len(raw)


def _is_utf8(data: bytes) -> bool:
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def verify_files(directory: Path, files: Iterable[DataFile]) -> None:
    """Check every data file against its manifest's sha256 (tamper and truncation detection)."""
    for f in files:
        path = directory / f.path
        if Path(f.path).is_absolute() or ".." in Path(f.path).parts:
            raise FairnessError(f"manifest in `{directory}` names data file `{f.path}` outside the recording directory")
        if not path.is_file():
            what = "is not a regular file" if path.exists() else "is missing"
            raise FairnessError(f"data file `{path}` named in the manifest {what}")
        if sha256_file(path) != f.sha256:
            raise FairnessError(f"data file `{path}` does not match the sha256 in its manifest (edited or corrupted)")


class RecordingSet:
    """A verified, loaded recording directory."""

    def __init__(self, directory: str | Path, *, verify: bool = True):
        self.directory = Path(directory)
        self.manifest = read_manifest(self.directory)
        if verify:
            verify_files(self.directory, self.manifest.files)
        self.by_key: dict[str, Recording] = {}
        self.by_row: dict[str, Recording] = {}
        for f in self.manifest.files:
            for rec in iter_records(self.directory / f.path):
                if rec.key in self.by_key:
                    raise FairnessError(f"`{self.directory / f.path}` records row `{rec.row_id}` twice")
                self.by_key[rec.key] = rec
                self.by_row[rec.row_id] = rec

    def __len__(self) -> int:
        return len(self.by_key)

    def key_for(self, case: Case) -> str:
        return content_key(self.manifest.model.id, self.manifest.system_prompt, case.prompt, case.params, case.seed)


class ReplayProvider:
    """Returns the recorded output for each grid row; never opens a socket."""

    name = "replay"

    def __init__(self, recordings: RecordingSet, system_prompt: str, suite_name: str | None = None):
        self.recordings = recordings
        self.system_prompt = system_prompt
        if suite_name is not None and recordings.manifest.suite != suite_name:
            raise FairnessError(
                f"recordings in `{recordings.directory}` are of suite `{recordings.manifest.suite}`, "
                f"not of suite `{suite_name}`"
            )
        if recordings.manifest.system_prompt != system_prompt:
            raise FairnessError(
                f"recordings in `{recordings.directory}` were made with system prompt "
                f"{recordings.manifest.system_prompt!r}, the suite asks for {system_prompt!r}"
            )

    def replay(self, cases: list[Case]) -> list[Recording]:
        self._refuse_foreign(cases)
        out = []
        by_key = self.recordings.by_key
        for case in cases:
            rec = by_key.get(self.recordings.key_for(case))
            if rec is None:
                raise FairnessError(self._missing(case))
            _check_labels(rec, case, self.recordings.directory)
            out.append(rec)
        return out

    def replay_available(self, cases: list[Case]) -> tuple[list[Case], list[Recording]]:
        """The recorded subset of `cases` (for a set its manifest declares incomplete)."""
        self._refuse_foreign(cases)
        got = [(c, self.recordings.by_key.get(self.recordings.key_for(c))) for c in cases]
        kept = [(c, r) for c, r in got if r is not None]
        for c, r in kept:
            _check_labels(r, c, self.recordings.directory)
        return [c for c, _ in kept], [r for _, r in kept]

    def _refuse_foreign(self, cases: list[Case]) -> None:
        """A set made for this very grid (same grid hash) holds only rows of it: a record that
        answers no grid row was added afterwards, and is refused, naming the first. A set made
        for another grid of the suite (a sub-grid audit) is reported as stale instead."""
        rs = self.recordings
        if rs.manifest.grid_hash != grid_hash(cases, self.system_prompt):
            return
        wanted = {rs.key_for(c) for c in cases}
        if all(k in wanted for k in rs.by_key):
            return
        stray = next(r for k, r in rs.by_key.items() if k not in wanted)
        raise FairnessError(
            f"`{rs.directory}` holds record `{stray.row_id}` (key {stray.key[:12]}…) that is not a row of this "
            "suite's grid (another suite, model or shard?)"
        )

    def _missing(self, case: Case) -> str:
        where = (
            f"family {case.family} {case.paraphrase_id}, "
            + ", ".join(f"{k}={v}" for k, v in case.placeholders.items())
            + f", slice {case.slice_id}, regime {case.regime}, seed {case.seed}"
        )
        rs = self.recordings
        same = rs.by_row.get(case.row_id)
        if same is not None:
            hint = f"row `{case.row_id}` is recorded under key {same.key[:12]}… with a different prompt, params or seed"
        else:
            import difflib  # only when a name is wrong, not at every start-up
            near = difflib.get_close_matches(case.row_id, list(rs.by_row), n=1, cutoff=0.0)
            hint = f"nearest recorded row `{near[0]}` (key {rs.by_row[near[0]].key[:12]}…)" if near else "no rows recorded"
        tail = ""
        if not rs.manifest.complete:
            tail = (
                f"; the set is marked incomplete ({rs.manifest.rows}/{rs.manifest.expected_rows} rows): "
                "pass --allow-incomplete to audit the recorded rows"
            )
        return f"no recording for row `{case.row_id}` ({where}) in `{rs.directory}`; {hint}{tail}"


def _check_labels(rec: Recording, case: Case, directory: Path) -> None:
    """A record found by its content key must also say it answers that row and prompt."""
    if rec.row_id != case.row_id or rec.prompt != case.prompt:
        raise FairnessError(
            f"`{directory}`: the record under key {rec.key[:12]}… is labelled row `{rec.row_id}`, "
            f"but that key belongs to grid row `{case.row_id}` (edited record?)"
        )


# -- resumable writing ---------------------------------------------------------------


def repair_tail(path: Path) -> int:
    """Cut a half-written last line (an interrupted append); returns the bytes removed."""
    if not path.exists():
        return 0
    size = path.stat().st_size
    if size == 0:
        return 0
    with open(path, "rb+") as fh:
        fh.seek(-1, os.SEEK_END)
        if fh.read(1) == b"\n":
            return 0
        # walk back to the previous newline
        pos = size - 1
        block = 4096
        while pos > 0:
            start = max(0, pos - block)
            fh.seek(start)
            chunk = fh.read(pos - start)
            idx = chunk.rfind(b"\n")
            if idx >= 0:
                keep = start + idx + 1
                fh.truncate(keep)
                return size - keep
            pos = start
        fh.truncate(0)
        return size


class RecordWriter:
    """Appends records durably: one complete line per write, fsynced, never a duplicate."""

    def __init__(self, path: Path, valid_keys: set[str]):
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)
        self.removed_bytes = repair_tail(path)
        self.done: set[str] = set()
        self._sha = hashlib.sha256()
        if path.exists():
            with open(path, "rb") as fh:
                while block := fh.read(1 << 20):
                    self._sha.update(block)
            for rec in iter_records(path):
                if rec.key not in valid_keys:
                    raise FairnessError(
                        f"`{path}` holds row `{rec.row_id}` whose key is not in this grid "
                        "(another suite, model or system prompt?); use a fresh --out directory"
                    )
                self.done.add(rec.key)
        self._fh = open(path, "a", encoding="utf-8")  # noqa: SIM115 - held open across appends; closed by close()

    def append(self, recs: Iterable[Recording]) -> None:
        text = "".join(record_line(r) for r in recs if r.key not in self.done)
        if not text:
            return
        self._fh.write(text)
        self._fh.flush()
        os.fsync(self._fh.fileno())
        self._sha.update(text.encode("utf-8"))
        for r in recs:
            self.done.add(r.key)

    def sha256(self) -> str:
        """sha256 of the file as written so far, without rereading it."""
        return self._sha.hexdigest()

    def close(self) -> None:
        self._fh.close()


# -- merging shards --------------------------------------------------------------------


def merge_recordings(sources: list[Path], out: Path, cases: list[Case], *, allow_gaps: bool = False) -> Manifest:
    """Validate shard sets against one grid and write them as one set in grid order.

    Duplicates are always an error; a gap is an error unless `allow_gaps`, which writes a
    set its manifest declares incomplete (e.g. shards still running, to resume later)."""
    if not sources:
        raise FairnessError("`recordings merge` needs at least one source directory")
    sets = [RecordingSet(s) for s in sources]
    first = sets[0].manifest
    for rs in sets[1:]:
        m = rs.manifest
        for field in ("suite_hash", "grid_hash", "system_prompt"):
            if getattr(m, field) != getattr(first, field):
                raise FairnessError(f"`{rs.directory}` has a different {field} from `{sets[0].directory}`")
        if m.model.id != first.model.id:
            raise FairnessError(f"`{rs.directory}` records model `{m.model.id}`, `{sets[0].directory}` `{first.model.id}`")
    merged: dict[str, Recording] = {}
    for rs in sets:
        for key, rec in rs.by_key.items():
            if key in merged:
                raise FairnessError(f"row `{rec.row_id}` is recorded in more than one source (`{rs.directory}`)")
            merged[key] = rec
    key_of = {c.row_id: content_key(first.model.id, first.system_prompt, c.prompt, c.params, c.seed) for c in cases}
    ordered = []
    for c in cases:
        found = merged.pop(key_of[c.row_id], None)
        if found is None:
            if allow_gaps:
                continue
            raise FairnessError(f"merged recordings have a gap: row `{c.row_id}` is in no source")
        ordered.append(found)
    if merged:
        stray = next(iter(merged.values()))
        raise FairnessError(f"row `{stray.row_id}` in the sources is not part of the grid")
    out.mkdir(parents=True, exist_ok=True)
    if (out / MANIFEST).exists() or (out / RECORDS).exists():
        raise FairnessError(f"`{out}` already holds recordings; merge into an empty directory")
    write_atomic(out / RECORDS, "".join(record_line(r) for r in ordered))
    manifest = first.model_copy(
        update={
            "shard": None,
            "created": min(rs.manifest.created for rs in sets),
            "updated": today(),
            "expected_rows": len(cases),
            "rows": len(ordered),
            "complete": len(ordered) == len(cases),
            "files": [DataFile(path=RECORDS, sha256=sha256_file(out / RECORDS), rows=len(ordered))],
            "backend": first.backend.model_copy(
                update={"details": {**first.backend.details, "merged_from": sorted(rs.manifest.shard or "whole" for rs in sets)}}
            ),
        }
    )
    write_manifest(out, manifest)
    return manifest


__all__ = [
    "FileChange",
    "GridHash",
    "Manifest",
    "ManifestEvent",
    "RecordWriter",
    "RecordingSet",
    "ReplayProvider",
    "content_key",
    "grid_hash",
    "grid_hash_of_runs",
    "merge_recordings",
]
