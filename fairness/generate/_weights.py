"""Which weights a transformers run loaded, provably: the hub commit and a sha256 per file.

"The same model" across nights means the same bytes: a hub id names a moving branch, so
the manifest records the resolved commit of the snapshot and the sha256 of every weights
file transformers reads from it (safetensors when the snapshot has them, else the
PyTorch .bin files; a GGUF file when one was named).
"""

from __future__ import annotations

from pathlib import Path

from fairness._util.canonical import sha256_file
from fairness._util.errors import FairnessError

WEIGHT_PATTERNS = ("*.safetensors", "*.bin")
"""In transformers' order of preference: it loads safetensors when both are present."""


def loaded_weight_files(directory: Path, gguf_file: str | None = None) -> list[Path]:
    """The weights files transformers loads from a model directory (or snapshot)."""
    if gguf_file:
        return [directory / gguf_file]
    for pattern in WEIGHT_PATTERNS:
        files = sorted(p for p in directory.glob(pattern) if p.is_file() and not p.name.startswith("training_args"))
        if files:
            return files
    raise FairnessError(f"no *.safetensors or *.bin weights in `{directory}`")


def weights_sha256(files: list[Path]) -> dict[str, str]:
    """{file name: sha256} in name order (symlinks into a hub blob store are followed)."""
    return {p.name: sha256_file(p) for p in sorted(files, key=lambda p: p.name)}


def hub_snapshot(repo_id: str, revision: str | None, cache_dir: str | Path | None = None) -> Path:
    """The cached snapshot directory a hub load used; its name is the resolved commit."""
    try:
        from huggingface_hub import try_to_load_from_cache
    except ImportError:
        raise FairnessError("recording weights checksums for a hub model needs `huggingface_hub`") from None
    found = try_to_load_from_cache(repo_id, "config.json", revision=revision, cache_dir=cache_dir)
    if not isinstance(found, str):
        raise FairnessError(f"`{repo_id}` (revision {revision or 'main'}) is not in the Hugging Face cache after loading it")
    return Path(found).parent


def pinned_weights(
    source: str, revision: str | None, gguf_file: str | None, cache_dir: str | Path | None = None
) -> tuple[str | None, dict[str, str]]:
    """(resolved commit or None for a local directory, {file: sha256}) of a transformers load."""
    local = Path(source)
    if local.is_dir():
        return None, weights_sha256(loaded_weight_files(local, gguf_file))
    snapshot = hub_snapshot(source, revision, cache_dir)
    return snapshot.name, weights_sha256(loaded_weight_files(snapshot, gguf_file))
