"""The `scorers:` entries of a rubric: one strict model per built-in kind, a generic one for plug-ins.

A rubric names its scorers (`scorers: {judge: {kind: judge, ...}}`); a metric reads one with
`scorer: NAME`. Each config's `identity()` (everything that can change a score; not
concurrency, retries or timeouts) enters the content key of every score it produces.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar, Literal

from pydantic import Field, ValidationError, field_validator, model_validator

from fairness._util.canonical import canonical_json, sha256_text
from fairness._util.errors import FairnessError, validation_message
from fairness._util.models import Frozen

NAME_PATTERN = r"^[a-z0-9][a-z0-9_-]{0,63}$"
"""A scorer's name is also a directory name under `<recording set>/scores/`."""


class _Config(Frozen):
    OPERATIONAL: ClassVar[frozenset[str]] = frozenset()
    """Settings that cannot change a score; left out of `identity()`."""

    def identity(self) -> dict[str, Any]:
        """The settings that can change a score (the content key's `config`)."""
        return self.model_dump(mode="json", exclude=set(self.OPERATIONAL))

    def identity_sha256(self) -> str:
        return sha256_text(canonical_json(self.identity()))


class JudgeConfig(_Config):
    """An LLM as judge: each output is put into `prompt` and the model's answer is read as a label.

    The answer's first word (case-insensitive, surrounding punctuation ignored) must be one of
    `labels`; anything else is recorded as invalid (`valid: false`, raw answer kept) and never
    counted as 0.
    """

    kind: Literal["judge"]
    """`judge`."""
    provider: Literal["openai", "anthropic"]
    """`openai` (also any OpenAI-compatible server via `base_url`) or `anthropic`."""
    model: str = Field(min_length=1)
    """The judge model's name as the API knows it (prefer a dated snapshot)."""
    base_url: str | None = None
    """An OpenAI-compatible server (vLLM, Ollama …) or proxy; default the provider's API."""
    api_key_env: str | None = Field(default=None, pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")
    """Name of the environment variable holding the key (default OPENAI_API_KEY / ANTHROPIC_API_KEY).
    Keys come from the environment only, never from a file or the command line."""
    system: str = ""
    """The judge's system prompt (none when empty)."""
    prompt: str = Field(min_length=1)
    """The judge's user message; `{output}` is replaced by the output judged (it must appear exactly once)."""
    labels: dict[str, float] = Field(default_factory=lambda: {"yes": 1.0, "no": 0.0})
    """Answer word → score; a `flag` judge's values must be 0 and 1."""
    output: Literal["flag", "number"] = "flag"
    """`flag` (a rate metric) or `number`."""
    temperature: float = Field(default=0.0, ge=0.0, le=2.0)
    """Sampling temperature sent to the judge (0: as deterministic as the provider allows)."""
    max_tokens: int = Field(default=16, ge=1, le=4096)
    """Cap on the judge's answer."""
    seed: int = 0
    """Seed sent with each request (OpenAI: best-effort; Anthropic has none)."""
    concurrency: int = Field(default=4, ge=1, le=64)
    """Requests in flight at once (does not change scores)."""
    max_retries: int = Field(default=5, ge=0, le=20)
    """Retries of rate limits, server errors and dropped connections (does not change scores)."""
    timeout_s: float = Field(default=120.0, gt=0, le=3600)
    """Per-request timeout (does not change scores)."""
    OPERATIONAL: ClassVar[frozenset[str]] = frozenset({"api_key_env", "concurrency", "max_retries", "timeout_s"})

    @field_validator("prompt")
    @classmethod
    def _one_output_slot(cls, v: str) -> str:
        if v.count("{output}") != 1:
            raise ValueError("a judge `prompt` must contain `{output}` exactly once (where the judged output goes)")
        return v

    @field_validator("labels")
    @classmethod
    def _labels(cls, v: dict[str, float]) -> dict[str, float]:
        if not v:
            raise ValueError("a judge needs at least one label in `labels`")
        folded = [k.strip().casefold() for k in v]
        if any(not k.isalpha() for k in folded):
            raise ValueError("judge `labels` must be single words of letters (the answer's first word is matched)")
        if len(set(folded)) != len(folded):
            raise ValueError("judge `labels` repeat a word (they are matched case-insensitively)")
        return {k.strip().casefold(): float(x) for k, x in v.items()}

    @model_validator(mode="after")
    def _flag_labels(self) -> JudgeConfig:
        if self.output == "flag" and not set(self.labels.values()) <= {0.0, 1.0}:
            raise ValueError("a `flag` judge's `labels` must map to 0 or 1 (use `output: number` for other values)")
        return self


class HFClassifierConfig(_Config):
    """A Hugging Face text-classification model, run through transformers on the CPU or a GPU.

    `number`: the softmax probability of `label`; `flag`: 1 when that probability is at least
    `threshold`. The model's weights (sha256 of each file) are part of the scorer's version.
    """

    kind: Literal["hf-classifier"]
    """`hf-classifier`."""
    model: str = Field(min_length=1)
    """A local model directory or a hub id (then pin `revision`)."""
    revision: str | None = None
    """The hub commit to load (a hub id only)."""
    label: str = Field(min_length=1)
    """The class whose probability is the score, as named in the model's `id2label`."""
    output: Literal["flag", "number"] = "flag"
    """`flag` (probability ≥ threshold) or `number` (the probability)."""
    threshold: float = Field(default=0.5, gt=0.0, le=1.0)
    """The flag's cut-off on the probability."""
    max_length: int = Field(default=512, ge=8, le=8192)
    """Tokens per text kept (longer texts are truncated)."""
    batch_size: int = Field(default=16, ge=1, le=1024)
    """Texts per forward pass (does not change scores beyond float rounding)."""
    device: str = "cpu"
    """`cpu`, `cuda` or `cuda:N`."""
    OPERATIONAL: ClassVar[frozenset[str]] = frozenset({"batch_size"})


class PluginConfig(_Config):
    """A scorer registered under the `fairness.scorers` entry points (or `vader`, `lexical-toxicity`)."""

    kind: str = Field(min_length=1)
    """The entry-point name (or built-in name)."""


ScorerConfig = JudgeConfig | HFClassifierConfig | PluginConfig
_BY_KIND: dict[str, type[_Config]] = {"judge": JudgeConfig, "hf-classifier": HFClassifierConfig}


def parse_scorer(name: str, raw: Any, source: str = "scorers") -> ScorerConfig:
    """One `scorers:` entry, validated by its kind's model."""
    import re

    if not re.match(NAME_PATTERN, name):
        raise FairnessError(f"{source}: scorer name `{name}` must be lower-case letters, digits, `-` or `_` (≤ 64)")
    if not isinstance(raw, Mapping) or not isinstance(raw.get("kind"), str):
        raise FairnessError(f"{source}: scorer `{name}` must be a mapping with a `kind` (judge, hf-classifier or a plug-in)")
    model = _BY_KIND.get(raw["kind"], PluginConfig)
    if model is JudgeConfig:  # the judge's key comes from the environment only, never from the suite
        from fairness.generate.engines.hosted import refuse_secret_values, refuse_url_credentials

        refuse_secret_values(dict(raw), f"{source}.{name}")
        refuse_url_credentials(raw.get("base_url"), f"{source}.{name}: `base_url`")
    try:
        return model.model_validate(dict(raw))  # type: ignore[return-value]
    except ValidationError as err:
        raise FairnessError(validation_message(err, f"{source}.{name}", model)) from None


def parse_scorers(raw: Any, source: str = "scorers") -> dict[str, ScorerConfig]:
    """A rubric's `scorers:` mapping, name → config."""
    if raw is None:
        return {}
    if not isinstance(raw, Mapping):
        raise FairnessError(f"{source}: `scorers` must be a mapping of scorer name to its settings")
    return {str(k): parse_scorer(str(k), v, source) for k, v in raw.items()}
