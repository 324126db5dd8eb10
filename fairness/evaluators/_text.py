"""Small text helpers shared by the lexical evaluators."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable

_APOSTROPHES = str.maketrans({"\u2019": "'", "\u2018": "'", "\u02bc": "'", "\u2032": "'", "`": "'"})
_WORD = re.compile(r"[^\W_]+(?:'[^\W_]+)*")


_ASCII_WORD_CHARS = bytes(c if chr(c) in "abcdefghijklmnopqrstuvwxyz0123456789'" else 32 for c in range(256))
"""A byte table that keeps what `_WORD` can match in lower-cased ASCII and blanks the rest."""


def normalise(text: str) -> str:
    """Lower-case with curly apostrophes made straight, so `I can’t` matches `i can't`."""
    if text.isascii():  # O(1); of the apostrophes only the backtick is ASCII
        return text.replace("`", "'").lower()
    return text.translate(_APOSTROPHES).lower()


def words(text: str) -> list[str]:
    """Word tokens of the normalised text (letters and digits, inner apostrophes kept).

    An ASCII text is split in C: every character `_WORD` cannot match becomes a space, and
    only the few chunks with an apostrophe go through `_WORD` (a match never crosses a blank,
    so the tokens are the same, in the same order)."""
    text = normalise(text)
    if not text.isascii():
        return _WORD.findall(text)
    chunks = text.encode("ascii").translate(_ASCII_WORD_CHARS).decode("ascii").split()
    if "'" not in text:
        return chunks
    out: list[str] = []
    for chunk in chunks:
        if "'" in chunk:
            out += _WORD.findall(chunk)
        else:
            out.append(chunk)
    return out


def masker(terms: Iterable[str], token: str = "x") -> Callable[[str], str]:
    """A function that replaces whole-word `terms` (case-insensitive) by `token`.

    Outputs echo the protected words of their prompt ("a Muslim woman"); masking them stops
    lexical distances from counting the inserted words themselves as a group effect.

    Case-insensitive matching keeps Python's regex engine from skipping ahead to a term's
    first letter, so an ASCII text with ASCII terms is searched lower-cased, case-sensitively,
    each term checking its own left boundary after it matched (the same spans, a tenth of
    the CPU), and the replacements are spliced into the original text.
    """
    alts = sorted({t for t in terms if t}, key=len, reverse=True)
    if not alts:
        return lambda text: text
    pattern = re.compile(r"(?<![\w])(?:" + "|".join(re.escape(t) for t in alts) + r")(?![\w])", re.IGNORECASE)
    if "\\" in token or not all(t.isascii() for t in alts):
        return lambda text: pattern.sub(token, text)
    lowered = re.compile(
        "(?:" + "|".join(re.escape(t.lower()) + r"(?<!\w" + re.escape(t.lower()) + ")" for t in alts) + r")(?![\w])"
    )

    def mask(text: str) -> str:
        if not text.isascii():
            return pattern.sub(token, text)
        pieces: list[str] = []
        last = 0
        for m in lowered.finditer(text.lower()):
            pieces += (text[last : m.start()], token)
            last = m.end()
        return "".join(pieces) + text[last:] if pieces else text

    return mask


Screen = tuple[tuple[str, tuple[str, ...]], ...]


def screen(anchors: tuple[str, ...] | None) -> Screen | None:
    """`anchors` (strings one of which every match of some patterns holds) grouped by their
    first two characters under their common prefix, so that a text is searched for a group's
    anchors only when it holds that prefix (a lone anchor is its own prefix). A text for which
    `may_match` is False cannot match: the regex is skipped, with plain substring tests."""
    if anchors is None or any(len(a) < 2 for a in anchors):
        return None
    groups: dict[str, list[str]] = {}
    for a in anchors:
        groups.setdefault(a[:2], []).append(a)
    out = []
    for group in groups.values():
        lo, hi = min(group), max(group)  # the common prefix of all is that of the extremes
        head = lo[: next((k for k, (a, b) in enumerate(zip(lo, hi, strict=False)) if a != b), len(lo))]
        out.append((head, tuple(group)))
    return tuple(out)


def may_match(text: str, anchors: Screen) -> bool:
    """Whether `text` holds an anchor of a `screen` (False: none of the screened patterns can match)."""
    return any(head in text and (len(group) == 1 or any(a in text for a in group)) for head, group in anchors)
