"""A model's compact JSON, exactly as `json.dumps(model.model_dump(mode="json"), ensure_ascii=False,
allow_nan=False, separators=(",", ":"))` writes it, encoded by pydantic-core in one call.

results.json (~0.9 MB) was a Python dump of the model then the stdlib encoder; pydantic-core
encodes it in about a quarter of the time with the same keys, order, string escapes and shortest
round-trip digits, but spells two kinds of float apart from Python's `repr`: from 1e-5 to 1e-4
positionally (`0.000032`, Python `3.2e-05`) and a one-digit negative exponent unpadded (`1e-6`,
Python `1e-06`). Those number tokens (never text inside a string) are respelled with `repr`. Text
pydantic-core cannot encode (a lone surrogate) takes the stdlib route. One difference is kept: a
NaN or infinity is written `null` (the models' JSON setting), where `allow_nan=False` raised.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import pydantic_core
from pydantic import BaseModel

_DIGITS = frozenset(b"0123456789")
_NUMBER = frozenset(b"0123456789.-")
_OPENS, _CLOSES = b":,[", b",]}"  # what precedes and follows a value in compact JSON


def model_json(model: BaseModel) -> str:
    """`model`'s compact JSON, byte for byte the stdlib encoder's (see the module docstring)."""
    try:
        raw = pydantic_core.to_json(model)
    except pydantic_core.PydanticSerializationError:
        return _stdlib(model)
    tokens = sorted(set(_tokens_apart(raw)))
    if not tokens:
        return raw.decode()
    # inside a string every `"` is escaped; with each `\\` and `\"` blanked (same length), the
    # `"` left are string delimiters, so a token is outside every string after an even count
    quotes = raw.replace(b"\\\\", b"__").replace(b'\\"', b"__")
    parts, start, count, counted_to = [], 0, 0, 0
    for a, b in tokens:
        count += quotes.count(b'"', counted_to, a)
        counted_to = a
        if count % 2:
            continue  # text inside a string
        parts += (raw[start:a], repr(float(raw[a:b])).encode())
        start = b
    parts.append(raw[start:])
    return b"".join(parts).decode()


def _find(raw: bytes, needle: bytes) -> Iterator[int]:
    p = raw.find(needle)
    while p >= 0:
        yield p
        p = raw.find(needle, p + 1)


def _tokens_apart(raw: bytes) -> Iterator[tuple[int, int]]:
    """(start, end) of each value token spelled apart from Python's, `De-D` and `-0.0000D…`, standing
    between a value's opening and closing characters (possibly inside a string)."""
    n = len(raw)
    for p in _find(raw, b"e-"):  # a one-digit negative exponent
        if p > 0 and p + 3 < n and raw[p - 1] in _DIGITS and raw[p + 2] in _DIGITS and raw[p + 3] in _CLOSES:
            a = p - 1
            while a > 0 and raw[a - 1] in _NUMBER:
                a -= 1
            if a > 0 and raw[a - 1] in _OPENS:
                yield a, p + 3
    for p in _find(raw, b"0.0000"):  # below 1e-4, positional
        a, b = p - (p > 0 and raw[p - 1] == 45), p + 6  # 45: "-"
        while b < n and raw[b] in _DIGITS:
            b += 1
        if a > 0 and raw[a - 1] in _OPENS and b < n and raw[b] in _CLOSES:
            yield a, b


def _stdlib(model: BaseModel) -> str:
    return json.dumps(model.model_dump(mode="json"), ensure_ascii=False, allow_nan=False, separators=(",", ":"),
                      check_circular=False)
