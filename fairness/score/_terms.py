"""Every occurrence of a fixed set of short ASCII words in a text, found with array operations.

The rubric's words are few (~80) and their matches rare (about one per 90 characters of model
output), so a search costs what its pass over the text costs. Aho–Corasick (pyahocorasick)
makes that pass one character at a time, ~12 ns a character on a UCS-4 string. Here each
position's next four bytes, read as one `uint32` from a byte-strided view of the buffer (no
copy), are hashed into a small table of the words' four-byte prefixes: a handful of array
operations over the whole text, ~5 ns a character with the encoding. The few positions that
pass (about one in forty) are checked exactly: their four bytes against the prefix, then the rest of each word
with eight-byte compares. Same matches as Aho–Corasick: every occurrence, overlapping ones
included, each reported at its last character.

One byte per character keeps positions equal to `str` indexes: the text is encoded as
Latin-1 with `?` for every other character. A word is ASCII, holds no `?` and no NUL, and has
at least three characters (a three-character word's prefixes are all its 256 four-byte
extensions), so a replaced or non-ASCII character is never part of a match.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from fairness._util.arrays import unique

_BITS = 17
"""Hash table slots 2¹⁷ (128 KiB, within a core's cache): ~600 prefixes fill 0.5% of it."""
_MULTIPLIERS = (0x9E3779B1, 0x85EBCA77, 0xC2B2AE3D, 0x27D4EB2F, 0x165667B1, 0xD3A2646C | 1, 0xFD7046C5, 0xB55A4F09)
"""Odd multipliers tried in turn until the words' prefixes land in distinct slots."""
_BLOCK = 1 << 16
"""Positions hashed per step."""


def usable(word: str) -> bool:
    """Whether `TermFinder` can search for `word` (see the module docstring)."""
    return len(word) >= 3 and word.isascii() and "?" not in word and "\x00" not in word


def searchable_prefix(word: str) -> str:
    """The longest prefix of `word` whose characters `TermFinder` can take."""
    return word[: next((i for i, ch in enumerate(word) if not ch.isascii() or ch in "?\x00"), len(word))]


def _strided(raw: bytes, dtype: str, n: int) -> np.ndarray:
    """The `dtype` value that starts at each of the first `n` bytes of `raw` (overlapping, unaligned)."""
    return np.ndarray((n,), dtype=dtype, buffer=raw, offset=0, strides=(1,))


class TermFinder:
    """All occurrences of `words` (each `usable`) in a text, as `find` returns them."""

    def __init__(self, words: Sequence[str]) -> None:
        if not all(map(usable, words)):
            raise ValueError("every word must be ASCII, without `?` or NUL, of at least 3 characters")
        encoded = [w.encode("ascii") for w in words]
        groups: dict[int, list[int]] = {}  # four-byte prefix → its words
        for wid, w in enumerate(encoded):
            for tail in ([bytes([x]) for x in range(256)] if len(w) == 3 else [b""]):
                groups.setdefault(int.from_bytes((w + tail)[:4], "little"), []).append(wid)
        prefixes = np.array(list(groups), dtype=np.uint32)
        for mult in _MULTIPLIERS:
            self._mult = np.uint32(mult)
            slots = self._hash(prefixes)
            if len(unique(slots)) == len(slots):
                break
        else:  # pragma: no cover - eight multipliers all colliding on a few hundred keys
            raise ValueError("no collision-free hash for these words")
        self._slot = np.zeros(1 << _BITS, dtype=np.int32)  # 0: no prefix; g + 1: prefix group g
        self._slot[slots] = np.arange(1, len(prefixes) + 1)
        self._used = self._slot > 0  # the same table as one byte a slot: the pass reads only this
        self._prefix = np.concatenate([[0], prefixes]).astype(np.uint32)
        members = list(groups.values())
        self._count = np.array([0, *map(len, members)], dtype=np.int64)
        self._first = np.concatenate([[0], np.cumsum(self._count[1:]) - self._count[1:]]).astype(np.int64)
        self._member = np.array([w for m in members for w in m], dtype=np.int64)
        self._length = np.array(list(map(len, encoded)), dtype=np.int64)
        # bytes 4 … of each word as little-endian uint64 values, with masks of the bytes that count
        self._parts = max(0, -(-(max(self._length, default=4) - 4) // 8))
        self._pad = 8 * self._parts + 8  # zero bytes after the text: every read stays in the buffer
        self._rest = np.zeros((self._parts, len(encoded)), dtype=np.uint64)
        self._mask = np.zeros((self._parts, len(encoded)), dtype=np.uint64)
        for wid, w in enumerate(encoded):
            for part in range(self._parts):
                piece = w[4 + 8 * part : 12 + 8 * part]
                self._rest[part, wid] = int.from_bytes(piece, "little")
                self._mask[part, wid] = (1 << (8 * len(piece))) - 1

    def _hash(self, v: np.ndarray) -> np.ndarray:
        return (v * self._mult) >> np.uint32(32 - _BITS)

    def find(self, text: str, latin1: bytes | None = None) -> tuple[np.ndarray, np.ndarray]:
        """(end, word): the index in `text` of each occurrence's last character and the index
        of its word in `words`, int64, ordered by end. `latin1`: `text.encode("latin-1", "replace")`
        when the caller has it (made piece by piece it is cheaper: see `_Corpus.latin1`)."""
        n = len(text)
        if latin1 is None:
            latin1 = text.encode("latin-1", "replace")
        elif len(latin1) != n:
            raise ValueError("`latin1` must be the text encoded as Latin-1, one byte a character")
        raw = latin1 + bytes(self._pad)
        quad = _strided(raw, "<u4", n)
        hits = []
        for lo in range(0, n, _BLOCK):  # a block's temporaries stay in the processor's caches
            slot = self._hash(quad[lo : lo + _BLOCK])
            at = np.flatnonzero(self._used.take(slot))
            hits.append((at + lo, slot[at]))
        pos = np.concatenate([p for p, _ in hits]) if hits else np.zeros(0, dtype=np.int64)
        group = self._slot.take(np.concatenate([s for _, s in hits])) if hits else np.zeros(0, dtype=np.int32)
        own = quad[pos] == self._prefix.take(group)  # the slot's own prefix, not a collision
        pos, group = pos[own], group[own]
        per = self._count.take(group)
        pos = np.repeat(pos, per)  # one entry per (position, word of its prefix)
        k = np.arange(len(pos)) - np.repeat(np.cumsum(per) - per, per)
        word = self._member.take(np.repeat(self._first.take(group), per) + k)
        octet = _strided(raw, "<u8", n + self._pad - 8)
        ok = np.ones(len(pos), dtype=bool)
        for part in range(self._parts):
            longer = np.flatnonzero(ok & (self._length.take(word) > 4 + 8 * part))
            if not len(longer):
                break
            w = word[longer]
            ok[longer] = (octet[pos[longer] + 4 + 8 * part] & self._mask[part, w]) == self._rest[part, w]
        end, word = pos[ok] + self._length.take(word[ok]) - 1, word[ok]
        order = np.argsort(end, kind="stable")
        return end[order], word[order]
