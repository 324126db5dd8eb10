"""The monitor's one call into the scorer scores large batches in chunks, with the scorer's own results."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from fairness.monitor._score import CHUNK, score_batch, score_columns
from fairness.score import score_texts

REC = Path(__file__).resolve().parents[1] / "recordings/fairness-cards/qwen-v0.1/SmolLM2-135M-Instruct-Q4_1/records.jsonl"


def test_a_batch_over_the_chunk_scores_as_one_call():
    outputs = [json.loads(line)["output"] for line in REC.read_text(encoding="utf-8").splitlines()]
    texts = (outputs * 3)[: 2 * CHUNK + 5]
    whole = score_texts(texts, "paper")
    chunked = score_batch(texts, "paper")
    assert list(chunked) == [c.name for c in score_columns()]
    for name, values in chunked.items():
        assert values.dtype == np.int64 and values.shape == (len(texts),)
        assert np.array_equal(values, np.asarray(whole.columns[name], dtype=np.int64)), name
    assert sum(int(v.sum()) for v in chunked.values()) > 0


def test_an_empty_batch_has_empty_columns():
    assert {n: v.tolist() for n, v in score_batch([], "paper").items()} == {c.name: [] for c in score_columns()}
