"""The model-graded scorer: an LLM judge through OpenAI, an OpenAI-compatible server or Anthropic.

Requests go through the hosted engines (`fairness.generate.engines`: their client
construction, bounded retries, validation of server answers and key-free errors), one per
output. The answer's first word is looked up in the config's `labels`; an answer that does
not start with a label is a `Scored(NaN, valid=False, raw=answer)`, never a 0.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from fairness._util.canonical import sha256_text
from fairness.scorers._config import JudgeConfig
from fairness.scorers._protocol import Scored
from fairness.suite._case import Case, SamplingParams

if TYPE_CHECKING:
    from fairness.generate.engines.hosted import HostedEngine

JUDGE_VERSION = "judge-1"
"""The request and answer-parsing rules below; change it when either changes."""
_FIRST_WORD = re.compile(r"[^\W\d_]+")


def parse_answer(answer: str, labels: dict[str, float]) -> Scored:
    """The label the answer starts with (after any punctuation, quotes or markdown), else invalid."""
    head = answer.lstrip(" \t\r\n\"'`*_#>([{-.:")
    m = _FIRST_WORD.match(head)
    word = m.group(0).casefold() if m else None
    if word is not None and word in labels:
        return Scored(labels[word], True, answer)
    return Scored(float("nan"), False, answer)


def judge_prompt(config: JudgeConfig, output: str) -> str:
    """The judge's user message for one output (a plain replacement: braces in outputs stay as they are)."""
    return config.prompt.replace("{output}", output)


class JudgeScorer:
    """`Scorer` for a `JudgeConfig`; the engine (and the key) is needed only once it scores."""

    output: Any

    def __init__(self, config: JudgeConfig, name: str = "judge") -> None:
        self.config = config
        self.name = name
        self.version = JUDGE_VERSION
        self.output = config.output
        self._engine: HostedEngine | None = None

    @property
    def engine(self) -> HostedEngine:
        if self._engine is None:
            from fairness.generate._factory import hosted_engine
            from fairness.generate.engines.hosted import ProviderConfig

            c = self.config
            cfg = ProviderConfig(
                provider=c.provider, model=c.model, base_url=c.base_url, api_key_env=c.api_key_env,
                concurrency=c.concurrency, max_retries=c.max_retries, timeout_s=c.timeout_s, sampling=["temperature"],
            )
            self._engine = hosted_engine(c.provider, c.model, cfg)
        return self._engine

    def backend_info(self) -> dict[str, Any]:
        """The judge engine's provenance (library versions, endpoint, server) for the scores' manifest."""
        return self.engine.backend_info()

    def score_details(self, texts: Sequence[str]) -> list[Scored]:
        c = self.config
        params = SamplingParams(temperature=c.temperature, top_p=1.0, max_new_tokens=c.max_tokens)
        cases = [
            Case(row_id=f"judged output {sha256_text(t)[:12]}", family="judge", paraphrase_id="p1", placeholders={},
                 slice={}, slice_id="", regime="judge", params=params, seed=c.seed, prompt=judge_prompt(c, t),
                 index=i, prompt_id="judge", template_index=0)
            for i, t in enumerate(texts)
        ]
        out: list[Scored] = []
        for batch in self.engine.plan(cases):
            out += [parse_answer(done.text, c.labels) for done in self.engine.generate(batch, c.system)]
        return out

    def score(self, texts: Sequence[str]) -> np.ndarray:
        return np.array([s.value for s in self.score_details(texts)], dtype=np.float64)

    def close(self) -> None:
        if self._engine is not None:
            self._engine.close()
