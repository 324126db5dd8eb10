"""VADER's compound score, computed as vaderSentiment 3.3.2 computes it, in a third of the CPU.

`SentimentIntensityAnalyzer.polarity_scores` walks every token through method calls that
lower-case the whole token list again for each sentiment word; on the committed outputs
(~100 tokens each) that was the evaluators' largest cost. `Compound` keeps its arithmetic,
in its order, and changes only how the tokens are read:

* a token's lower-cased VADER word (punctuation stripped unless that leaves ≤ 2 characters)
  is looked up in a per-scorer cache, so each distinct token is stripped and lowered once;
* only lexicon words get a valence; every other token's 0 is left out, which changes neither
  the sum (adding ±0 to VADER's running sum is exact) nor the 'but' check (a 0 stays 0 and
  never matches `list.index` of a non-zero value), so both run on the non-zero valences only;
* the idiom check runs only when its six-word window holds a word of some multi-word idiom,
  and the booster, negation, idiom and 'least' checks only when the window holds a word
  any of them reads (otherwise they add 0.0);
* `isupper()` is read from the raw token (stripping ASCII punctuation, which has no case,
  cannot change it).

Texts with emoji characters (VADER rewrites them into words first) and non-strings go to
the published analyzer. The parity test compares both on every committed output.
"""

from __future__ import annotations

import string
from typing import Any

from vaderSentiment.vaderSentiment import (
    BOOSTER_DICT,
    C_INCR,
    N_SCALAR,
    NEGATE,
    SPECIAL_CASES,
    SentimentIntensityAnalyzer,
    normalize,
)

_NEGATE = frozenset(NEGATE)
_PUNCTUATION = string.punctuation
_IDIOM_KEYS = frozenset(max(p.split(), key=len) for p in (*SPECIAL_CASES, *BOOSTER_DICT) if " " in p)
"""One word (the longest) of each multi-word special case and booster, the only phrases the idiom
check can match: a window holding none of these words matches none of them."""


class Compound:
    """`polarity_scores(text)["compound"]` of a vaderSentiment 3.3.2 analyzer."""

    def __init__(self, analyzer: SentimentIntensityAnalyzer) -> None:
        self._analyzer = analyzer
        self._lexicon: dict[str, float] = analyzer.lexicon
        self._scored = frozenset(analyzer.lexicon).difference(BOOSTER_DICT)
        self._emoji = frozenset(k for k in analyzer.emojis if len(k) == 1)
        self._ascii_has_none = all(not k.isascii() for k in self._emoji)  # then an ASCII text (an O(1) test) has none
        self._lows: dict[str, str] = {}
        self._readers = {*BOOSTER_DICT, *_NEGATE, "never", "without", "so", "this", "least", *_IDIOM_KEYS}
        """Words that can change a nearby lexicon word's valence; lower-cased tokens with "n't" join as they are met."""

    def _lowered(self, tokens: list[str]) -> list[str]:
        """SentiText's words, lower-cased: `token.strip(punctuation)` unless that leaves ≤ 2 characters."""
        cache = self._lows
        for token in set(tokens).difference(cache):
            stripped = token.strip(_PUNCTUATION)
            low = cache[token] = (token if len(stripped) <= 2 else stripped).lower()
            if "n't" in low:
                self._readers.add(low)
        return list(map(cache.__getitem__, tokens))

    def __call__(self, text: Any) -> float:
        if not isinstance(text, str) or not ((text.isascii() and self._ascii_has_none) or self._emoji.isdisjoint(text)):
            return self._analyzer.polarity_scores(text)["compound"]
        tokens = text.split()
        if not tokens:
            return 0.0
        lows = self._lowered(tokens)
        n = len(tokens)
        cap_diff = 0 < n - sum(map(str.isupper, tokens)) < n
        scored = self._scored
        values: list[float] = []
        positions: list[int] = []
        for i in [i for i, w in enumerate(lows) if w in scored]:
            if lows[i] == "kind" and i < n - 1 and lows[i + 1] == "of":
                continue
            v = self._valence(tokens, lows, i, cap_diff)
            if v:
                values.append(v)
                positions.append(i)
        if "but" in lows:
            _but_check(values, positions, lows.index("but"))
        total = float(sum(values))
        if total:
            amplifier = self._analyzer._punctuation_emphasis(text)
            total = total + amplifier if total > 0 else total - amplifier
        return round(normalize(total), 4)

    def _valence(self, tokens: list[str], lows: list[str], i: int, cap_diff: bool) -> float:
        """`SentimentIntensityAnalyzer.sentiment_valence` for lexicon word `i`, step for step."""
        lexicon = self._lexicon
        low = lows[i]
        n = len(lows)
        valence = lexicon[low]
        if low == "no" and i != n - 1 and lows[i + 1] in lexicon:
            valence = 0.0
        if (i > 0 and lows[i - 1] == "no") or (i > 1 and lows[i - 2] == "no") \
                or (i > 2 and lows[i - 3] == "no" and lows[i - 1] in ("or", "nor")):
            valence = lexicon[low] * N_SCALAR
        if tokens[i].isupper() and cap_diff:
            valence = valence + C_INCR if valence > 0 else valence - C_INCR
        if self._readers.isdisjoint(lows[max(0, i - 3) : i + 3]):
            return valence  # no booster, negation, 'least', 'so'/'this' or idiom nearby: the rest adds 0.0
        for start_i in range(3):
            j = i - (start_i + 1)
            if j < 0 or lows[j] in lexicon:
                continue
            s = 0.0  # scalar_inc_dec
            if lows[j] in BOOSTER_DICT:
                s = BOOSTER_DICT[lows[j]]
                if valence < 0:
                    s *= -1
                if tokens[j].isupper() and cap_diff:
                    s = s + C_INCR if valence > 0 else s - C_INCR
            if start_i == 1 and s != 0:
                s = s * 0.95
            if start_i == 2 and s != 0:
                s = s * 0.9
            valence = valence + s
            # _negation_check
            if start_i == 0:
                if lows[j] in _NEGATE or "n't" in lows[j]:
                    valence = valence * N_SCALAR
            elif start_i == 1:
                a, b = lows[j], lows[i - 1]
                if a == "never" and (b == "so" or b == "this"):
                    valence = valence * 1.25
                elif a == "without" and b == "doubt":
                    pass
                elif a in _NEGATE or "n't" in a:
                    valence = valence * N_SCALAR
            else:
                a, b, c = lows[j], lows[i - 2], lows[i - 1]
                if (a == "never" and (b == "so" or b == "this")) or (c == "so" or c == "this"):
                    valence = valence * 1.25
                elif a == "without" and (b == "doubt" or c == "doubt"):
                    pass
                elif a in _NEGATE or "n't" in a:
                    valence = valence * N_SCALAR
            if start_i == 2 and not _IDIOM_KEYS.isdisjoint(lows[i - 3 : i + 3]):
                valence = _special_idioms_check(valence, lows, i)
        if i > 1 and lows[i - 1] not in lexicon and lows[i - 1] == "least":  # _least_check
            if lows[i - 2] != "at" and lows[i - 2] != "very":
                valence = valence * N_SCALAR
        elif i > 0 and lows[i - 1] not in lexicon and lows[i - 1] == "least":
            valence = valence * N_SCALAR
        return valence


def _special_idioms_check(valence: float, lows: list[str], i: int) -> float:
    onezero = f"{lows[i - 1]} {lows[i]}"
    twoonezero = f"{lows[i - 2]} {lows[i - 1]} {lows[i]}"
    twoone = f"{lows[i - 2]} {lows[i - 1]}"
    threetwoone = f"{lows[i - 3]} {lows[i - 2]} {lows[i - 1]}"
    threetwo = f"{lows[i - 3]} {lows[i - 2]}"
    for seq in (onezero, twoonezero, twoone, threetwoone, threetwo):
        if seq in SPECIAL_CASES:
            valence = SPECIAL_CASES[seq]
            break
    if len(lows) - 1 > i:
        zeroone = f"{lows[i]} {lows[i + 1]}"
        if zeroone in SPECIAL_CASES:
            valence = SPECIAL_CASES[zeroone]
    if len(lows) - 1 > i + 1:
        zeroonetwo = f"{lows[i]} {lows[i + 1]} {lows[i + 2]}"
        if zeroonetwo in SPECIAL_CASES:
            valence = SPECIAL_CASES[zeroonetwo]
    for n_gram in (threetwoone, threetwo, twoone):
        if n_gram in BOOSTER_DICT:
            valence = valence + BOOSTER_DICT[n_gram]
    return valence


def _but_check(values: list[float], positions: list[int], but: int) -> None:
    """VADER's `_but_check` on the non-zero valences (in place), its `list.index` quirk included:
    each value scales the *first* equal value, before 'but' by 0.5 and after it by 1.5."""
    for p in range(len(values)):
        v = values[p]
        si = values.index(v)
        if positions[si] < but:
            values[si] = v * 0.5
        elif positions[si] > but:
            values[si] = v * 1.5
