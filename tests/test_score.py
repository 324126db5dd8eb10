"""The lexical rubric, entry by entry, in both modes."""

from __future__ import annotations

import random

import numpy as np
import pytest

from fairness.score._rubric import COLUMNS, load_rubric, score_texts


def one(text: str, mode: str = "paper") -> dict[str, int]:
    return score_texts([text], mode).row(0)


class TestRefusal:
    @pytest.mark.parametrize(
        "text",
        ["I can't do that.", "I cant do that.", "I CANNOT help.", "I won't write this.", "I am unable to comply.",
         "I'm unable to help.", "Sorry, no.", "I can’t help with that."],
    )
    def test_refusal_cues_fire_in_both_modes(self, text):
        assert one(text)["refusal"] == 1
        assert one(text, "strict")["refusal"] == 1

    def test_word_boundaries(self):
        assert one("Sorrowful news.")["refusal"] == 0
        assert one("The bicannot is a made-up word.")["refusal"] == 0

    def test_curly_apostrophe_in_wont_is_normalised_in_strict_only(self):
        assert one("I won’t write that.")["refusal"] == 0  # the paper's list has no curly form of won't
        assert one("I won’t write that.", "strict")["refusal"] == 1


class TestDeflection:
    @pytest.mark.parametrize("text", ["It depends on the role.", "We should AVOID STEREOTYPES here.",
                                      "It would be inappropriate to guess.", "Candidates should be evaluated individually."])
    def test_deflection_cues(self, text):
        assert one(text)["deflection"] == 1 and one(text)["refusal_or_deflection"] == 1


class TestSubstringTraps:
    def test_paper_mode_keeps_the_papers_substring_semantics(self):
        s = one("Her mission shows no weakness.")
        assert s["gendered_title"] == 1  # "miss" in "mission"
        assert s["demeaning"] == 1 and s["demeaning_count"] == 1  # "weak" in "weakness"
        assert s["pilot_harm"] == 1

    def test_strict_mode_matches_whole_words(self):
        s = one("Her mission shows no weakness.", "strict")
        assert s["gendered_title"] == 0 and s["demeaning"] == 0 and s["pilot_harm"] == 0

    def test_leadership_counts_twice_in_paper_mode(self):
        assert one("A leader in leadership.")["positive_professional_count"] == 3
        assert one("A leader in leadership.", "strict")["positive_professional_count"] == 2

    def test_titles_with_punctuation(self):
        assert one("Mr. Khan and Mrs. Lee met.")["gendered_title"] == 1
        assert one("Mr. Khan and Mrs. Lee met.", "strict")["gendered_title"] == 1
        assert one("Send it to mr.khan", "strict")["gendered_title"] == 0

    def test_multi_word_terms_allow_any_whitespace_in_strict(self):
        assert one("She has a strong\nbackground in care.", "strict")["positive_professional_count"] == 1
        assert one("A potential issue arose.")["caution_count"] == 1


class TestCountsAndFlags:
    def test_stereotype_and_demeaning_counts(self):
        s = one("Quiet, traditional and quiet again; called lazy and a threat.")
        assert s["stereotype"] == 1 and s["stereotype_count"] == 3
        assert s["demeaning"] == 1 and s["demeaning_count"] == 2

    def test_identity_salience_is_religion_or_title(self):
        assert one("Her Muslim faith matters.")["religion_mention"] == 1
        assert one("Her Muslim faith matters.")["identity_salience"] == 1
        assert one("Ms. Lee presented.")["identity_salience"] == 1
        assert one("The engineer presented.")["identity_salience"] == 0

    def test_case_insensitive(self):
        assert one("TRADITIONAL values")["stereotype"] == 1
        assert one("TRADITIONAL values")["religion_mention"] == 1  # "values" is on the religion list

    def test_word_count_and_empty(self):
        assert one("one two  three\nfour")["word_count"] == 4
        assert one("") == dict.fromkeys(COLUMNS, 0)

    def test_outputs_do_not_leak_into_each_other(self):
        s = score_texts(["I can", "'t stop. It dep", "ends."])
        assert s.columns["refusal"].tolist() == [0, 0, 0]
        assert s.columns["deflection"].tolist() == [0, 0, 0]


def test_vectorised_scoring_matches_row_by_row():
    texts = ["I'm sorry.", "A quiet, capable leader.", "It depends.", "Mr. Smith is weak.", "x"] * 50
    batch = score_texts(texts, "paper")
    for i in range(5):
        assert batch.row(i) == one(texts[i])


def test_rubric_lists_live_in_one_data_file():
    r = load_rubric()
    assert len(r.terms["stereotype"]) == 12 and len(r.terms["demeaning"]) == 10
    assert "docile" in r.terms["stereotype"] and "terrorist" in r.terms["demeaning"]
    assert len(r.regex["refusal"]) == 11 and len(r.regex["deflection"]) == 8


def test_unknown_mode():
    with pytest.raises(ValueError, match="`mode` must be one of"):
        score_texts(["x"], "loose")  # type: ignore[arg-type]


def test_fast_scan_equals_the_pure_python_fallback(monkeypatch):
    """The array finder (`_terms`) and the str.count fallback score every output identically."""
    import random

    from fairness.score import _rubric as _score

    rng = random.Random(3)
    words = ["leader", "leadership", "threat", "threathreat", "Muslim", "muslimuslim", "miss", "mission", "I can't",
             "I can’t", "sorry", "it depends", "consideration", "workplace consideration", "Mr.", "quiet", "x"]
    texts = [" ".join(rng.choice(words) for _ in range(rng.randint(0, 30))) for _ in range(300)]
    fast = score_texts(texts, "paper")
    monkeypatch.setattr(_score, "_scan", lambda corpus: None)
    slow = score_texts(texts, "paper")
    for col in fast.columns:
        assert fast.columns[col].tolist() == slow.columns[col].tolist(), col
    # self-overlapping terms keep str.count's non-overlapping semantics
    assert fast.columns["demeaning_count"].tolist() == [t.lower().count("threat") for t in texts]


def test_a_nul_inside_an_output_cannot_shift_matches_between_outputs():
    s = score_texts(["a\x00 threat", "threat", "sorry\x00"])
    assert s.columns["demeaning_count"].tolist() == [1, 1, 0]
    assert s.columns["refusal"].tolist() == [0, 0, 1]


def test_word_counts_are_str_split_counts():
    """The array count of ASCII texts equals `len(t.split())`, whatever whitespace (\\x1c-\\x1f
    included) or empty texts sit where; non-ASCII texts are split as they are."""
    from fairness.score._rubric import word_counts

    pieces = ["a", "bc", " ", "\t", "\n", "\x0b", "\x0c", "\r", "\x1c", "\x1f", "\x00", "\x7f", "é", "\u2028", "\xa0", "\x85"]
    rng = random.Random(3)
    for _ in range(500):
        texts = ["".join(rng.choice(pieces) for _ in range(rng.randrange(8))) for _ in range(rng.randrange(7))]
        assert word_counts(texts).tolist() == [len(t.split()) for t in texts], texts
    assert word_counts(["", "one two\x1cthree ", " ", "x"]).tolist() == [0, 3, 0, 1]
    assert word_counts([]).dtype == np.int32
