"""The streamed run (read → score → per-cell aggregates in chunks) equals the in-memory audit."""

from __future__ import annotations

import gzip
import json
import random
import shutil
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

import numpy as np
import pytest

from fairness._util.canonical import sha256_file
from fairness._util.errors import FairnessError
from fairness.audit._audit import AuditOptions, audit
from fairness.pipeline._options import RunOptions
from fairness.pipeline._run import run_audit
from fairness.pipeline._stream import stream_cells
from fairness.recordings import _store
from fairness.recordings._store import (
    RecordingSet,
    ReplayProvider,
    grid_hash,
    iter_record_blocks,
    iter_records,
    read_manifest,
)
from fairness.report._render import results_json
from fairness.suite._runs import seed_runs
from fairness.suite._suite import load_suite

ROOT = Path(__file__).resolve().parents[1]
REC = ROOT / "recordings/fairness-cards/qwen-v0.1/SmolLM2-135M-Instruct-Q4_1"
SUITE = "fairness-cards/qwen-v0.1"
OPTS = AuditOptions(bootstrap=200, permutations=200)


def _results(path: Path) -> dict:
    data = json.loads((path / "results.json").read_text(encoding="utf-8"))
    data["recordings"].pop("path")
    return data


def test_streamed_run_equals_the_in_memory_audit(tmp_path):
    out = run_audit(RunOptions(suite=SUITE, recordings=REC, out=tmp_path / "out", audit=OPTS))
    suite = load_suite(SUITE)
    cases = suite.expand()
    rs = RecordingSet(REC)
    recs = ReplayProvider(rs, suite.system_prompt).replay(cases)
    run, _ = audit(suite, cases, recs, rs.manifest, OPTS, recordings_path=out.run.recordings.path,
                   manifest_sha256=sha256_file(REC / "manifest.json"))
    assert json.loads(results_json(run)) == json.loads((tmp_path / "out/results.json").read_text(encoding="utf-8"))


def test_chunk_size_does_not_change_the_aggregates():
    suite = load_suite(SUITE)
    manifest = read_manifest(REC)
    rows: list[list[int]] = [[], [], []]
    tables, hashes = [], []
    for k, chunk in enumerate((10_000, 777, 3)):  # 3: each prompt's 5 seeds split into runs of 3 and 2
        _, table, grid = stream_cells(suite, REC, manifest, OPTS, lambda runs, *_, k=k: rows[k].append(sum(map(len, runs))),
                                      chunk=chunk)
        tables.append(table)
        hashes.append(grid)
    # whole runs of a prompt's seeds: 777 rows asked, 780 taken (156 prompts × 5 seeds)
    assert list(map(sum, rows)) == [3200, 3200, 3200] and max(rows[1]) == 780
    assert rows[2] == [3, *[5] * 639, 2]  # runs of 3, 2, 3, 2 …: a chunk takes runs until it holds 3 rows
    # the grid hash made on the way is the grid's own, however the rows were chunked
    assert len(set(hashes)) == 1 and hashes[0] == grid_hash(suite.expand(), suite.system_prompt) == manifest.grid_hash
    a = tables[0]
    for b in tables[1:]:
        assert np.array_equal(a.n, b.n) and np.array_equal(a.sums, b.sums) and np.array_equal(a.sumsq, b.sumsq)
        assert np.array_equal(a.seed_n, b.seed_n) and np.array_equal(a.seed_sums, b.seed_sums)
        assert all(np.array_equal(a.cell_codes[f], b.cell_codes[f]) for f in a.cell_codes)
        assert all(np.array_equal(a.hist[m][1], b.hist[m][1]) for m in a.hist)


def test_records_out_of_grid_order_fall_back_to_the_in_memory_replay(tmp_path):
    shuffled = tmp_path / "rec"
    shutil.copytree(REC, shuffled)
    data = shuffled / "records.jsonl"
    rows = data.read_text(encoding="utf-8").splitlines(keepends=True)
    random.Random(4).shuffle(rows)
    data.write_text("".join(rows), encoding="utf-8")
    manifest = json.loads((shuffled / "manifest.json").read_text(encoding="utf-8"))
    manifest["files"][0]["sha256"] = sha256_file(data)
    (shuffled / "manifest.json").write_text(json.dumps(manifest, indent=2), encoding="utf-8")
    run_audit(RunOptions(suite=SUITE, recordings=REC, out=tmp_path / "a", audit=OPTS))
    run_audit(RunOptions(suite=SUITE, recordings=shuffled, out=tmp_path / "b", audit=OPTS))
    a, b = _results(tmp_path / "a"), _results(tmp_path / "b")
    a["recordings"].pop("manifest_sha256")
    b["recordings"].pop("manifest_sha256")
    assert a == b
    assert (tmp_path / "a/transcripts.jsonl").read_bytes() == (tmp_path / "b/transcripts.jsonl").read_bytes()


def test_transcript_lines_are_the_rows_json(tmp_path):
    """Each line built from pieces is exactly `json.dumps(row, ensure_ascii=False)` of its row."""
    run_audit(RunOptions(suite=SUITE, recordings=REC, out=tmp_path / "out", audit=OPTS))
    lines = (tmp_path / "out/transcripts.jsonl").read_text(encoding="utf-8").splitlines()
    assert len(lines) == 3200
    keys = ["row_id", "family", "paraphrase_id", "placeholders", "slice", "slice_id", "regime", "seed", "prompt",
            "output", "finish_reason", "scores"]
    for line in lines:
        row = json.loads(line)
        assert list(row) == keys
        assert line == json.dumps(row, ensure_ascii=False)


def test_json_string_bodies_escape_as_json_dumps():
    """The batched string encoder writes each text exactly as `json.dumps(..., ensure_ascii=False)`,
    including texts that hold the split marker, trailing backslashes and every control character;
    a lone surrogate (which pydantic-core cannot encode) falls back to the per-text encoder."""
    from fairness.pipeline._run import json_string_bodies

    texts = ['plain', '', '","', 'a\\","b', 'ends in \\', '"quoted"', "".join(map(chr, range(32))) + "\x7f",
             "caf\u00e9 \u2019 \U0001f600 \u0130", "\u2028\u2029"]
    expected = [json.dumps(t, ensure_ascii=False)[1:-1] for t in texts]
    assert json_string_bodies(texts) == expected
    assert json_string_bodies([*texts, "lone \ud800"]) == [*expected, json.dumps("lone \ud800", ensure_ascii=False)[1:-1]]
    assert json_string_bodies([]) == []


def test_content_keys_equal_content_key():
    from fairness.recordings._store import ContentKeys, content_key

    suite = load_suite(SUITE)
    keys = ContentKeys("m", "sys")
    cases = suite.expand()
    rows = [*cases[:12], cases[40], cases[3], cases[3]]
    # what a batch leaves (the prompt's hash state) carries over to the next batch
    assert keys.of_runs(seed_runs(rows[:5])) + keys.of_runs(seed_runs(rows[5:])) == [
        content_key("m", "sys", case.prompt, case.params, case.seed) for case in rows
    ]


def _record_lines() -> list[str]:
    return (REC / "records.jsonl").read_text(encoding="utf-8").splitlines(keepends=True)


def _set_with(tmp_path: Path, lines: list[str]) -> Path:
    """A copy of the committed set holding `lines` as its records (the manifest's sha256 updated)."""
    rec = tmp_path / "rec"
    shutil.copytree(REC, rec)
    (rec / "records.jsonl").write_text("".join(lines), encoding="utf-8")
    manifest = json.loads((rec / "manifest.json").read_text(encoding="utf-8"))
    manifest["files"][0]["sha256"] = sha256_file(rec / "records.jsonl")
    (rec / "manifest.json").write_text(json.dumps(manifest, indent=2), encoding="utf-8")
    return rec


def _blocks(path: Path) -> Iterator[dict]:
    return (fields for block in iter_record_blocks(path) for fields in block)


def _read(reader: Callable[[Path], Iterable], path: Path) -> tuple[list, str]:
    """What a reader yields before it stops, and its error."""
    got: list = []
    with pytest.raises(FairnessError) as err:
        got.extend(reader(path))  # keeps what came before the error
    return got, str(err.value)


@pytest.mark.parametrize("gz", [False, True])
def test_record_blocks_are_iter_records(tmp_path, gz):
    """Blocks of field dicts hold exactly `iter_records`' records: blank lines (`str.strip`'s blanks,
    \\x1c included) skipped, non-ASCII text kept, across several blocks."""
    lines = _record_lines()[:2500]
    lines[5] = "\n"
    lines[1500] = "  \x1c\n"
    lines[7] = lines[7].replace('"output":"', '"output":"caf\u00e9 \u2019 ')
    path = tmp_path / ("records.jsonl.gz" if gz else "records.jsonl")
    data = "".join(lines).encode("utf-8")
    path.write_bytes(gzip.compress(data) if gz else data)
    want = [_fields(r) for r in iter_records(path)]
    assert len(want) == 2498 and want[6]["output"].startswith("caf\u00e9 \u2019 ")
    assert list(_blocks(path)) == want


def _fields(rec) -> dict:
    """A record as `iter_record_blocks` gives it: its fields, `params` a dict of its own."""
    return {**dict(rec), "params": rec.params.model_dump()}


@pytest.mark.parametrize("bad", [
    lambda line: line.replace('"seed":', '"seed_":'),  # a record the validators refuse
    lambda line: line.replace('"output":"', '"output":"\udcff'),  # bytes that are not UTF-8
    # `params` is read as a dict of its fields, refusing what `SamplingParams` refuses
    lambda line: line.replace('"params":{', '"params":{"top_k":5,'),
    lambda line: line.replace('"params":{', '"params":{"temperature":9,', 1).replace(',"temperature":0.2', ''),
    lambda line: line.replace('"max_new_tokens":160,', ''),
    lambda line: line.replace('"max_new_tokens":160', '"max_new_tokens":"many"'),
    lambda line: line.replace('"params":{"max_new_tokens":160,"temperature":0.2,"top_p":0.9}', '"params":[160,0.2,0.9]'),
    lambda line: line.replace('"params":{"max_new_tokens":160,"temperature":0.2,"top_p":0.9}', '"params":null'),
    lambda line: line.replace('"top_p":0.9', '"top_p":NaN'),
])
def test_a_bad_line_in_a_later_block_is_iter_records_error(tmp_path, bad):
    lines = _record_lines()[:2000]
    lines[1800] = bad(lines[1800])
    path = tmp_path / "records.jsonl"
    path.write_bytes("".join(lines).encode("utf-8", "surrogateescape"))
    blocks, blocks_error = _read(_blocks, path)
    records, records_error = _read(iter_records, path)
    assert blocks_error == records_error and (" line 1801" in blocks_error or "byte offset" in blocks_error)
    assert blocks == [_fields(r) for r in records] and len(blocks) == 1800


def test_over_the_size_limit_after_the_lines_within_it(tmp_path, monkeypatch):
    lines = _record_lines()[:1500]
    path = tmp_path / "records.jsonl"
    path.write_text("".join(lines), encoding="utf-8")
    monkeypatch.setattr(_store, "MAX_RECORDS_BYTES", sum(len(x.encode()) for x in lines[:1200]) + 5)
    blocks, blocks_error = _read(_blocks, path)
    records, records_error = _read(iter_records, path)
    assert blocks_error == records_error and "byte limit" in blocks_error
    assert len(blocks) == len(records) == 1200


def test_an_out_of_order_row_falls_back_before_a_later_bad_line(tmp_path):
    """Row 3 records row 1 again: the stream stops there and the in-memory replay names the
    duplicate, as it did row by row, though the block read ahead holds a bad last line."""
    lines = _record_lines()
    lines[2] = lines[0]
    lines[-1] = lines[-1].replace('"seed":', '"seed_":')
    rec = _set_with(tmp_path, lines)
    with pytest.raises(FairnessError, match="twice"):
        run_audit(RunOptions(suite=SUITE, recordings=rec, out=tmp_path / "out", audit=OPTS))


def test_a_refused_run_leaves_no_folder_behind(tmp_path):
    """Transcripts are written into the staging directory as the rows stream; a bad record met
    on the way removes it and the folders made to hold it, as if nothing had started."""
    lines = _record_lines()
    lines[-1] = lines[-1].replace('"seed":', '"seed_":')
    rec = _set_with(tmp_path, lines)
    with pytest.raises(FairnessError, match=" line 3200"):
        run_audit(RunOptions(suite=SUITE, recordings=rec, out=tmp_path / "new/deep/out", audit=OPTS))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["rec"]
