"""Live generation engines. Each imports its heavy library lazily, inside the engine.

Replay never imports this package's engine modules, so a base install needs no torch,
transformers or llama.cpp.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from fairness.suite._case import Case, SamplingParams


@dataclass(frozen=True)
class Completion:
    text: str
    prompt_tokens: int
    completion_tokens: int
    finish_reason: str
    """`stop` (end of sequence) or `length` (hit max_new_tokens)."""


@runtime_checkable
class Engine(Protocol):
    """What the generation driver needs from a backend."""

    name: str

    def backend_info(self) -> dict[str, Any]:
        """Versions, dtype, device and details for the manifest."""

    def effective_sampling(self, params: SamplingParams) -> dict[str, Any]:
        """The sampling really applied for these params, library defaults included."""

    def batch_plan(self) -> dict[str, Any]:
        """A description of how rows are grouped into calls (recorded; outputs can depend on it)."""

    def plan(self, cases: list[Case]) -> list[list[Case]]:
        """Deterministic batches over `cases` (the whole grid or shard, not just pending rows)."""

    def generate(self, batch: list[Case], system_prompt: str) -> list[Completion]:
        """One completion per case, in order."""

    def close(self) -> None: ...

