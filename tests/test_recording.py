"""The recording store: content keys, replay, tamper detection, resumable writes, merges."""

from __future__ import annotations

import json
import shutil

import pytest
from conftest import DEFAULT_RECORDINGS, write_recording_set

from fairness import FairnessError, SamplingParams
from fairness._util.errors import LiveGenerationRefused
from fairness.cli import main
from fairness.generate._loop import parse_shard, require_live_opt_in, shard_cases
from fairness.recordings._store import (
    RECORDS,
    RecordingSet,
    RecordWriter,
    ReplayProvider,
    content_key,
    merge_recordings,
    record_line,
    repair_tail,
)


class TestContentKey:
    def test_integral_floats_and_ints_give_one_key(self):
        a = content_key("m", "sys", "p", SamplingParams(temperature=0, top_p=1, max_new_tokens=16), 1)
        b = content_key("m", "sys", "p", SamplingParams(temperature=0.0, top_p=1.0, max_new_tokens=16), 1)
        assert a == b

    @pytest.mark.parametrize("change", ["model", "system", "prompt", "temperature", "seed"])
    def test_every_input_changes_the_key(self, change):
        base = {"model_id": "m", "system_prompt": "s", "prompt": "p", "params": SamplingParams(temperature=0.2, top_p=0.9, max_new_tokens=16), "seed": 1}
        other = dict(base)
        if change == "model":
            other["model_id"] = "m2"
        elif change == "system":
            other["system_prompt"] = "s2"
        elif change == "prompt":
            other["prompt"] = "p2"
        elif change == "temperature":
            other["params"] = SamplingParams(temperature=0.7, top_p=0.9, max_new_tokens=16)
        else:
            other["seed"] = 2
        assert content_key(**base) != content_key(**other)


class TestCommittedRecordings:
    def test_checksums_verify_and_every_recorded_row_belongs_to_the_grid(self, default_suite):
        rs = RecordingSet(DEFAULT_RECORDINGS)
        cases, recs = ReplayProvider(rs, default_suite.system_prompt).replay_available(default_suite.expand())
        assert len(recs) == len(rs) == rs.manifest.rows > 0
        assert all(r.row_id == c.row_id and r.output for c, r in zip(cases, recs, strict=True))

    def test_replay_covers_every_row_of_the_default_suite(self, default_suite):
        rs = RecordingSet(DEFAULT_RECORDINGS)
        if not rs.manifest.complete:
            pytest.skip(f"committed recordings are still being generated ({rs.manifest.rows}/3200 rows); "
                        "the generation resumes where it stopped")
        recs = ReplayProvider(rs, default_suite.system_prompt).replay(default_suite.expand())
        assert len(recs) == 3200 == len(rs)
        assert rs.manifest.complete and rs.manifest.rows == 3200
        assert all(r.output == r.output.strip() and r.output for r in recs)
        assert {r.finish_reason for r in recs} <= {"stop", "length"}

    def test_manifest_says_plainly_it_is_the_test_model(self):
        m = RecordingSet(DEFAULT_RECORDINGS, verify=False).manifest
        assert m.model.is_audited_model is False
        assert "NOT outputs of the audited model" in m.model.note
        assert m.model.weights_sha256 == "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"
        assert m.backend.engine == "llamacpp" and m.effective_sampling["low-entropy"]["samplers"] == ["temperature", "top_p"]

    def test_no_absolute_paths_in_committed_files(self):
        for path in DEFAULT_RECORDINGS.iterdir():
            text = path.read_text()
            assert "/root/" not in text and "/home/" not in text and "/tmp/" not in text and "/work/" not in text

    def test_verify_command(self, capsys):
        complete = RecordingSet(DEFAULT_RECORDINGS, verify=False).manifest.complete
        assert main(["recordings", "verify", str(DEFAULT_RECORDINGS)]) == (0 if complete else 2)
        out = capsys.readouterr()
        assert ("cover all 3200 grid rows" in out.out) if complete else ("no recording for row" in out.err)


@pytest.fixture()
def small_set(tmp_path, default_suite):
    return write_recording_set(tmp_path / "rec", default_suite, lambda c: f"output for {c.row_id}")


class TestReplayErrors:
    def test_tampered_data_file_names_the_file(self, small_set, capsys):
        data = small_set / RECORDS
        data.write_text(data.read_text().replace("output for F1.p1.CEO", "output for F9.p1.CEO", 1))
        assert main(["run", "--recordings", str(small_set), "--out", str(small_set.parent / "out")]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "records.jsonl" in err and "sha256" in err
        assert not (small_set.parent / "out").exists()

    def test_missing_row_names_coordinates_and_nearest_key(self, tmp_path, default_suite, capsys):
        cases = default_suite.expand()
        d = write_recording_set(tmp_path / "rec", default_suite, lambda c: "x", cases=cases[:-1])
        assert main(["recordings", "verify", str(d)]) == 2
        err = capsys.readouterr().err
        assert "no recording for row `F4.p5.teacher.woman_Muslim.high-entropy.s5`" in err
        assert "slice woman_Muslim, regime high-entropy, seed 5" in err
        assert "nearest recorded row `F4.p5.teacher.woman_Muslim.high-entropy.s4`" in err

    def test_unreadable_directory(self, tmp_path, capsys):
        assert main(["run", "--recordings", str(tmp_path / "nope"), "--out", str(tmp_path / "o")]) == 2
        assert "does not exist" in capsys.readouterr().err

    def test_replay_opens_no_socket(self, small_set, default_suite, monkeypatch):
        import socket

        def refuse(*a, **k):
            raise AssertionError("replay opened a socket")

        monkeypatch.setattr(socket, "socket", refuse)
        monkeypatch.setattr(socket, "create_connection", refuse)
        recs = ReplayProvider(RecordingSet(small_set), default_suite.system_prompt).replay(default_suite.expand())
        assert len(recs) == 3200


class TestResumableWriter:
    def test_torn_last_line_is_cut(self, tmp_path):
        p = tmp_path / "r.jsonl"
        p.write_bytes(b'{"a":1}\n{"b":2}\n{"c":')
        assert repair_tail(p) == 5
        assert p.read_bytes() == b'{"a":1}\n{"b":2}\n'
        assert repair_tail(p) == 0

    def test_writer_skips_done_rows_and_refuses_foreign_rows(self, small_set, default_suite, tmp_path):
        rs = RecordingSet(small_set)
        recs = list(rs.by_key.values())
        path = tmp_path / "w" / RECORDS
        w = RecordWriter(path, set(rs.by_key))
        w.append(recs[:3])
        w.append(recs[:5])  # the first three are not written twice
        w.close()
        assert len(path.read_text().splitlines()) == 5
        with pytest.raises(FairnessError, match="whose key is not in this grid"):
            RecordWriter(path, set(list(rs.by_key)[10:]))


class TestShardsAndMerge:
    def test_shards_partition_the_grid(self, default_suite):
        cases = default_suite.expand()
        parts = [shard_cases(cases, (k, 3)) for k in (1, 2, 3)]
        assert sorted(c.index for p in parts for c in p) == list(range(3200))
        assert {c.family for c in parts[2]} == {"F1", "F2", "F3", "F4"}

    @pytest.mark.parametrize("bad", ["3", "0/2", "3/2", "a/b"])
    def test_bad_shard_spec(self, bad):
        with pytest.raises(FairnessError, match="--shard"):
            parse_shard(bad)

    def test_merge_validates_and_orders(self, tmp_path, default_suite):
        cases = default_suite.expand()
        text = lambda c: f"o {c.row_id}"  # noqa: E731
        a = write_recording_set(tmp_path / "a", default_suite, text, cases=shard_cases(cases, (1, 2)))
        b = write_recording_set(tmp_path / "b", default_suite, text, cases=shard_cases(cases, (2, 2)))
        whole = write_recording_set(tmp_path / "whole", default_suite, text)
        m = merge_recordings([b, a], tmp_path / "merged", cases)
        assert m.complete and m.rows == 3200
        assert (tmp_path / "merged" / RECORDS).read_bytes() == (whole / RECORDS).read_bytes()

    def test_merge_reports_gaps_and_duplicates(self, tmp_path, default_suite, capsys):
        cases = default_suite.expand()
        a = write_recording_set(tmp_path / "a", default_suite, lambda c: "x", cases=cases[:2000])
        b = write_recording_set(tmp_path / "b", default_suite, lambda c: "x", cases=cases[1999:3100])
        assert main(["recordings", "merge", str(a), str(b), "--out", str(tmp_path / "m1")]) == 2
        assert "more than one source" in capsys.readouterr().err
        c = write_recording_set(tmp_path / "c", default_suite, lambda c: "x", cases=cases[2000:3100])
        assert main(["recordings", "merge", str(a), str(c), "--out", str(tmp_path / "m2")]) == 2
        assert "gap: row `F4" in capsys.readouterr().err


class TestLiveOptIn:
    def test_refused_without_flag_or_env(self, monkeypatch):
        monkeypatch.delenv("FAIRNESS_ALLOW_LIVE", raising=False)
        with pytest.raises(FairnessError, match="opt-in"):
            require_live_opt_in(False)

    def test_cli_refuses_before_loading_anything(self, monkeypatch, tmp_path, capsys):
        monkeypatch.delenv("FAIRNESS_ALLOW_LIVE", raising=False)
        assert main(["generate", "--model", "smollm2", "--out", str(tmp_path / "g")]) == 2
        assert "live generation is opt-in: pass --live or set FAIRNESS_ALLOW_LIVE=1" in capsys.readouterr().err
        assert not (tmp_path / "g").exists()

    def test_env_opt_in(self, monkeypatch):
        monkeypatch.setenv("FAIRNESS_ALLOW_LIVE", "1")
        assert require_live_opt_in(False) is None  # the variable stands in for --live
        monkeypatch.setenv("FAIRNESS_ALLOW_LIVE", "0")
        with pytest.raises(LiveGenerationRefused):
            require_live_opt_in(False)


def test_record_lines_are_canonical(small_set):
    rec = next(iter(RecordingSet(small_set).by_key.values()))
    line = record_line(rec)
    assert line.endswith("\n") and json.loads(line)["key"] == rec.key
    assert list(json.loads(line)) == sorted(json.loads(line))
    shutil.rmtree(small_set)


def test_merge_with_gaps_writes_a_declared_incomplete_set(tmp_path, default_suite, capsys):
    cases = default_suite.expand()
    a = write_recording_set(tmp_path / "a", default_suite, lambda c: "x", cases=shard_cases(cases, (1, 2))[:100])
    b = write_recording_set(tmp_path / "b", default_suite, lambda c: "x", cases=shard_cases(cases, (2, 2))[:90])
    assert main(["recordings", "merge", str(a), str(b), "--out", str(tmp_path / "m"), "--allow-gaps"]) == 0
    assert "190 rows, incomplete, 3010 rows to go" in capsys.readouterr().out
    rs = RecordingSet(tmp_path / "m")
    assert rs.manifest.complete is False and rs.manifest.rows == 190
    ids = [json.loads(line)["row_id"] for line in (tmp_path / "m" / RECORDS).read_text().splitlines()]
    order = {c.row_id: c.index for c in cases}
    assert ids == sorted(ids, key=order.__getitem__)
