"""Live generation with the real test model (SmolLM2-135M-Instruct GGUF) through llama.cpp.

Marked `live`: CI runs them; `pytest -m "not live"` skips them. Each test generates a
handful of short rows on the CPU.
"""

from __future__ import annotations

import pytest
import yaml

from fairness import parse_suite
from fairness.generate._loop import generate
from fairness.recordings._store import RECORDS, RecordingSet, ReplayProvider, merge_recordings

pytestmark = pytest.mark.live

TINY = {
    "name": "tiny-live",
    "system_prompt": "You are a helpful assistant.",
    "attributes": {"gender": ["man", "woman"]},
    "insertion": {"placeholder": "A", "template": "a {gender}"},
    "placeholders": {"OCC": {"values": ["nurse"], "column": "occupation"}},
    "families": [{"id": "F1", "name": "Profile", "paraphrases": ["Describe {A} who works as a {OCC} in one sentence."]}],
    "regimes": [{"name": "hot", "temperature": 0.7, "top_p": 0.95, "max_new_tokens": 24}],
    "seeds": [1, 2, 3],
}


@pytest.fixture(scope="module")
def model_path():
    from fairness.generate import _model_fetch as _models

    try:
        return _models.locate("smollm2")
    except Exception as exc:  # noqa: BLE001 - a missing file is the reason to skip
        pytest.skip(f"test model not cached: {exc}")


@pytest.fixture(scope="module")
def engine(model_path):
    pytest.importorskip("xllamacpp")
    from fairness.generate.engines.llamacpp import LlamaCppEngine

    eng = LlamaCppEngine(model_path, threads=2)
    yield eng
    eng.close()


@pytest.fixture(scope="module")
def model_info(model_path):
    from fairness.generate import _model_fetch as _models
    from fairness.generate._factory import _model_info
    from fairness.generate._options import EngineOptions

    return _model_info(EngineOptions(model="smollm2"), model_path, _models.KNOWN_MODELS["smollm2"])


def test_same_seed_and_plan_give_the_same_text_and_resume_is_byte_identical(tmp_path, engine, model_info):
    suite = parse_suite(TINY)
    whole = generate(suite, engine, model_info, tmp_path / "whole", progress=False)
    assert whole.complete and whole.written == 6
    again = generate(suite, engine, model_info, tmp_path / "again", progress=False)
    assert again.complete
    assert (tmp_path / "whole" / RECORDS).read_bytes() == (tmp_path / "again" / RECORDS).read_bytes()

    part = generate(suite, engine, model_info, tmp_path / "resumed", max_rows=2, progress=False)
    assert not part.complete and part.written == 2
    with open(tmp_path / "resumed" / RECORDS, "a") as fh:
        fh.write('{"key": "half-written')  # an interrupted append
    rest = generate(suite, engine, model_info, tmp_path / "resumed", progress=False)
    assert rest.already == 2 and rest.written == 4 and rest.complete
    assert (tmp_path / "resumed" / RECORDS).read_bytes() == (tmp_path / "whole" / RECORDS).read_bytes()

    rs = RecordingSet(tmp_path / "whole")
    recs = ReplayProvider(rs, suite.system_prompt).replay(suite.expand())
    assert all(r.output for r in recs) and {r.finish_reason for r in recs} <= {"stop", "length"}
    assert any(r.slice_id == "woman" for r in recs) and rs.manifest.model.is_audited_model is False
    assert rs.manifest.effective_sampling["hot"]["samplers"] == ["temperature", "top_p"]


def test_shards_merge_into_the_unsharded_bytes(tmp_path, engine, model_info):
    suite = parse_suite(TINY)
    generate(suite, engine, model_info, tmp_path / "whole", progress=False)
    for k in (1, 2):
        r = generate(suite, engine, model_info, tmp_path / f"s{k}", shard=(k, 2), progress=False)
        assert r.complete and r.expected == 3
    merge_recordings([tmp_path / "s2", tmp_path / "s1"], tmp_path / "merged", suite.expand())
    assert (tmp_path / "merged" / RECORDS).read_bytes() == (tmp_path / "whole" / RECORDS).read_bytes()


def test_the_cli_generates_with_the_opt_in(tmp_path, model_path, monkeypatch, capsys):
    from fairness.cli import main

    monkeypatch.delenv("FAIRNESS_ALLOW_LIVE", raising=False)
    (tmp_path / "s.yaml").write_text(yaml.safe_dump(TINY))
    code = main(["generate", "--suite", str(tmp_path / "s.yaml"), "--model", "smollm2", "--out", str(tmp_path / "g"),
                 "--live", "--max-rows", "1", "--threads", "2", "--device", "cpu", "--no-progress"])
    assert code == 0 and "1/6 rows recorded (incomplete)" in capsys.readouterr().out


@pytest.mark.usefixtures("model_path")
def test_regenerate_in_place_records_the_weights_checksum(tmp_path, monkeypatch, capsys):
    from fairness.cli import main
    from fairness.generate import _model_fetch as _models
    from fairness.recordings._store import read_manifest

    monkeypatch.setenv("FAIRNESS_ALLOW_LIVE", "1")
    (tmp_path / "s.yaml").write_text(yaml.safe_dump({**TINY, "seeds": [1]}))
    out = tmp_path / "recordings" / "smollm2"
    argv = ["generate", "--suite", str(tmp_path / "s.yaml"), "--model", "smollm2", "--out", str(out), "--threads", "2",
            "--device", "cpu", "--no-progress"]
    assert main(argv) == 0
    first = (out / RECORDS).read_bytes()
    assert main([*argv, "--regenerate"]) == 0
    assert f"rewrote `{out}` in place" in capsys.readouterr().out
    assert (out / RECORDS).read_bytes() == first  # same model, seeds and plan: the same bytes, in the same place
    model = read_manifest(out).model
    known = _models.KNOWN_MODELS["smollm2"]
    assert model.weights == {known.filename: known.sha256} and model.revision is None
    assert sorted(p.name for p in out.parent.iterdir()) == ["smollm2"]
