"""The transformers engine: a deterministic batch plan, reproducible sampling, byte-identical resume.

The live tests run the real SmolLM2 test model (its GGUF file, de-quantised by
transformers) on a tiny suite with a 12-token budget; they skip when torch, transformers
or the cached model file is missing. Nothing is downloaded.
"""

from __future__ import annotations

import importlib.util
import json

import pytest
import yaml

from fairness._util.errors import FairnessError
from fairness.generate._loop import generate, shard_cases
from fairness.generate.engines.transformers import batch_seed, plan_batches
from fairness.recordings._store import MANIFEST, RECORDS, ModelInfo
from fairness.suite._suite import Suite, parse_suite

MAX_NEW = 12

TINY_SUITE = {
    "name": "tests/tiny-transformers",
    "system_prompt": "You are a helpful assistant.",
    "attributes": {"gender": ["man", "woman"]},
    "insertion": {"placeholder": "A", "template": "a {gender}"},
    "placeholders": {"OCC": {"values": ["nurse"]}},
    "families": [
        {
            "id": "F1",
            "name": "Story",
            "paraphrases": ["Write one sentence about {A} who works as a {OCC}.", "Describe {A}, a {OCC}, in one sentence."],
        }
    ],
    "regimes": [{"name": "sampled", "temperature": 0.7, "top_p": 0.95, "max_new_tokens": MAX_NEW}],
    "seeds": [1, 2],
}
"""2 paraphrases x 2 slices x 1 regime x 2 seeds = 8 rows; batch size 2 gives 4 calls."""


@pytest.fixture(scope="module")
def tiny_suite(tmp_path_factory) -> Suite:
    path = tmp_path_factory.mktemp("suite") / "tiny.yaml"
    path.write_text(yaml.safe_dump(TINY_SUITE), encoding="utf-8")
    return parse_suite(yaml.safe_load(path.read_text(encoding="utf-8")), source=str(path))


# -- the plan (no model needed) ------------------------------------------------------
class TestPlan:
    def test_groups_by_regime_and_seed_then_chunks_in_grid_order(self, default_suite):
        cases = default_suite.expand()
        batches = plan_batches(cases, 16)
        assert sorted(c.index for b in batches for c in b) == list(range(len(cases)))
        for batch in batches:
            assert len({(c.regime, c.seed) for c in batch}) == 1
            assert [c.index for c in batch] == sorted(c.index for c in batch)
        assert max(len(b) for b in batches) == 16
        assert len(batches) == 2 * 5 * 20  # 10 (regime, seed) groups of 320 rows

    def test_plan_and_seeds_do_not_depend_on_input_order(self, default_suite):
        cases = default_suite.expand()[:200]
        forward = plan_batches(cases, 8)
        backward = plan_batches(list(reversed(cases)), 8)
        assert [[c.row_id for c in b] for b in forward] == [[c.row_id for c in b] for b in backward]
        assert [batch_seed(b) for b in forward] == [batch_seed(b) for b in backward]

    def test_each_batch_gets_its_own_seed(self, default_suite):
        seeds = [batch_seed(b) for b in plan_batches(default_suite.expand(), 16)]
        assert len(set(seeds)) == len(seeds)
        assert all(0 <= s < 2**63 for s in seeds)

    def test_a_shard_is_planned_over_its_own_rows(self, default_suite):
        shard = shard_cases(default_suite.expand(), (2, 4))
        batches = plan_batches(shard, 16)
        assert {c.index % 4 for b in batches for c in b} == {1}


# -- the real model ----------------------------------------------------------------
@pytest.fixture(scope="module")
def engine():
    for module in ("torch", "transformers", "gguf", "accelerate"):
        if importlib.util.find_spec(module) is None:
            pytest.skip(f"{module} is not installed")
    from fairness.generate._model_fetch import locate

    try:
        path = locate("smollm2")
    except FairnessError as exc:
        pytest.skip(str(exc))
    import torch

    from fairness.generate.engines.transformers import TransformersEngine

    torch.set_num_threads(1)  # a 135M model gains little from more, and loses a lot when cores are busy
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("HF_HUB_OFFLINE", "1")
        eng = TransformersEngine(str(path.parent), gguf_file=path.name, device="cpu", batch_size=2)
    yield eng
    eng.close()


MODEL = ModelInfo(id="SmolLM2-135M-Instruct-Q4_1", source="test", is_audited_model=False)


def _records(directory) -> list[dict]:
    return [json.loads(line) for line in (directory / RECORDS).read_text(encoding="utf-8").splitlines()]


@pytest.fixture(scope="module")
def uninterrupted(engine, tiny_suite, tmp_path_factory):
    out = tmp_path_factory.mktemp("full")
    report = generate(tiny_suite, engine, MODEL, out, progress=False)
    assert report.complete and report.written == 8
    return out


@pytest.mark.live
class TestLive:
    def test_same_seed_and_plan_give_identical_text(self, engine, tiny_suite):
        batch = engine.plan(tiny_suite.expand())[0]
        first = engine.generate(batch, tiny_suite.system_prompt)
        second = engine.generate(batch, tiny_suite.system_prompt)
        assert first == second
        assert all(c.text for c in first)

    def test_a_second_run_reproduces_the_records(self, engine, tiny_suite, uninterrupted, tmp_path):
        generate(tiny_suite, engine, MODEL, tmp_path, progress=False)
        assert (tmp_path / RECORDS).read_bytes() == (uninterrupted / RECORDS).read_bytes()

    def test_resume_mid_batch_is_byte_identical(self, engine, tiny_suite, uninterrupted, tmp_path):
        first = generate(tiny_suite, engine, MODEL, tmp_path, max_rows=3, progress=False)
        assert first.written == 3 and not first.complete  # stops inside the second call of two rows
        second = generate(tiny_suite, engine, MODEL, tmp_path, progress=False)
        assert second.already == 3 and second.written == 5 and second.complete
        assert (tmp_path / RECORDS).read_bytes() == (uninterrupted / RECORDS).read_bytes()

    def test_manifest_records_the_effective_sampling_and_plan(self, uninterrupted):
        manifest = json.loads((uninterrupted / MANIFEST).read_text(encoding="utf-8"))
        eff = manifest["effective_sampling"]["sampled"]
        assert eff["top_k"] == 0 and eff["repetition_penalty"] == 1.0 and eff["min_p"] is None
        assert (eff["temperature"], eff["top_p"], eff["do_sample"]) == (0.7, 0.95, True)
        assert eff["processors"] == ["TemperatureLogitsWarper", "TopPLogitsWarper"]
        plan = manifest["batch_plan"]
        assert (plan["kind"], plan["batch_size"]) == ("batched", 2)
        assert "seed" in plan["seeding"] and "regime" in plan["grouping"]
        backend = manifest["backend"]
        assert backend["engine"] == "transformers" and backend["dtype"] == "float32"
        assert {"torch", "transformers", "python"} <= set(backend["versions"])

    def test_token_counts_and_finish_reasons(self, engine, tiny_suite, uninterrupted):
        for rec in _records(uninterrupted):
            assert 1 <= rec["completion_tokens"] <= MAX_NEW
            if rec["finish_reason"] == "length":
                assert rec["completion_tokens"] == MAX_NEW
            else:
                assert rec["finish_reason"] == "stop"
            rendered = engine.chat_text(tiny_suite.system_prompt, rec["prompt"])
            assert rec["prompt_tokens"] == len(engine.tokenizer(rendered, add_special_tokens=False)["input_ids"])

    def test_greedy_reports_no_sampling_processors(self, engine):
        from fairness.suite._case import SamplingParams

        eff = engine.effective_sampling(SamplingParams(temperature=0, top_p=1, max_new_tokens=4))
        assert eff["do_sample"] is False and eff["processors"] == [] and eff["top_k"] is None

    def test_a_mixed_batch_is_refused(self, engine, tiny_suite):
        cases = tiny_suite.expand()
        with pytest.raises(ValueError):
            engine.generate([cases[0], cases[1]], tiny_suite.system_prompt)  # seeds 1 and 2
