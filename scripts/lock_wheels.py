"""Read the hashed locks under requirements/ and fetch single pinned wheels from them, hashes checked.

    python scripts/lock_wheels.py requirements/vllm.lock vllm     # prints the cached wheel's path

Used by tests/test_locks.py (and to regenerate requirements/vllm-serve-flags.json). A wheel is
fetched with `pip download --no-deps --require-hashes` (the lock's hashes) for the live image's
platform (Linux x86_64, CPython 3.12) into `$XDG_CACHE_HOME/llm-fairness-check/wheels`, and a
file already there whose sha256 is one of the lock's hashes is used without asking the index.
"""

from __future__ import annotations

import hashlib
import os
import re
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from packaging.markers import Marker
from packaging.utils import canonicalize_name

IMAGE_PYTHON = "3.12"
"""The live image's Python (python:3.12-slim), which the vLLM venv also runs on."""
IMAGE_PLATFORMS = [f"manylinux_2_{m}_x86_64" for m in range(36, 16, -1)] + ["manylinux2014_x86_64", "manylinux1_x86_64",
                                                                            "linux_x86_64"]
"""glibc 2.36 (Debian bookworm, the oldest python:3.12-slim): pip < 24 does not expand one manylinux tag to the older ones."""

_PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==([^\s;\\]+)\s*(?:;\s*([^\\]+?))?\s*\\?$")
_HASH = re.compile(r"--hash=sha256:([0-9a-f]{64})")


@dataclass(frozen=True)
class Pin:
    name: str
    version: str
    marker: str | None
    hashes: tuple[str, ...]

    def applies(self, env: dict[str, str]) -> bool:
        return self.marker is None or Marker(self.marker).evaluate(env)

    def requirement_lines(self) -> str:
        return f"{self.name}=={self.version} " + " ".join(f"--hash=sha256:{h}" for h in self.hashes) + "\n"


def parse_lock(path: Path) -> list[Pin]:
    """Every `name==version [; marker]` entry of a `uv pip compile --generate-hashes` lock, with its hashes."""
    pins: list[Pin] = []
    current: tuple[str, str, str | None] | None = None
    hashes: list[str] = []
    for line in path.read_text(encoding="utf-8").splitlines():
        m = _PIN.match(line)
        if m:
            if current:
                pins.append(Pin(*current, tuple(hashes)))
            current, hashes = (canonicalize_name(m[1]), m[2], m[3]), []
        elif current and line.startswith("    --hash="):
            hashes += _HASH.findall(line)
    if current:
        pins.append(Pin(*current, tuple(hashes)))
    return pins


def environment(python: str, *, system: str = "linux", machine: str = "x86_64") -> dict[str, str]:
    """Marker values for a CPython `python` ("3.12" or "3.12.8") on Linux x86_64."""
    full = python if python.count(".") == 2 else python + ".0"
    return {"python_version": ".".join(full.split(".")[:2]), "python_full_version": full, "sys_platform": system,
            "platform_system": "Linux" if system == "linux" else system, "platform_machine": machine,
            "platform_python_implementation": "CPython", "implementation_name": "cpython", "os_name": "posix",
            "implementation_version": full, "platform_release": "", "platform_version": "", "extra": ""}


def pin(lock: Path, name: str, python: str = IMAGE_PYTHON) -> Pin:
    """The one pin of `name` that applies on Linux x86_64 with `python`."""
    found = [p for p in parse_lock(lock) if p.name == canonicalize_name(name) and p.applies(environment(python))]
    if len(found) != 1:
        raise LookupError(f"{lock.name}: {len(found)} pins of {name} apply to Python {python} on Linux x86_64")
    return found[0]


def cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "llm-fairness-check" / "wheels"


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def cached_wheel(p: Pin, dest: Path | None = None) -> Path | None:
    dest = dest or cache_dir()
    prefix = canonicalize_name(p.name).replace("-", "_") + "-" + p.version + "-"
    for f in sorted(dest.glob("*.whl")) if dest.is_dir() else []:
        if f.name.lower().startswith(prefix.lower()) and _sha256(f) in p.hashes:
            return f
    return None


def fetch(p: Pin, dest: Path | None = None) -> Path:
    """The pinned wheel for the image's platform, from the cache or `pip download` (hashes required)."""
    dest = dest or cache_dir()
    have = cached_wheel(p, dest)
    if have:
        return have
    dest.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        req = Path(tmp) / "pin.txt"
        req.write_text(p.requirement_lines(), encoding="utf-8")
        platforms = [a for plat in IMAGE_PLATFORMS for a in ("--platform", plat)]
        subprocess.run([sys.executable, "-m", "pip", "download", "--quiet", "--disable-pip-version-check", "--no-deps",
                        "--require-hashes", "--only-binary", ":all:", *platforms, "--python-version", IMAGE_PYTHON,
                        "--implementation", "cp", "-d", str(dest), "-r", str(req)], check=True)
    have = cached_wheel(p, dest)
    if have is None:
        raise FileNotFoundError(f"pip download left no {p.name}=={p.version} wheel in {dest}")
    return have


def main(argv: list[str]) -> int:
    if len(argv) != 2 or not Path(argv[0]).is_file():
        print("usage: python scripts/lock_wheels.py LOCK NAME", file=sys.stderr)
        return 2
    try:
        print(fetch(pin(Path(argv[0]), argv[1])))
    except (LookupError, subprocess.CalledProcessError, FileNotFoundError) as exc:
        print(f"lock_wheels: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
