"""Counterfactual divergence: hand-computed distances, the no-effect baseline, resampling."""

from __future__ import annotations

from typing import ClassVar

import numpy as np
import pytest

from fairness._util.errors import FairnessError
from fairness.evaluators.counterfactual import counterfactual_divergence
from fairness.recordings._record import Recording
from fairness.suite._suite import load_suite

FAST = {"n_resamples": 300, "n_permutations": 199}
VOCAB = np.array([f"w{i}" for i in range(60)])


class FixedScorer:
    name = "fixed"

    def __init__(self, table):
        self.table = table

    def score(self, texts):
        return np.array([self.table[t] for t in texts])


def simulate(run: int, *, effect: float = 0.0, templates: int = 40, seeds: int = 5, groups=("a", "b", "c", "d")):
    """Bag-of-words outputs; every group draws from its template's distribution unless `effect`>0."""
    rng = np.random.default_rng(run)
    rows = []
    for t in range(templates):
        p = rng.dirichlet(np.full(len(VOCAB), 0.3))
        for g in groups:
            q = (1 - effect) * p + effect * rng.dirichlet(np.full(len(VOCAB), 0.3)) if g == groups[-1] else p
            for s in range(1, seeds + 1):
                text = " ".join(rng.choice(VOCAB, size=rng.integers(8, 30), p=q))
                rows.append((g, f"T{t}", s, text, "", f"C{t // 2}"))  # two strata per cluster
    return rows


class TestHandComputed:
    # two templates, two groups, two seeds: within-group Jaccard distance 2/3, cross 1
    DATA: ClassVar[list[tuple]] = [
        ("a", "t", 1, "x y"), ("a", "t", 2, "x z"), ("b", "t", 1, "p q"), ("b", "t", 2, "p r"),
        ("a", "u", 1, "x y"), ("a", "u", 2, "x z"), ("b", "u", 1, "p q"), ("b", "u", 2, "p r"),
    ]

    def test_lexical_and_length(self):
        rep = counterfactual_divergence(self.DATA, components=("lexical", "length"), n_resamples=200, n_permutations=999)
        lex = rep.components["lexical"]
        assert (lex.divergence, lex.baseline) == pytest.approx((1.0, 2 / 3))
        assert lex.excess == pytest.approx(1 / 3)
        assert (lex.n_strata, lex.n_cross_pairs, lex.n_within_pairs) == (2, 4, 4)
        assert rep.components["length"].excess == 0.0
        # swapping the labels of one seed block flips a stratum's excess to −1/3: P(both unswapped) = 1/4
        assert lex.p_value == pytest.approx(0.25, abs=0.06)

    def test_pairs_at_the_same_seed_are_not_compared(self):
        # a1 and b1 share seed 1; were they compared, the divergence would not be exactly 1
        same = [("a", "t", 1, "x y"), ("a", "t", 2, "x z"), ("b", "t", 1, "x y"), ("b", "t", 2, "x z")]
        lex = counterfactual_divergence(same, components=("lexical",), n_permutations=0).components["lexical"]
        assert (lex.divergence, lex.baseline, lex.excess) == pytest.approx((2 / 3, 2 / 3, 0.0))
        assert np.isnan(lex.p_value)

    def test_by_pair(self):
        # a and b write alike; c uses another word: only pairs with c diverge
        rows = [(g, "t", s, f"{'beta' if g == 'c' else 'alpha'} s{s}") for g in "abc" for s in (1, 2, 3)]
        lex = counterfactual_divergence(rows, components=("lexical",), n_permutations=0).components["lexical"]
        assert lex.baseline == pytest.approx(2 / 3)
        assert lex.divergence == pytest.approx(8 / 9)
        assert lex.excess == pytest.approx(2 / 9)
        assert lex.by_pair[("a", "b")].excess == pytest.approx(0.0)
        assert lex.by_pair[("a", "c")].excess == pytest.approx(1 / 3)
        assert lex.by_pair[("b", "c")].excess == pytest.approx(1 / 3)

    def test_sentiment_component(self):
        rows = [(g, "t", s, f"{g}{s}") for g in "ab" for s in (1, 2)]
        scorer = FixedScorer({"a1": 0.5, "a2": 0.5, "b1": -0.5, "b2": -0.5})
        rep = counterfactual_divergence(rows, components=("sentiment",), sentiment=scorer, n_permutations=0)
        assert (rep.components["sentiment"].divergence, rep.components["sentiment"].baseline) == (0.5, 0.0)

    def test_refusal_component_reads_the_prompt(self):
        prompt = "Write 4 sentences about a nurse."
        answer = "She is kind to patients. She works nights. She trains students. She is calm."
        rows = [("a", "t", s, "I must decline this request.", prompt) for s in (1, 2)] + [
            ("b", "t", s, answer, prompt) for s in (1, 2)
        ]
        rep = counterfactual_divergence(rows, components=("refusal",), n_permutations=0)
        assert rep.components["refusal"].excess == 1.0


class TestMasking:
    def test_echoed_group_words_are_masked(self):
        rows = [(g, "t", s, f"the {g} is kind and works hard") for g in ("man", "woman") for s in (1, 2)]
        masked = counterfactual_divergence(rows, components=("lexical",), mask_terms=["man", "woman"], n_permutations=0)
        raw = counterfactual_divergence(rows, components=("lexical",), mask_terms=[], n_permutations=0)
        assert masked.components["lexical"].excess == 0.0
        assert raw.components["lexical"].excess == pytest.approx(1 - 6 / 8)
        assert masked.masked_terms == ["man", "woman"]

    def test_gendered_words_on_request(self):
        rows = [(g, "t", s, f"{p} is kind and works hard") for g, p in (("m", "he"), ("w", "she")) for s in (1, 2)]
        plain = counterfactual_divergence(rows, components=("lexical",), n_permutations=0)
        masked = counterfactual_divergence(rows, components=("lexical",), mask_gendered=True, n_permutations=0)
        assert plain.components["lexical"].excess > 0 and masked.components["lexical"].excess == 0.0

    def test_recordings_mask_their_slice_values(self):
        recs = _recordings(lambda case: f"A {case.slice['gender']} who is {case.slice['religion']}. " + _seed_text(case))
        rep = counterfactual_divergence(recs, components=("lexical", "length"), n_resamples=200, n_permutations=99)
        assert rep.masked_terms == ["Christian", "Muslim", "man", "woman"]
        # outputs depend on (template, seed) only: cross and within pairs are the same pairs of texts
        for comp in rep.components.values():
            assert comp.excess == pytest.approx(0.0, abs=1e-12)
            assert comp.p_value == 1.0
        assert rep.groups == ["man_Christian", "man_Muslim", "woman_Christian", "woman_Muslim"]
        assert rep.n_strata == 2 * 4 * 2 and rep.components["lexical"].interval.n_clusters == 2

    def test_greedy_outputs_are_flagged_degenerate(self):
        recs = _recordings(lambda case: f"{case.slice_id} {case.placeholders['OCC']} is a good fit.")
        rep = counterfactual_divergence(recs, components=("lexical",), n_resamples=100, n_permutations=0)
        assert rep.n_degenerate_strata == rep.n_strata
        assert "greedy" in rep.caveat


def _seed_text(case) -> str:
    rng = np.random.default_rng([case.template_index, case.seed])
    return " ".join(rng.choice(VOCAB, size=12))


def _recordings(text_for) -> list[Recording]:
    cases = [c for c in load_suite("fairness-cards/qwen-v0.1").expand() if c.paraphrase_id == "p1" and c.family in ("F1", "F3")]
    return [
        Recording(
            key=f"k{c.index}", row_id=c.row_id, family=c.family, paraphrase_id=c.paraphrase_id,
            placeholders=c.placeholders, slice=c.slice, slice_id=c.slice_id, regime=c.regime, params=c.params,
            seed=c.seed, prompt=c.prompt, output=text_for(c), prompt_tokens=1, completion_tokens=1, finish_reason="stop",
        )
        for c in cases
    ]


class TestNoEffect:
    @pytest.mark.slow
    def test_excess_interval_covers_zero_in_most_runs(self):
        reps = [
            counterfactual_divergence(simulate(run), components=("lexical", "length"), n_resamples=500, n_permutations=99, seed=run)
            for run in range(20)
        ]
        for comp in ("lexical", "length"):
            covered = sum(r.components[comp].interval.covers(0.0) for r in reps)
            assert covered >= 16, comp  # nominal 0.95; 20 clusters
            assert sum(r.components[comp].p_value < 0.05 for r in reps) <= 3, comp
        # the raw divergence is far from 0 without any group effect: never gate on it
        assert all(r.components["lexical"].divergence > 0.5 for r in reps)

    def test_a_real_effect_is_detected(self):
        for run in range(3):
            lex = counterfactual_divergence(simulate(run, effect=0.5), components=("lexical",), seed=run, **FAST)
            lex = lex.components["lexical"]
            assert lex.interval.low > 0 and lex.p_value < 0.01
            assert max(lex.by_pair, key=lambda k: lex.by_pair[k].excess)[1] == "d"


class TestResampling:
    def test_seeded(self):
        data = simulate(0, templates=8)
        one = counterfactual_divergence(data, components=("lexical",), seed=5, **FAST).components["lexical"]
        two = counterfactual_divergence(data, components=("lexical",), seed=5, **FAST).components["lexical"]
        other = counterfactual_divergence(data, components=("lexical",), seed=6, **FAST).components["lexical"]
        assert (one.interval, one.p_value) == (two.interval, two.p_value)
        assert one.excess == other.excess and one.interval != other.interval

    @pytest.mark.slow
    def test_full_default_grid(self):
        """The default grid's strata and clusters (speed goal: benchmarks/bench_counterfactual.py)."""
        recs = [
            Recording(
                key=f"k{c.index}", row_id=c.row_id, family=c.family, paraphrase_id=c.paraphrase_id,
                placeholders=c.placeholders, slice=c.slice, slice_id=c.slice_id, regime=c.regime, params=c.params,
                seed=c.seed, prompt=c.prompt, output=_seed_text(c) + f" great {c.slice_id}", prompt_tokens=1,
                completion_tokens=1, finish_reason="stop",
            )
            for c in load_suite("fairness-cards/qwen-v0.1").expand()
        ]
        rep = counterfactual_divergence(recs, n_resamples=200, n_permutations=99)
        assert rep.n_strata == 160 and rep.components["lexical"].interval.n_clusters == 20
        assert set(rep.components) == {"sentiment", "refusal", "length", "lexical"}


class TestErrors:
    def test_needs_two_groups_and_two_seeds(self):
        with pytest.raises(FairnessError, match="no template stratum has outputs from two groups and two seeds"):
            counterfactual_divergence([("a", "t", 1, "x"), ("b", "t", 1, "y")], components=("length",))

    def test_unknown_component(self):
        with pytest.raises(FairnessError, match="`components` must be a non-empty subset"):
            counterfactual_divergence([("a", "t", 1, "x")], components=("tone",))

    def test_template_in_two_clusters(self):
        rows = [("a", "t", 1, "x", "", "c1"), ("b", "t", 2, "y", "", "c2")]
        with pytest.raises(FairnessError, match="template `t` spans clusters"):
            counterfactual_divergence(rows, components=("length",))

    def test_not_a_sample(self):
        with pytest.raises(FairnessError, match="item 0 is neither a Recording"):
            counterfactual_divergence(["just text"], components=("length",))


class TestInsideTheRun:
    """`run --evaluators` streams the rows and keeps one `Sample` each; the in-memory replay
    gives the very same evaluators block."""

    def test_streamed_evaluators_equal_the_in_memory_replay(self, tmp_path, monkeypatch):
        from pathlib import Path

        from fairness.audit._audit import AuditOptions
        from fairness.pipeline import _run
        from fairness.pipeline._options import RunOptions
        from fairness.pipeline._stream import NotStreamable

        rec = Path(__file__).resolve().parents[1] / "recordings/fairness-cards/qwen-v0.1/SmolLM2-135M-Instruct-Q4_1"

        def evaluators(out: str) -> dict:
            options = RunOptions(suite="fairness-cards/qwen-v0.1", recordings=rec, out=tmp_path / out,
                                 audit=AuditOptions(bootstrap=100, permutations=100),
                                 evaluators=("counterfactual", "refusal", "sentiment", "toxicity"))
            return _run.run_audit(options).run.evaluators

        with monkeypatch.context() as m:
            m.setattr(_run, "RecordingSet", lambda *a, **k: pytest.fail("the complete, ordered set must stream"))
            streamed = evaluators("streamed")

        def refuse(*a, **k):
            raise NotStreamable

        monkeypatch.setattr(_run, "stream_cells", refuse)
        in_memory = evaluators("in-memory")
        assert set(streamed) == {"counterfactual", "refusal", "sentiment", "toxicity"}
        assert streamed == in_memory


class TestMasker:
    TERMS = ("Christian", "Muslim", "woman", "man", "C++", "Native American")

    @staticmethod
    def _reference(terms, token="x"):
        """The masker as one case-insensitive regex: what the fast path must equal."""
        import re

        alts = sorted({t for t in terms if t}, key=len, reverse=True)
        pattern = re.compile(r"(?<![\w])(?:" + "|".join(re.escape(t) for t in alts) + r")(?![\w])", re.IGNORECASE)
        return lambda text: pattern.sub(token, text)

    def test_equals_the_case_insensitive_regex(self):
        import json
        import random
        from pathlib import Path

        from fairness.evaluators._text import masker

        path = Path(__file__).resolve().parents[1] / "recordings/fairness-cards/qwen-v0.1/SmolLM2-135M-Instruct-Q4_1/records.jsonl"
        texts = [json.loads(line)["output"] for line in path.read_text(encoding="utf-8").splitlines()]
        rng = random.Random(3)
        pieces = [*self.TERMS, "MUSLIM", "muslims", "woman's", "superman", "_man", "man_", "x", " ", ", ", "\n", "Chriſtian",
                  "İman", "C++Muslim", "native  american", "(Woman)", "man-made", "ﬁ"]
        texts += ["".join(rng.choice(pieces) for _ in range(rng.randint(0, 12))) for _ in range(3000)]
        for terms in (self.TERMS, ("Christian", "Muslim", "woman", "man"), ("Ärztin", "man")):
            fast, ref = masker(terms), self._reference(terms)
            assert [fast(t) for t in texts] == [ref(t) for t in texts]
        assert masker(self.TERMS)("A Muslim woman, a MAN and superman.") == "A x x, a x and superman."


def test_words_equal_the_word_regex_on_any_text():
    """The ASCII fast path of `words` gives `_WORD.findall(normalise(text))`, token for token."""
    import json
    import random
    from pathlib import Path

    from fairness.evaluators._text import _WORD, normalise, words

    path = Path(__file__).resolve().parents[1] / "recordings/fairness-cards/qwen-v0.1/SmolLM2-135M-Instruct-Q4_1/records.jsonl"
    texts = [json.loads(line)["output"] for line in path.read_text(encoding="utf-8").splitlines()]
    rng = random.Random(11)
    texts += ["".join(rng.choice("aB'0_ -.\n`’Zé9'") for _ in range(rng.randint(0, 40))) for _ in range(20000)]
    assert [words(t) for t in texts] == [_WORD.findall(normalise(t)) for t in texts]
    assert [normalise(t) for t in texts] == [t.translate(str.maketrans({"\u2019": "'", "\u2018": "'", "\u02bc": "'", "\u2032": "'", "`": "'"})).lower() for t in texts]
    assert words("Don't `quote' rock''n roll_2 x") == ["don't", "quote", "rock", "n", "roll", "2", "x"]
