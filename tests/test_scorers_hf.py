"""The Hugging Face classifier scorer, on a tiny randomly initialised BERT the test builds locally (no hub)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from conftest import write_recording_set
from test_hosted import SUITE

from fairness._util.errors import FairnessError
from fairness.scorers._config import parse_scorer
from fairness.scorers._hf import HF_VERSION, HFClassifierScorer
from fairness.scorers._store import record_scores, replay_scores
from fairness.suite._suite import parse_suite


class _Imported:
    """A library imported on first use, inside a test: a venv without the `live` extra skips the tests that use
    it and still imports this module (tests/test_locks.py checks that every test module imports)."""

    def __init__(self, name: str) -> None:
        self._name = name

    def __getattr__(self, attr: str) -> Any:
        return getattr(pytest.importorskip(self._name), attr)


torch: Any = _Imported("torch")
transformers: Any = _Imported("transformers")
WORDS = ["a", "man", "woman", "nurse", "seed", "1", "2", ",", ".", "is", "kind", "rude"]


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory) -> Path:
    """A 1-layer BERT sequence classifier (labels `neutral`, `toxic`) with a word-level tokenizer, saved to disk."""
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, processors

    path = tmp_path_factory.mktemp("tiny-classifier")
    vocab = {t: i for i, t in enumerate(["[PAD]", "[UNK]", "[CLS]", "[SEP]", *WORDS])}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    tok.normalizer = normalizers.Lowercase()
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", special_tokens=[("[CLS]", vocab["[CLS]"]), ("[SEP]", vocab["[SEP]"])])
    fast = transformers.PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="[UNK]", pad_token="[PAD]",
                                                cls_token="[CLS]", sep_token="[SEP]")
    fast.save_pretrained(path)
    config = transformers.BertConfig(vocab_size=len(vocab), hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                                     intermediate_size=32, max_position_embeddings=64,
                                     id2label={0: "neutral", 1: "toxic"}, label2id={"neutral": 0, "toxic": 1})
    torch.manual_seed(0)
    transformers.BertForSequenceClassification(config).save_pretrained(path)
    return path


def reference(path: Path, texts: list[str]) -> np.ndarray:
    """P(toxic) of each text alone (no padding), straight from the saved model."""
    tok = transformers.AutoTokenizer.from_pretrained(path)
    model = transformers.AutoModelForSequenceClassification.from_pretrained(path).eval()
    with torch.inference_mode():
        return np.array([torch.softmax(model(**tok(t, return_tensors="pt")).logits.double(), -1)[0, 1].item()
                         for t in texts])


def output_for(case) -> str:
    return f"A {case.slice['gender']} nurse, seed {case.seed}."


TEXTS = ["A man nurse, seed 1.", "A woman nurse is rude.", "kind", "a man is kind , a woman is rude ."]


def test_probabilities_are_the_models_own(tiny_model):
    cfg = parse_scorer("tox", {"kind": "hf-classifier", "model": str(tiny_model), "label": "toxic", "output": "number",
                               "batch_size": 3})
    scorer = HFClassifierScorer(cfg, "tox")
    got = scorer.score(TEXTS)  # batched and padded
    np.testing.assert_allclose(got, reference(tiny_model, TEXTS), rtol=0, atol=1e-6)
    assert got.dtype == np.float64 and scorer.output == "number"
    assert scorer.version.startswith(f"{HF_VERSION} transformers {transformers.__version__} torch {torch.__version__} weights ")


def test_flags_threshold_the_probability(tiny_model):
    p = reference(tiny_model, TEXTS)
    cut = float(np.median(p))
    cfg = parse_scorer("tox", {"kind": "hf-classifier", "model": str(tiny_model), "label": "toxic", "threshold": cut})
    np.testing.assert_array_equal(HFClassifierScorer(cfg).score(TEXTS), (p >= cut).astype(float))
    assert sorted(set(HFClassifierScorer(cfg).score(TEXTS).tolist())) == [0.0, 1.0]


def test_recorded_then_replayed_without_the_model(tiny_model, tmp_path):
    rec = write_recording_set(tmp_path / "rec", parse_suite(SUITE), output_for)
    cfg = parse_scorer("tox", {"kind": "hf-classifier", "model": str(tiny_model), "label": "toxic", "output": "number"})
    m = record_scores(rec, "tox", cfg)
    assert (m.scored, m.invalid, m.complete, m.kind) == (4, 0, True, "hf-classifier")
    assert set(m.backend["weights"]) == {"model.safetensors"}
    texts = ["A woman nurse, seed 2.", "A man nurse, seed 1."]
    col = replay_scores(rec, "tox", cfg, texts)
    np.testing.assert_allclose(col.values, reference(tiny_model, texts), rtol=0, atol=1e-6)
    assert col.version == m.version


def test_an_unknown_label_names_the_models_labels(tiny_model):
    cfg = parse_scorer("tox", {"kind": "hf-classifier", "model": str(tiny_model), "label": "TOXIC"})
    with pytest.raises(FairnessError, match=r"scorer `tox`: `.*` has no label `TOXIC` \(its labels: neutral, toxic\)"):
        HFClassifierScorer(cfg, "tox")


def test_generate_score_records_the_classifier_at_generation_time_and_run_replays_it(tiny_model, tmp_path, capsys,
                                                                                    monkeypatch):
    import json

    import yaml
    from test_hosted import FakeAPI

    from fairness.cli import _main as cli

    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    rubric = {"version": "tox-1", "lists": {"rude": {"terms": ["rude"]}},
              "metrics": {"rude_rate": {"kind": "flag", "list": "rude"},
                          "toxic_rate": {"kind": "flag", "scorer": "tox", "higher_is_worse": True}},
              "scorers": {"tox": {"kind": "hf-classifier", "model": str(tiny_model), "label": "toxic"}}}
    suite = tmp_path / "suite.yaml"
    suite.write_text(yaml.safe_dump({**SUITE, "rubric": rubric}), encoding="utf-8")
    api = FakeAPI()
    try:
        assert cli.main(["generate", "--suite", str(suite), "--engine", "openai", "--model", "gpt-test", "--base-url",
                         f"{api.url}/v1", "--out", str(tmp_path / "rec"), "--live", "--no-progress", "--score"]) == 0
    finally:
        api.close()
    out = capsys.readouterr().out
    assert "8/8 rows recorded (complete)" in out and "scorer `tox` (hf-classifier-1 " in out
    assert cli.main(["run", "--suite", str(suite), "--recordings", str(tmp_path / "rec"), "--out", str(tmp_path / "o"),
                     "--quiet", "--bootstrap", "50", "--permutations", "0"]) == 4  # no rules: undefined
    capsys.readouterr()
    lines = [json.loads(x) for x in (tmp_path / "o" / "transcripts.jsonl").read_text().splitlines()]
    p = reference(tiny_model, [x["output"] for x in lines])
    assert [x["scores"]["toxic_rate"] for x in lines] == (p >= 0.5).astype(float).tolist()
