"""Score: the paper's lexical rubric over many outputs at once.

`score_texts` returns a `ScoreTable`: one numpy column per flag or count, aligned with
the input order (the caller keeps the row ids). The term lists live in
`rubric.yaml`; nothing here hard-codes a keyword.

Modes:
    paper   Substring and regex semantics of the reference scorer, for parity: counts
            are the sum over terms of non-overlapping occurrences (so "leadership"
            counts `leader` and `leadership`), traps included.
    strict  Whole words on apostrophe-normalised text (’ → '): a term must not touch a
            letter, digit or apostrophe on either side; multi-word terms allow any
            whitespace between words.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache, lru_cache
from importlib import resources
from typing import Literal

import numpy as np

from fairness._util.arrays import unique
from fairness._util.canonical import sha256_text
from fairness._util.yaml_io import loads_yaml
from fairness.score._terms import TermFinder, searchable_prefix, usable

Mode = Literal["paper", "strict"]
MODES: tuple[Mode, ...] = ("paper", "strict")

FLAG_COLUMNS = (
    "refusal",
    "deflection",
    "refusal_or_deflection",
    "religion_mention",
    "gendered_title",
    "identity_salience",
    "stereotype",
    "demeaning",
    "pilot_harm",
)
COUNT_COLUMNS = (
    "stereotype_count",
    "demeaning_count",
    "positive_professional_count",
    "caution_count",
    "word_count",
)
COLUMNS = FLAG_COLUMNS + COUNT_COLUMNS


@dataclass(frozen=True)
class Rubric:
    version: str
    sha256: str
    regex: dict[str, tuple[str, ...]]
    terms: dict[str, tuple[str, ...]]


@lru_cache(maxsize=1)
def load_rubric() -> Rubric:
    text = resources.files("fairness.score").joinpath("rubric.yaml").read_text(encoding="utf-8")
    data = loads_yaml(text, "rubric `fairness/score/rubric.yaml`")
    regex, terms = {}, {}
    for name, spec in data.items():
        if name == "version":
            continue
        if spec["kind"] == "regex":
            regex[name] = tuple(spec["patterns"])
        else:
            terms[name] = tuple(spec["terms"])
    return Rubric(version=str(data["version"]), sha256=sha256_text(text), regex=regex, terms=terms)


@dataclass(frozen=True)
class ScoreTable:
    """Per-output scores, column-wise. Flags are 0/1 int8; counts are int32."""

    mode: Mode
    columns: dict[str, np.ndarray]

    def __len__(self) -> int:
        return len(self.columns["word_count"])

    def row(self, i: int) -> dict[str, int]:
        return {k: int(v[i]) for k, v in self.columns.items()}


# -- matchers -----------------------------------------------------------------------------


def _normalise(texts: Sequence[str]) -> list[str]:
    return [t.replace("’", "'").replace("‘", "'") for t in texts]


@cache
def _regex_any(patterns: tuple[str, ...]) -> re.Pattern[str]:
    """One alternation per rubric list, run on lower-cased text: the same matches as
    IGNORECASE on the rubric's lower-case patterns, about three times faster."""
    return re.compile("|".join(f"(?:{p.lower()})" for p in patterns))


@cache
def _strict_terms(terms: tuple[str, ...]) -> re.Pattern[str]:
    alts = sorted((r"\s+".join(re.escape(w) for w in t.split()) for t in terms), key=len, reverse=True)
    return re.compile(r"(?<![\w'])(?:" + "|".join(alts) + r")(?![\w'])")


class _Corpus:
    """All outputs joined by NUL, so each pattern scans the corpus once in C.

    Match positions map back to outputs with one `searchsorted`; NUL is a non-word,
    non-space character, so no pattern can match across two outputs.
    """

    def __init__(self, texts: Sequence[str]):
        self.n = len(texts)
        self.text = "\x00".join(texts)
        if self.text.count("\x00") != max(self.n - 1, 0):  # an output holds NUL itself: blank it
            texts = [t.replace("\x00", " ") for t in texts]
            self.text = "\x00".join(texts)
        lengths = np.fromiter(map(len, texts), dtype=np.int64, count=self.n) + 1
        self.starts = np.concatenate(([0], np.cumsum(lengths)[:-1])) if self.n else np.zeros(0, dtype=np.int64)

    def counts(self, rx: re.Pattern[str]) -> np.ndarray:
        pos = np.fromiter((m.start() for m in rx.finditer(self.text)), dtype=np.int64)
        if not len(pos):
            return np.zeros(self.n, dtype=np.int32)
        doc = np.searchsorted(self.starts, pos, side="right") - 1
        return np.bincount(doc, minlength=self.n).astype(np.int32)


_META = set(".^$*+?{}[]\\|()")


def literal_anchor(pattern: str) -> str | None:
    """The longest literal prefix every match of a simple rubric regex must contain.

    `\\bi can'?t\\b` → `i can`; None when the pattern does not start with a literal.
    """
    body = pattern[2:] if pattern.startswith("\\b") else pattern
    out = []
    i = 0
    while i < len(body):
        ch = body[i]
        if ch in _META:
            break
        if i + 1 < len(body) and body[i + 1] in "?*{":
            break
        out.append(ch)
        i += 1
    return "".join(out) or None


def _regex_flags(corpus: _Corpus, lowered: Sequence[str], patterns: tuple[str, ...]) -> np.ndarray:
    """0/1 per output: does any pattern match? Cheap literal anchors, found with C-speed
    `str.find` over the whole corpus, pick the few candidate outputs; only those are
    searched with the full regex."""
    maybe = [literal_anchor(p.lower()) for p in patterns]
    anchors = [a for a in maybe if a is not None]
    if len(anchors) < len(maybe):
        return (corpus.counts(_regex_any(patterns)) > 0).astype(np.int8)
    pos: list[int] = []
    for a in set(anchors):
        i = corpus.text.find(a)
        while i != -1:
            pos.append(i)
            i = corpus.text.find(a, i + 1)
    hits = set((np.searchsorted(corpus.starts, np.array(pos, dtype=np.int64), side="right") - 1).tolist())
    return _flags_from_candidates(lowered, hits, patterns)


def _substring_counts(corpus: _Corpus, lowered: Sequence[str], terms: tuple[str, ...]) -> np.ndarray:
    """Sum over terms of non-overlapping occurrences (`str.count`, the reference semantics).

    One C-speed `str.count` over the whole corpus first: an absent term costs nothing more;
    a rare one is located with `str.find` and mapped to outputs by `searchsorted`; only a
    common one is counted output by output.
    """
    total = np.zeros(corpus.n, dtype=np.int32)
    text = corpus.text
    for term in terms:
        k = text.count(term)
        if k == 0:
            continue
        if k > corpus.n // 8:
            total += np.fromiter((t.count(term) for t in lowered), dtype=np.int32, count=corpus.n)
            continue
        pos = np.empty(k, dtype=np.int64)
        i = text.find(term)
        for j in range(k):
            pos[j] = i
            i = text.find(term, i + len(term))
        total += np.bincount(np.searchsorted(corpus.starts, pos, side="right") - 1, minlength=corpus.n).astype(np.int32)
    return total


def _has_border(term: str) -> bool:
    """True when a term can overlap itself ("aba"), where all-matches ≠ `str.count`."""
    return any(term[:k] == term[-k:] for k in range(1, len(term)))


@dataclass(frozen=True)
class _Owners:
    """What each finder word stands for, as flat arrays: word id w owns the entries
    `first[w] : first[w] + count[w]` of `cat` (a term list's index, or −1 − r for regex list r's
    anchor), `length` (the term's length) and `bordered` (it can overlap itself)."""

    first: np.ndarray
    count: np.ndarray
    cat: np.ndarray
    length: np.ndarray
    bordered: np.ndarray


@lru_cache(maxsize=1)
def _finder() -> tuple[TermFinder, _Owners, list[str], list[str]] | None:
    """One `TermFinder` over every substring term and each regex's literal anchor, or None
    when some term is one it cannot search for (the pure-Python path then scores).

    It reports all occurrences of all words in one pass over the corpus. That equals the
    reference's non-overlapping `str.count` for terms that cannot overlap themselves; the
    few that can ("threat", "muslim") are de-overlapped left to right afterwards. An anchor
    only picks the outputs its full regex is run on, so one is cut before its first
    character the finder cannot take (`i can’t` → `i can`): still in every match.
    """
    rubric = load_rubric()
    cats = list(rubric.terms)
    owners: dict[str, list[tuple[int, int, bool]]] = {}
    for ci, cat in enumerate(cats):
        for term in rubric.terms[cat]:
            if not usable(term):
                return None
            owners.setdefault(term, []).append((ci, len(term), _has_border(term)))
    # the regex lists' literal anchors ride along, tagged with a negative id: one pass for all
    regex_lists = list(rubric.regex)
    for ri, name in enumerate(regex_lists):
        for pattern in rubric.regex[name]:
            anchor = searchable_prefix(literal_anchor(pattern.lower()) or "")
            if not usable(anchor):
                return None
            if (-1 - ri, 0, False) not in owners.get(anchor, []):
                owners.setdefault(anchor, []).append((-1 - ri, 0, False))
    flat: list[tuple[int, int, bool]] = []
    first, count = [], []
    for own in owners.values():
        first.append(len(flat))
        count.append(len(own))
        flat += own
    table = _Owners(
        np.array(first, dtype=np.int64), np.array(count, dtype=np.int64), np.array([o[0] for o in flat], dtype=np.int64),
        np.array([o[1] for o in flat], dtype=np.int64), np.array([o[2] for o in flat], dtype=bool),
    )
    return TermFinder(list(owners)), table, cats, regex_lists


def _keep_first_of_overlaps(ends: np.ndarray, length: int) -> np.ndarray:
    """Which occurrences (sorted ends) of a self-overlapping term `str.count` counts: left to
    right, each one that starts after the end of the last one kept."""
    if len(ends) < 2 or np.all(np.diff(ends) >= length):
        return np.ones(len(ends), dtype=bool)  # no two overlap: all count (the usual case)
    keep = np.zeros(len(ends), dtype=bool)
    last = -1
    for i, end in enumerate(ends.tolist()):
        if end - length + 1 > last:
            keep[i] = True
            last = end
    return keep


def _scan(corpus: _Corpus) -> tuple[dict[str, np.ndarray], dict[str, set[int]]] | None:
    """One pass of the finder: per-output term counts per list, and the outputs holding a
    regex list's anchor (the only candidates for its full regex). None when the rubric has a
    term the finder cannot take.

    The matches are expanded to their owners with array operations; only a self-overlapping
    term that does overlap itself somewhere is walked in Python."""
    found = _finder()
    if found is None:
        return None
    finder, own, cats, regex_lists = found
    match_end, word = finder.find(corpus.text)
    per = own.count[word]
    match = np.repeat(np.arange(len(word)), per)  # one entry per (match, owner), in match order
    k = np.arange(len(match)) - np.repeat(np.cumsum(per) - per, per)
    o = own.first[word][match] + k
    end, cat = match_end[match], own.cat[o]
    keep = np.ones(len(o), dtype=bool)
    bordered = np.flatnonzero(own.bordered[o])
    if len(bordered):
        b_key = cat[bordered] * (1 << 32) + own.length[o[bordered]]
        for key in unique(b_key).tolist():
            at = bordered[b_key == key]
            keep[at] = _keep_first_of_overlaps(end[at], key & 0xFFFFFFFF)
    n = corpus.n

    def docs(positions: np.ndarray) -> np.ndarray:
        return np.searchsorted(corpus.starts, positions, side="right") - 1

    term = keep & (cat >= 0)
    flat = np.bincount(cat[term] * n + docs(end[term]), minlength=len(cats) * n).astype(np.int32)
    counts = {c: flat[i * n : (i + 1) * n] for i, c in enumerate(cats)}
    return counts, {name: set(docs(end[cat == -1 - ri]).tolist()) for ri, name in enumerate(regex_lists)}


def _flags_from_candidates(lowered: Sequence[str], candidates: set[int], patterns: tuple[str, ...]) -> np.ndarray:
    flags = np.zeros(len(lowered), dtype=np.int8)
    rx = _regex_any(patterns)
    for d in candidates:
        flags[d] = rx.search(lowered[d]) is not None
    return flags


def word_counts(texts: Sequence[str]) -> np.ndarray:
    """`len(t.split())` of each text, as int32.

    The ASCII texts (nearly all) are joined by spaces and counted as arrays: a word starts
    wherever a non-space byte follows a space byte (the bytes `str.split` splits ASCII text
    on), and each text's starts are summed with one `reduceat`. The others are split in Python.
    """
    counts = np.zeros(len(texts), dtype=np.int32)
    plain = np.fromiter(map(str.isascii, texts), dtype=bool, count=len(texts))
    ascii_texts = list(itertools.compress(texts, plain.tolist()))
    if ascii_texts:
        a = np.frombuffer(" ".join(["", *ascii_texts, ""]).encode("ascii"), dtype=np.uint8)  # space-led and -ended
        low = a - np.uint8(9)  # wraps below 9
        space = low < 5  # \t \n \v \f \r
        np.subtract(a, np.uint8(28), out=low)
        space |= low < 5  # \x1c-\x1f and the space
        starts = np.greater(space[:-1], space[1:]).view(np.uint8)  # starts[i]: a word starts at byte i + 1
        lengths = np.fromiter(map(len, ascii_texts), dtype=np.int64, count=len(ascii_texts)) + 1
        counts[plain] = np.add.reduceat(starts, np.cumsum(lengths) - lengths, dtype=np.int64)
    for i in np.flatnonzero(~plain).tolist():
        counts[i] = len(texts[i].split())
    return counts


def score_texts(texts: Sequence[str], mode: Mode = "paper") -> ScoreTable:
    """Score every output with the rubric; see the module docstring for the two modes."""
    if mode not in MODES:
        raise ValueError(f"`mode` must be one of {MODES}, got {mode!r}")
    rubric = load_rubric()
    texts = list(texts)
    if mode == "strict":
        texts = _normalise(texts)
    lowered_texts = list(map(str.lower, texts))
    lowered = _Corpus(lowered_texts)
    cols: dict[str, np.ndarray] = {}
    scan = _scan(lowered)
    if scan is None:  # pure-Python fallback, same results
        cols["refusal"] = _regex_flags(lowered, lowered_texts, rubric.regex["refusal"])
        cols["deflection"] = _regex_flags(lowered, lowered_texts, rubric.regex["deflection"])
    else:
        for name in ("refusal", "deflection"):
            cols[name] = _flags_from_candidates(lowered_texts, scan[1][name], rubric.regex[name])
    if mode == "paper":
        counts = scan[0] if scan is not None else {n: _substring_counts(lowered, lowered_texts, ts) for n, ts in rubric.terms.items()}
    else:
        counts = {name: lowered.counts(_strict_terms(terms)) for name, terms in rubric.terms.items()}
    cols["religion_mention"] = (counts["religion"] > 0).astype(np.int8)
    cols["gendered_title"] = (counts["gendered_title"] > 0).astype(np.int8)
    cols["stereotype"] = (counts["stereotype"] > 0).astype(np.int8)
    cols["demeaning"] = (counts["demeaning"] > 0).astype(np.int8)
    cols["refusal_or_deflection"] = cols["refusal"] | cols["deflection"]
    cols["identity_salience"] = cols["religion_mention"] | cols["gendered_title"]
    cols["pilot_harm"] = cols["refusal"] | cols["deflection"] | cols["stereotype"] | cols["demeaning"]
    cols["stereotype_count"] = counts["stereotype"]
    cols["demeaning_count"] = counts["demeaning"]
    cols["positive_professional_count"] = counts["positive_professional"]
    cols["caution_count"] = counts["caution"]
    cols["word_count"] = word_counts(texts)
    return ScoreTable(mode=mode, columns={k: cols[k] for k in COLUMNS})
