"""Canonical JSON and hashing, shared by suite hashes, content keys and manifests; and the
compact JSON encoders the outputs are written with.

Keys must not change when a number is written `0` instead of `0.0`, or when dict
keys arrive in another order, so every hashed value passes through `canonical_json`.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any


def _canon(value: Any) -> Any:
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return value
    if isinstance(value, (int, float)):
        f = float(value)
        if math.isnan(f) or math.isinf(f):
            raise ValueError("cannot canonicalise a non-finite number")
        # 0 and 0.0 (and 1 and 1.0) must hash alike: integral numbers become ints.
        return int(f) if f.is_integer() else f
    if isinstance(value, dict):
        return {str(k): _canon(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_canon(v) for v in value]
    if hasattr(value, "model_dump"):
        return _canon(value.model_dump(mode="json"))
    raise TypeError(f"cannot canonicalise {type(value).__name__}")


def json_number(x: Any, digits: int = 6) -> float | None:
    """A number as results files store it: rounded, and None where it is missing or not finite."""
    if x is None:
        return None
    x = float(x)
    return round(x, digits) if math.isfinite(x) else None


_CANONICAL = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False)
"""What `json.dumps(..., sort_keys=True, separators=(",", ":"), ensure_ascii=False)` builds per call."""


encode_str: Callable[[str], str] = json.encoder.encode_basestring
"""A str's JSON as every encoder here writes it (`ensure_ascii=False`): the C encoder, without an encoder call's overhead."""

compact_json: Callable[[Any], str] = json.JSONEncoder(ensure_ascii=False, allow_nan=False, separators=(",", ":"),
                                                      check_circular=False).encode
"""`json.dumps(value, ensure_ascii=False, allow_nan=False, separators=(",", ":"))`, as results.json and
monitor.json are written (one encoder per process; check_circular=False: a model dump is a tree, with
no cycle to guard against, ~10% of encoding ~1 MB)."""


def canonical_json(value: Any) -> str:
    """Compact JSON with sorted keys and integral floats written as ints."""
    if type(value) is str:
        return encode_str(value)  # what `_CANONICAL.encode` returns for a str, without its overhead
    return _CANONICAL.encode(_canon(value))


def sha256_text(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def sha256_json(value: Any) -> str:
    return sha256_text(canonical_json(value))


def sha256_file(path: str | Path, chunk: int = 1 << 20) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        while block := fh.read(chunk):
            h.update(block)
    return h.hexdigest()
