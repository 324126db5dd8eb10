"""`EngineOptions`: which engine and model a live run (or a dry run) uses, typed once.

The CLI's `generate` / `dry-run` and the Action's live mode build one; the engine factory,
the hosted engines and the dry run read it. Nothing below `cli/` sees an argparse namespace.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, ValidationError

from fairness._util.errors import FairnessError, validation_message
from fairness._util.models import Frozen

EngineName = Literal["llamacpp", "transformers", "openai", "anthropic"]
ENGINE_CHOICES: tuple[str, ...] = ("llamacpp", "transformers", "openai", "anthropic")


class EngineOptions(Frozen):
    """An engine, the model it serves and its settings (each applies to the engines named)."""

    engine: EngineName = "llamacpp"
    """`llamacpp` or `transformers` (local), `openai` or `anthropic` (hosted)."""
    model: str = Field(min_length=1)
    """A known model name (e.g. `smollm2`), a GGUF file, a model directory, a hub id or a hosted model name."""
    model_id: str | None = None
    """The id recorded in content keys and the manifest (default: derived from `model`)."""
    revision: str | None = None
    """The hub commit to pin a hub model to (transformers; recorded as the served revision for openai)."""
    threads: int | None = Field(default=None, ge=1)
    """CPU threads (llamacpp)."""
    batch_size: int = Field(default=16, ge=1)
    """Rows per generate call (transformers)."""
    device: str | None = None
    """`cpu`, `cuda`, `cuda:0` … (local engines; default: the GPU if there is one). Without one, a run of more
    than `fairness.generate._device.CPU_ROW_LIMIT` rows needs an explicit `cpu`."""
    dtype: str | None = None
    """`bfloat16`, `float16`, `float32` (transformers)."""
    gguf_file: str | None = None
    """GGUF file inside the `model` directory (transformers)."""
    base_url: str | None = None
    """OpenAI-compatible server or API proxy (openai, anthropic)."""
    concurrency: int | None = Field(default=None, ge=1)
    """Requests in flight at once (openai, anthropic)."""
    max_requests: int | None = Field(default=None, ge=1)
    """Stop after this many requests; rerun to continue (openai, anthropic)."""
    provider_config: str | None = None
    """Provider YAML (no credentials: keys come from the environment)."""

    def __init__(self, **data: Any) -> None:
        try:
            super().__init__(**data)
        except ValidationError as err:
            raise FairnessError(validation_message(err)) from None
