"""Fail fast when a local engine would run a large grid on the CPU by accident.

A GPU runner whose CUDA is broken silently falls back to the CPU and then runs into the
job timeout hours later; the 3,200-row grid takes days on a CPU. So a local engine that
finds no accelerator refuses a grid above `CPU_ROW_LIMIT` rows unless the CPU was asked
for explicitly (`--device cpu`), which is how CI's small test-model runs say "I mean it".
"""

from __future__ import annotations

from fairness._util.errors import FairnessError

CPU_ROW_LIMIT = 64
LOCAL_ENGINES = ("llamacpp", "transformers")


def resolve_device(engine: str, requested: str | None) -> str:
    """The device a local engine will run on: the one asked for, else the accelerator if there is one, else `cpu`."""
    if engine == "llamacpp":
        if requested not in (None, "cpu"):
            raise FairnessError(f"the llamacpp engine runs on the CPU only (no GPU offload in this build); got --device {requested}")
        return "cpu"
    if engine == "transformers":
        if requested == "cpu":
            return requested
        try:
            import torch
        except ImportError:
            return requested or "cpu"  # the engine itself reports the missing library
        if requested and requested.startswith("cuda") and not torch.cuda.is_available():
            raise FairnessError(f"--device {requested} was asked for but torch finds no usable CUDA device "
                                f"(torch {torch.__version__}, built for CUDA {torch.version.cuda})")
        return requested or ("cuda" if torch.cuda.is_available() else "cpu")
    raise FairnessError(f"`{engine}` is not a local engine")


def require_accelerator(engine: str, requested: str | None, rows: int, limit: int = CPU_ROW_LIMIT) -> str:
    """The device to use; refuses more than `limit` rows on an implicit CPU. `rows` is what this run would generate."""
    device = resolve_device(engine, requested)
    if device == "cpu" and requested != "cpu" and rows > limit:
        raise FairnessError(
            f"no accelerator found for the {engine} engine and this run would generate {rows} rows on the CPU "
            f"(more than {limit}); fix the GPU setup, or pass --device cpu to run on the CPU deliberately"
        )
    return device
