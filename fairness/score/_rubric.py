"""Score: a rubric's term lists over many outputs at once.

A compiled `Rubric` (from the suite's `rubric:` key, or the paper's built-in `rubric.yaml`) scores
outputs into a `ScoreTable`: one numpy column per metric, aligned with the input order (the caller
keeps the row ids). `score_texts` is the paper rubric's entry point. Nothing here hard-codes a
keyword: the lists live in rubric files.

Modes:
    paper   Substring lists keep the reference scorer's semantics, for parity: counts are the
            sum over terms of non-overlapping occurrences (so "leadership" counts `leader` and
            `leadership`), traps included.
    strict  Every substring list is matched as a `word` list: whole words on apostrophe-normalised
            text (’ → '): a term must not touch a letter, digit or apostrophe on either side;
            multi-word terms allow any whitespace between words.

Speed: the insensitive substring lists (the paper's) are found in one pass of a `TermFinder` over
all outputs, which also picks the few outputs each simple regex list must be run on.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cache, cached_property
from typing import Any, NamedTuple

import numpy as np

from fairness._util.arrays import unique
from fairness._util.errors import FairnessError
from fairness.score._compiled import (  # noqa: F401 - the names callers of this module use
    INLINE,
    MODES,
    PAPER_RUBRIC_FILE,
    Mode,
    Rubric,
    compile_rubric,
    effective_match,
    load_rubric,
    paper_rubric,
    resolve_rubric,
)
from fairness.score._spec import MetricDef
from fairness.score._terms import TermFinder, searchable_prefix, usable


@dataclass(frozen=True)
class ScoreTable:
    """Per-output scores, column-wise, one column per metric. Flags are 0/1 int8; counts are int32;
    a scorer's values are float64 (NaN: no valid score)."""

    mode: Mode
    columns: dict[str, np.ndarray]

    def __len__(self) -> int:
        return len(next(iter(self.columns.values()))) if self.columns else 0

    def row(self, i: int) -> dict[str, int]:
        return {k: int(v[i]) for k, v in self.columns.items()}


# -- matchers -----------------------------------------------------------------------------


def _normalise(texts: Sequence[str]) -> list[str]:
    return [t.replace("’", "'").replace("‘", "'") for t in texts]


def lower_pattern(pattern: str) -> str:
    """`pattern` with its letters lower-cased except escapes (`\\S` stays `\\S`, `\\N{…}` whole): what a
    case-insensitive regex list runs on the lower-cased output."""
    return re.sub(r"\\N\{[^}]*\}|\\.|[^\\]+", lambda m: m.group(0) if m.group(0).startswith("\\") else m.group(0).lower(),
                  pattern, flags=re.DOTALL)


@cache
def _regex_any(patterns: tuple[str, ...], lower: bool = True) -> re.Pattern[str]:
    """One alternation per rubric list. A case-insensitive list runs on lower-cased text with
    lower-cased patterns: the same matches as IGNORECASE on the rubric's lower-case patterns,
    about three times faster."""
    return re.compile("|".join(f"(?:{lower_pattern(p) if lower else p})" for p in patterns))


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
        # an output holds NUL itself: blank it (asked of each output: one with a character beyond
        # Latin-1 widens the joined text, and counting NULs in it cost ~5x the outputs' own searches)
        if any("\x00" in t for t in texts):
            texts = [t.replace("\x00", " ") for t in texts]
        self.texts = texts
        self.text = "\x00".join(texts)
        lengths = np.fromiter(map(len, texts), dtype=np.int64, count=self.n) + 1
        self.starts = np.concatenate(([0], np.cumsum(lengths)[:-1])) if self.n else np.zeros(0, dtype=np.int64)

    @cached_property
    def latin1(self) -> bytes:
        """`text.encode("latin-1", "replace")` (what `TermFinder.find` scans), made output by output:
        an output of ASCII (nearly all) encodes by a copy, where the joined text, widened by the few
        outputs with a character beyond Latin-1, went character by character (~13 instructions each)."""
        return b"\x00".join([t.encode("latin-1", "replace") for t in self.texts])

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
    if "|" in pattern:  # an alternative could match without the prefix
        return None
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


def _regex_flags(corpus: _Corpus, lowered: Sequence[str], patterns: tuple[str, ...], lower: bool = True) -> np.ndarray:
    """0/1 per output: does any pattern match? Cheap literal anchors, found with C-speed
    `str.find` over the whole corpus, pick the few candidate outputs; only those are
    searched with the full regex (every output, when a pattern has no anchor)."""
    maybe = [literal_anchor(lower_pattern(p) if lower else p) for p in patterns]
    anchors = [a for a in maybe if a is not None]
    if len(anchors) < len(maybe):
        return _flags_from_candidates(lowered, set(range(corpus.n)), patterns, lower)
    pos: list[int] = []
    for a in set(anchors):
        i = corpus.text.find(a)
        while i != -1:
            pos.append(i)
            i = corpus.text.find(a, i + 1)
    hits = set((np.searchsorted(corpus.starts, np.array(pos, dtype=np.int64), side="right") - 1).tolist())
    return _flags_from_candidates(lowered, hits, patterns, lower)


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


class _Owners(NamedTuple):
    """What each finder word stands for, as flat arrays: word id w owns the entries
    `first[w] : first[w] + owned[w]` of `cat` (a term list's index, or −1 − r for regex list r's
    anchor), `length` (the term's length) and `bordered` (it can overlap itself)."""

    first: np.ndarray
    owned: np.ndarray
    cat: np.ndarray
    length: np.ndarray
    bordered: np.ndarray


Plan = tuple[TermFinder, "_Owners", list[str], list[str]]
"""A finder over some substring lists' terms and regex lists' anchors, what each word stands for,
and the names of those lists (substring, regex)."""


def _anchors(patterns: Sequence[str]) -> list[str] | None:
    """Each pattern's literal anchor (lower-cased) cut to what the finder can take; None when one has none."""
    out = [searchable_prefix(literal_anchor(lower_pattern(p)) or "") for p in patterns]
    return out if all(map(usable, out)) else None


def _plan(terms: Mapping[str, Sequence[str]], regex: Mapping[str, Sequence[str]]) -> Plan | None:
    """One `TermFinder` over every term of `terms` and each literal anchor of `regex`'s patterns, or
    None when some term or anchor is one it cannot search for (the pure-Python path then scores).

    It reports all occurrences of all words in one pass over the corpus. That equals the
    reference's non-overlapping `str.count` for terms that cannot overlap themselves; the
    few that can ("threat", "muslim") are de-overlapped left to right afterwards. An anchor
    only picks the outputs its full regex is run on, so one is cut before its first
    character the finder cannot take (`i can’t` → `i can`): still in every match.
    """
    cats = list(terms)
    owners: dict[str, list[tuple[int, int, bool]]] = {}
    for ci, cat in enumerate(cats):
        for term in terms[cat]:
            if not usable(term):
                return None
            owners.setdefault(term, []).append((ci, len(term), _has_border(term)))
    # the regex lists' literal anchors ride along, tagged with a negative id: one pass for all
    regex_lists = list(regex)
    for ri, name in enumerate(regex_lists):
        anchors = _anchors(regex[name])
        if anchors is None:
            return None
        for anchor in anchors:
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


def _finder() -> Plan | None:
    """The paper rubric's finder (see `_plan`)."""
    return paper_rubric().plan


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


Scan = tuple[dict[str, np.ndarray], dict[str, set[int]]]


def _scan(corpus: _Corpus) -> Scan | None:
    """`_scan_with` the paper rubric's finder."""
    return _scan_with(_finder(), corpus)


def _scan_with(found: Plan | None, corpus: _Corpus) -> Scan | None:
    """One pass of the finder: per-output term counts per list, and the outputs holding a
    regex list's anchor (the only candidates for its full regex). None when the rubric has a
    term the finder cannot take.

    The matches are expanded to their owners with array operations; only a self-overlapping
    term that does overlap itself somewhere is walked in Python."""
    if found is None:
        return None
    finder, own, cats, regex_lists = found
    match_end, word = finder.find(corpus.text, corpus.latin1)
    per = own.owned[word]
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


def _flags_from_candidates(lowered: Sequence[str], candidates: set[int], patterns: tuple[str, ...],
                           lower: bool = True) -> np.ndarray:
    flags = np.zeros(len(lowered), dtype=np.int8)
    rx = _regex_any(patterns, lower)
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


def _regex_counts(texts: Sequence[str], patterns: tuple[str, ...], lower: bool) -> np.ndarray:
    """Per output, the non-overlapping matches (`re.finditer`) of each pattern, summed over patterns;
    each output is searched on its own, so no pattern can match across two outputs."""
    total = np.zeros(len(texts), dtype=np.int32)
    for p in patterns:
        rx = re.compile(lower_pattern(p) if lower else p)
        total += np.fromiter((sum(1 for _ in rx.finditer(t)) for t in texts), dtype=np.int32, count=len(texts))
    return total


class _Scoring:
    """One `Rubric.score` call: the corpora it needs, made once and only when a list needs them."""

    def __init__(self, rubric: Rubric, texts: list[str], mode: Mode, external: Mapping[str, np.ndarray]):
        self.rubric, self.mode, self.external = rubric, mode, external
        self.texts = _normalise(texts) if mode == "strict" else texts
        self.lowered_texts = list(map(str.lower, self.texts))
        self.lowered = _Corpus(self.lowered_texts)
        # the paper rubric scans through the module's `_scan` (its fallback is tested by patching it)
        self.scan = _scan(self.lowered) if rubric is paper_rubric() else _scan_with(rubric.plan, self.lowered)
        self.values: dict[str, np.ndarray] = {}
        self.counts: dict[str, np.ndarray] = {}

    @cached_property
    def raw(self) -> _Corpus:
        return _Corpus(self.texts)

    @cached_property
    def words_lowered(self) -> _Corpus:
        """Apostrophe-normalised, lower-cased outputs (`word` lists; already normalised in strict mode)."""
        return self.lowered if self.mode == "strict" else _Corpus(_normalise(self.lowered_texts))

    @cached_property
    def words_raw(self) -> _Corpus:
        return self.raw if self.mode == "strict" else _Corpus(_normalise(self.texts))

    def list_counts(self, name: str) -> np.ndarray:
        if name in self.counts:
            return self.counts[name]
        lst = self.rubric.spec.lists[name]
        lower = lst.case == "insensitive"
        match = effective_match(lst, self.mode)
        if match == "regex":
            out = _regex_counts(self.lowered_texts if lower else self.texts, lst.items, lower)
        elif match == "word":
            terms = tuple(_normalise([t.lower() if lower else t for t in lst.items]))
            out = (self.words_lowered if lower else self.words_raw).counts(_strict_terms(terms))
        elif not lower:
            out = _substring_counts(self.raw, self.texts, lst.items)
        elif self.scan is not None and name in self.scan[0]:
            out = self.scan[0][name]
        else:
            out = _substring_counts(self.lowered, self.lowered_texts, tuple(t.lower() for t in lst.items))
        self.counts[name] = out
        return out

    def list_flag(self, name: str) -> np.ndarray:
        lst = self.rubric.spec.lists[name]
        if lst.match != "regex" or name in self.rubric.counted:
            return (self.list_counts(name) > 0).astype(np.int8)
        lower = lst.case == "insensitive"
        if lower and self.scan is not None and name in self.scan[1]:
            return _flags_from_candidates(self.lowered_texts, self.scan[1][name], lst.items)
        return _regex_flags(self.lowered if lower else self.raw, self.lowered_texts if lower else self.texts, lst.items, lower)

    def value(self, name: str) -> np.ndarray:
        if name in self.values:
            return self.values[name]
        m: MetricDef = self.rubric.spec.metrics[name]
        key, source = m.source
        if key == "list":
            out = self.list_flag(source) if m.kind == "flag" else self.list_counts(source)
        elif key in ("any_of", "all_of"):
            parts = [self.value(x) for x in source]
            if all(p.dtype == np.int8 for p in parts):
                out = parts[0]
                for p in parts[1:]:
                    out = out | p if key == "any_of" else out & p
            else:  # a scorer's flag among them: float, NaN (no valid score) propagates
                out = (np.maximum if key == "any_of" else np.minimum).reduce([p.astype(np.float64) for p in parts])
        elif key == "builtin":
            out = word_counts(self.texts)
        else:
            out = self._external(name, source)
        self.values[name] = out
        return out

    def _external(self, metric: str, scorer: str) -> np.ndarray:
        if scorer not in self.external:
            raise FairnessError(f"metric `{metric}` takes its values from scorer `{scorer}`, but no scores of "
                                f"`{scorer}` were given (its recorded scores are missing)")
        values = np.asarray(self.external[scorer], dtype=np.float64)
        if values.shape != (len(self.texts),):
            raise FairnessError(f"metric `{metric}`: scorer `{scorer}` gave {values.size} scores for "
                                f"{len(self.texts)} outputs")
        return values

    def table(self) -> ScoreTable:
        return ScoreTable(mode=self.mode, columns={m.column: self.value(name) for name, m in self.rubric.metrics.items()})


def score_texts(texts: Sequence[str], mode: Mode = "paper") -> ScoreTable:
    """Score every output with the paper's rubric; see the module docstring for the two modes."""
    return paper_rubric().score(texts, mode)


def __getattr__(name: str) -> Any:
    if name == "COLUMNS":  # the paper rubric's score columns, in order
        return tuple(m.column for m in paper_rubric().metrics.values())
    raise AttributeError(name)
