"""`recordings reseal`: a deliberate edit is resealed on the record; an unsealed edit is still refused."""

from __future__ import annotations

import json

import pytest
from conftest import write_recording_set

from fairness._util.canonical import sha256_file
from fairness.cli import main
from fairness.recordings._store import MANIFEST, RECORDS, RecordingSet, read_manifest


@pytest.fixture()
def small_set(tmp_path, default_suite):
    return write_recording_set(tmp_path / "rec", default_suite, lambda c: f"output for {c.row_id}")


def _edit(rec_dir) -> None:
    data = rec_dir / RECORDS
    data.write_text(data.read_text().replace("output for F1.p1.CEO", "corrected output for F1.p1.CEO", 1))


def test_an_edit_is_refused_until_resealed_and_the_history_names_why(small_set, capsys):
    old_sha = read_manifest(small_set).files[0].sha256
    _edit(small_set)
    out = small_set.parent / "out"
    assert main(["run", "--recordings", str(small_set), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "does not match the sha256 in its manifest" in err
    assert main(["recordings", "verify", str(small_set)]) == 2
    capsys.readouterr()

    assert main(["recordings", "reseal", str(small_set), "--reason", "fixed a mis-recorded answer", "--by", "Ada"]) == 0
    printed = capsys.readouterr().out
    new_sha = sha256_file(small_set / RECORDS)
    assert f"{RECORDS}: sha256 {old_sha} -> {new_sha}" in printed
    assert "fixed a mis-recorded answer" in printed

    m = read_manifest(small_set)
    assert m.files[0].sha256 == new_sha and m.rows == 3200 and m.complete
    [event] = m.history
    assert (event.action, event.by, event.reason) == ("reseal", "Ada", "fixed a mis-recorded answer")
    assert event.at == m.updated and event.at.endswith("Z")
    assert [(c.path, c.old_sha256, c.new_sha256) for c in event.changes] == [(RECORDS, old_sha, new_sha)]

    assert main(["recordings", "verify", str(small_set)]) == 0
    assert main(["run", "--recordings", str(small_set), "--out", str(out)]) == 0  # the gate passes: a verdict, not a refusal
    assert (out / "results.json").is_file()


def test_a_second_reseal_appends_and_an_unchanged_set_is_left_alone(small_set, capsys):
    _edit(small_set)
    assert main(["recordings", "reseal", str(small_set), "--reason", "first", "--by", "A"]) == 0
    before = (small_set / MANIFEST).read_bytes()
    assert main(["recordings", "reseal", str(small_set), "--reason", "nothing to do", "--by", "A"]) == 0
    assert "checksums already match; nothing resealed" in capsys.readouterr().out
    assert (small_set / MANIFEST).read_bytes() == before
    data = small_set / RECORDS
    data.write_text(data.read_text().replace("output for F2.p1", "second fix for F2.p1", 1))
    assert main(["recordings", "reseal", str(small_set), "--reason", "second"]) == 0
    assert [e.reason for e in read_manifest(small_set).history] == ["first", "second"]
    assert read_manifest(small_set).history[1].by  # git config, else $USER, else `unknown`


def test_records_that_no_longer_parse_are_refused_and_nothing_is_written(small_set, capsys):
    before = (small_set / MANIFEST).read_bytes()
    data = small_set / RECORDS
    lines = data.read_text().splitlines(keepends=True)
    lines[3] = lines[3].replace('"finish_reason":"', '"finish_reason":"x', 1)
    data.write_text("".join(lines))
    assert main(["recordings", "reseal", str(small_set), "--reason", "oops"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("error: cannot reseal") and "line 4" in err
    assert (small_set / MANIFEST).read_bytes() == before


def test_a_duplicated_record_is_refused(small_set, capsys):
    data = small_set / RECORDS
    first = data.read_text().splitlines(keepends=True)[0]
    data.write_text(data.read_text() + first)
    assert main(["recordings", "reseal", str(small_set), "--reason", "dup"]) == 2
    assert "twice" in capsys.readouterr().err


def test_reason_is_required_and_must_not_be_blank(small_set, capsys):
    assert main(["recordings", "reseal", str(small_set)]) == 2
    assert "--reason" in capsys.readouterr().err
    assert main(["recordings", "reseal", str(small_set), "--reason", "  "]) == 2
    assert "non-blank --reason" in capsys.readouterr().err


def test_manifests_without_history_still_load_and_are_written_without_one(small_set):
    raw = json.loads((small_set / MANIFEST).read_text())
    assert "history" not in raw
    assert RecordingSet(small_set).manifest.history == []
