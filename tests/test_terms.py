"""The rubric's multi-word finder: every occurrence of every word, exactly where `str` finds it."""

from __future__ import annotations

import random

import numpy as np
import pytest

from fairness.score import _terms
from fairness.score._terms import TermFinder, searchable_prefix, usable

WORDS = ["mr.", "ms.", "aba", "abab", "leader", "leadership", "lead", "consideration", "workplace consideration",
         "should not be judged based on", "i can", "threat", "muslim", "x y", "zzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzz"]
PIECES = ["a", "b", "ab", "mr.", "ms", ".", " ", "lead", "er", "ship", "consider", "ation", "workplace ", "threa", "t",
          "musli", "m", "x", "y", "z" * 9, "i can", "should not be judged based on", "é", "’", "😀", "İ", "?", "\x00",
          "\n", "\x7f", "ÿ", "ĀĀ"]


def occurrences(text: str, words: list[str]) -> list[tuple[int, int]]:
    """(end, word) of every occurrence, overlapping ones included, by brute force."""
    found = [(i + len(w) - 1, k) for k, w in enumerate(words) for i in range(len(text)) if text.startswith(w, i)]
    return sorted(found)


def test_every_occurrence_is_found_at_its_last_character():
    finder = TermFinder(WORDS)
    rng = random.Random(7)
    for _ in range(400):
        text = "".join(rng.choice(PIECES) for _ in range(rng.randrange(40)))
        end, word = finder.find(text)
        assert sorted(zip(end.tolist(), word.tolist(), strict=True)) == occurrences(text, WORDS), text
        assert end.tolist() == sorted(end.tolist())


def test_matches_at_the_edges_of_the_text_and_of_each_hashed_block(monkeypatch):
    monkeypatch.setattr(_terms, "_BLOCK", 16)
    finder = TermFinder(WORDS)
    text = "mr." + "é" * 11 + "leadership" + "ab" * 20 + "ms."
    end, word = finder.find(text)
    assert list(zip(end.tolist(), word.tolist(), strict=True)) == occurrences(text, WORDS)
    assert finder.find("")[0].tolist() == []
    assert finder.find("ms.")[0].tolist() == [2]


def test_a_character_outside_latin_1_never_matches_as_a_question_mark():
    """Such characters are read as `?`, which no word may hold: `a’b` is not `a?b`."""
    assert not usable("a?b")
    end, _ = TermFinder(["abc"]).find("ab😀abc")
    assert end.tolist() == [5]


def test_random_text_over_many_characters_passes_hash_collisions_through_the_exact_check():
    finder = TermFinder(WORDS)
    rng = np.random.default_rng(3)
    text = "".join(map(chr, rng.integers(32, 127, 200_000).tolist()))
    end, word = finder.find(text)
    assert list(zip(end.tolist(), word.tolist(), strict=True)) == occurrences(text, WORDS)


@pytest.mark.parametrize("word", ["ab", "a?c", "ab\x00", "café", ""])
def test_words_it_cannot_search_for_are_refused(word):
    assert not usable(word)
    with pytest.raises(ValueError, match="at least 3 characters"):
        TermFinder(["fine", word])


def test_an_anchor_is_cut_before_its_first_character_the_finder_cannot_take():
    assert searchable_prefix("i can’t") == "i can"
    assert searchable_prefix("why?") == "why"
    assert searchable_prefix("plain") == "plain"


def test_the_callers_latin1_bytes_find_what_the_text_does():
    from fairness.score._rubric import _Corpus

    finder = TermFinder(WORDS)
    rng = random.Random(11)
    for _ in range(200):
        texts = ["".join(rng.choice(PIECES) for _ in range(rng.randrange(20))) for _ in range(rng.randrange(6))]
        corpus = _Corpus(texts)
        assert "\x00".join(t.replace("\x00", " ") for t in texts) == corpus.text  # an output's own NUL blanked
        assert corpus.latin1 == corpus.text.encode("latin-1", "replace")
        got, want = finder.find(corpus.text, corpus.latin1), finder.find(corpus.text)
        assert np.array_equal(got[0], want[0]) and np.array_equal(got[1], want[1])
    with pytest.raises(ValueError, match="one byte a character"):
        finder.find("abc😀", "abc😀".encode())
