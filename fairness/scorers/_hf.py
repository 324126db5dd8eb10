"""A Hugging Face text-classification model as a scorer (a regard or toxicity classifier, say).

transformers and torch are imported here only, lazily: replaying recorded scores needs neither.
The version names the transformers and torch versions and the sha256 of every weights file
loaded, so scores from other weights never pass as this model's.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from fairness._util.canonical import sha256_json
from fairness._util.errors import FairnessError
from fairness.scorers._config import HFClassifierConfig

HF_VERSION = "hf-classifier-1"


class HFClassifierScorer:
    """`Scorer` for an `HFClassifierConfig`: P(label) per text, or the flag P(label) ≥ threshold."""

    output: Any

    def __init__(self, config: HFClassifierConfig, name: str = "hf-classifier") -> None:
        try:
            import torch
            import transformers
        except ImportError:
            raise FairnessError("the `hf-classifier` scorer needs torch and transformers: "
                                "pip install 'llm-fairness-check[live]'") from None
        from fairness.generate._weights import pinned_weights

        self.config, self.name, self.output = config, name, config.output
        self._torch = torch
        try:
            self.tokenizer = transformers.AutoTokenizer.from_pretrained(config.model, revision=config.revision)
            self.model = transformers.AutoModelForSequenceClassification.from_pretrained(
                config.model, revision=config.revision).to(config.device).eval()
        except (OSError, ValueError) as exc:
            raise FairnessError(f"scorer `{name}`: cannot load `{config.model}`: {' '.join(str(exc).split())[:300]}") from None
        labels = {str(v): int(k) for k, v in self.model.config.id2label.items()}
        if config.label not in labels:
            raise FairnessError(f"scorer `{name}`: `{config.model}` has no label `{config.label}` "
                                f"(its labels: {', '.join(sorted(labels))})")
        self._index = labels[config.label]
        commit, weights = pinned_weights(config.model, config.revision, None)
        self.weights = weights
        self.version = (f"{HF_VERSION} transformers {transformers.__version__} torch {torch.__version__} "
                        f"weights {sha256_json(weights)[:16]}" + (f" commit {commit}" if commit else ""))

    def backend_info(self) -> dict[str, Any]:
        return {"device": self.config.device, "weights": self.weights, "labels": dict(self.model.config.id2label)}

    def probabilities(self, texts: Sequence[str]) -> np.ndarray:
        """P(label) per text, in float64, `batch_size` texts per forward pass."""
        torch, c = self._torch, self.config
        out = []
        with torch.inference_mode():
            for i in range(0, len(texts), c.batch_size):
                enc = self.tokenizer(list(texts[i:i + c.batch_size]), truncation=True, max_length=c.max_length,
                                     padding=True, return_tensors="pt").to(c.device)
                logits = self.model(**enc).logits.double()
                out.append(torch.softmax(logits, dim=-1)[:, self._index].cpu().numpy())
        return np.concatenate(out) if out else np.zeros(0)

    def score(self, texts: Sequence[str]) -> np.ndarray:
        p = self.probabilities(texts)
        return (p >= self.config.threshold).astype(np.float64) if self.config.output == "flag" else p
