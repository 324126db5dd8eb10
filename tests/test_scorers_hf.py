"""The Hugging Face classifier scorer, on a tiny randomly initialised BERT the test builds locally (no hub)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from conftest import write_recording_set
from test_hosted import SUITE

from fairness._util.errors import FairnessError
from fairness.scorers._config import parse_scorer
from fairness.scorers._hf import HF_VERSION, HFClassifierScorer
from fairness.scorers._store import record_scores, replay_scores
from fairness.suite._suite import parse_suite

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
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
