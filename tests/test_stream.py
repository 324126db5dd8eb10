"""The streamed run (read → score → per-cell aggregates in chunks) equals the in-memory audit."""

from __future__ import annotations

import json
import random
import shutil
from pathlib import Path

import numpy as np

from fairness._util.canonical import sha256_file
from fairness.audit._audit import AuditOptions, audit
from fairness.pipeline._options import RunOptions
from fairness.pipeline._run import run_audit
from fairness.pipeline._stream import stream_cells
from fairness.recordings._store import RecordingSet, ReplayProvider, grid_hash, read_manifest
from fairness.report._render import results_json
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
    lines: list[list[str]] = [[], []]
    tables, hashes = [], []
    for k, chunk in enumerate((10_000, 777)):
        _, table, grid = stream_cells(suite, REC, manifest, OPTS, lambda c, *_, k=k: lines[k].append(len(c)), chunk=chunk)
        tables.append(table)
        hashes.append(grid)
    a, b = tables
    assert sum(lines[0]) == sum(lines[1]) == 3200 and max(lines[1]) == 777
    # the grid hash made on the way is the grid's own, however the rows were chunked
    assert hashes[0] == hashes[1] == grid_hash(suite.expand(), suite.system_prompt) == manifest.grid_hash
    assert np.array_equal(a.n, b.n) and np.array_equal(a.sums, b.sums) and np.array_equal(a.sumsq, b.sumsq)
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


def test_content_keys_equal_content_key():
    from fairness.recordings._store import ContentKeys, content_key

    suite = load_suite(SUITE)
    keys = ContentKeys("m", "sys")
    cases = suite.expand()
    for case in [*cases[:12], cases[40], cases[3], cases[3]]:
        assert keys(case.prompt, case.params, case.seed) == content_key("m", "sys", case.prompt, case.params, case.seed)
