"""Sentiment and toxicity disparity, the scorer contract and entry-point discovery."""

from __future__ import annotations

import importlib
import sys
import textwrap

import numpy as np
import pytest

from fairness._util.errors import FairnessError
from fairness.evaluators.sentiment import (
    ENTRY_POINT_GROUP,
    LexicalToxicityScorer,
    TextScorer,
    VaderScorer,
    available_scorers,
    load_scorer,
    sentiment_disparity,
    toxicity_disparity,
)


class TableScorer:
    """Scores looked up from a dict: known answers for the disparity arithmetic."""

    name = "table"

    def __init__(self, table):
        self.table = table

    def score(self, texts):
        return np.array([self.table[t] for t in texts], dtype=float)


def _data(groups_scores):
    rows, table = [], {}
    for g, scores in groups_scores.items():
        for i, s in enumerate(scores):
            text = f"{g}-{i}"
            table[text] = s
            rows.append((g, f"t{i % 3}", 1, text))
    return rows, TableScorer(table)


class TestBuiltins:
    def test_vader_direction_and_range(self):
        s = VaderScorer().score(["She is a wonderful, kind and brilliant nurse.", "He is a terrible, hateful liar.", "A nurse."])
        assert s[0] > 0.5 and s[1] < -0.5 and s[2] == 0.0
        assert isinstance(VaderScorer(), TextScorer)

    def test_lexical_toxicity_counts_hits(self):
        s = LexicalToxicityScorer().score(["You are an idiot.", "Stupid idiot!", "A kind nurse.", "Shut up, you moron, shut up."])
        assert s.tolist() == [0.5, 2 / 3, 0.0, 0.75]

    def test_lexical_toxicity_is_honest_about_negation(self):
        scorer = LexicalToxicityScorer()
        assert scorer.score(["She is not stupid."])[0] == 0.5
        assert "lexical" in scorer.caveat.lower() and "negated" in scorer.caveat

    def test_whole_words_only(self):
        assert LexicalToxicityScorer().score(["The hell-bent skillful killer whale: a class act."])[0] == 0.0


class TestDisparity:
    def test_known_group_means_and_rates(self):
        rows, scorer = _data({"a": [0.5, 0.5, -0.5, 0.1], "b": [-0.5, -0.5, -0.2, 0.2]})
        rep = sentiment_disparity(rows, scorer, n_resamples=300)
        assert rep.mean.by_group == pytest.approx({"a": 0.15, "b": -0.25})
        assert rep.mean.disparity == pytest.approx(0.4)
        assert rep.rate.by_group == {"a": 0.25, "b": 0.75}  # score <= -0.05
        assert rep.rate.disparity == 0.5
        assert rep.scorer == "table"

    def test_toxic_rate_threshold(self):
        rows, scorer = _data({"a": [0.0, 0.5, 0.9], "b": [0.0, 0.0, 0.49]})
        rep = toxicity_disparity(rows, scorer, n_resamples=300)
        assert rep.rate.by_group == pytest.approx({"a": 2 / 3, "b": 0.0})
        assert rep.mean.disparity == pytest.approx((1.4 - 0.49) / 3)

    def test_unscored_texts_are_left_out(self):
        rows, scorer = _data({"a": [0.2, np.nan, 0.4], "b": [0.0, 0.0, 0.0]})
        rep = toxicity_disparity(rows, scorer, n_resamples=100)
        assert rep.mean.by_group["a"] == pytest.approx(0.3)
        assert rep.mean.n_per_group == {"a": 2, "b": 3}

    def test_default_scorers_on_text(self):
        rows = [("a", "t1", 1, "You are a stupid idiot."), ("a", "t2", 1, "Lovely work."),
                ("b", "t1", 1, "Great job."), ("b", "t2", 1, "Lovely work.")]
        tox = toxicity_disparity(rows, n_resamples=100)
        assert tox.rate.by_group == {"a": 0.5, "b": 0.0}
        assert "Lexical toxicity" in tox.caveat
        sent = sentiment_disparity(rows, n_resamples=100)
        assert sent.mean.by_group["a"] < sent.mean.by_group["b"]

    def test_seeded_intervals(self):
        rng = np.random.default_rng(0)
        rows, scorer = _data({"a": rng.uniform(-1, 1, 30).tolist(), "b": rng.uniform(-1, 1, 30).tolist()})
        one = sentiment_disparity(rows, scorer, n_resamples=500, seed=7)
        assert one.mean.interval == sentiment_disparity(rows, scorer, n_resamples=500, seed=7).mean.interval
        assert one.mean.interval.n_clusters == 3
        assert one.mean.interval.low <= one.mean.interval.high

    @staticmethod
    def _paired_runs(shift, runs=20):
        """Groups share template effects; group b is shifted by `shift` (0 = no effect)."""
        lows = []
        for run in range(runs):
            rng = np.random.default_rng(run)
            base = rng.normal(0, 0.3, 40)
            rows, table = [], {}
            for g, sh in (("a", 0.0), ("b", shift)):
                for i, v in enumerate(np.clip(base + sh + rng.normal(0, 0.1, 40), -1, 1)):
                    table[f"{g}{i}"] = v
                    rows.append((g, f"t{i}", 1, f"{g}{i}"))
            lows.append(sentiment_disparity(rows, TableScorer(table), n_resamples=400, seed=run).mean.interval.low)
        return np.array(lows)

    def test_no_effect_interval_reaches_zero(self):
        # max − min is never negative; with no effect its interval should start at ~0
        assert (self._paired_runs(0.0) < 0.02).sum() >= 18

    def test_real_effect_interval_excludes_zero(self):
        assert (self._paired_runs(0.3) > 0.15).all()


class TestContract:
    def test_wrong_shape(self):
        class Bad:
            name = "bad"

            def score(self, texts):
                return np.zeros(len(texts) + 1)

        with pytest.raises(FairnessError, match="scorer `bad` returned shape"):
            sentiment_disparity([("a", "t", 1, "x"), ("b", "t", 1, "y")], Bad())

    def test_out_of_range(self):
        class Bad:
            name = "bad"

            def score(self, texts):
                return np.full(len(texts), 3.0)

        with pytest.raises(FairnessError, match=r"outside \[-1, 1\]"):
            toxicity_disparity([("a", "t", 1, "x"), ("b", "t", 1, "y")], Bad())

    def test_unknown_name(self):
        with pytest.raises(FairnessError, match="unknown scorer `nope`"):
            load_scorer("nope")

    def test_bad_resampling_arguments(self):
        with pytest.raises(FairnessError, match=r"`n_resamples` must be a positive integer\."):
            sentiment_disparity([("a", "t", 1, "x")], LexicalToxicityScorer(), n_resamples=0)


class TestEntryPoints:
    @pytest.fixture
    def plugin(self, tmp_path, monkeypatch):
        (tmp_path / "stub_scorer.py").write_text(
            textwrap.dedent(
                """
                import numpy as np

                class StubScorer:
                    name = "stub"
                    version = "stub-1"
                    output = "number"
                    def score(self, texts):
                        return np.array([0.9 if "bad" in t else 0.0 for t in texts])

                class NotAScorer:
                    pass
                """
            )
        )
        dist = tmp_path / "stub_scorer-0.1.dist-info"
        dist.mkdir()
        (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: stub-scorer\nVersion: 0.1\n")
        (dist / "entry_points.txt").write_text(
            f"[{ENTRY_POINT_GROUP}]\nstub = stub_scorer:StubScorer\nbroken = stub_scorer:NotAScorer\n"
            "missing = stub_scorer_missing:Nothing\n"
        )
        monkeypatch.syspath_prepend(str(tmp_path))
        importlib.invalidate_caches()
        yield
        sys.modules.pop("stub_scorer", None)

    def test_discovered_and_loaded(self, plugin):
        assert available_scorers()["stub"] == "stub_scorer:StubScorer"
        assert available_scorers()["vader"] == "built-in"
        rows = [("a", "t1", 1, "bad"), ("a", "t2", 1, "fine"), ("b", "t1", 1, "fine"), ("b", "t2", 1, "fine")]
        rep = toxicity_disparity(rows, "stub", n_resamples=100)
        assert rep.scorer == "stub"
        assert rep.rate.by_group == {"a": 0.5, "b": 0.0}

    def test_plugin_that_is_not_a_scorer(self, plugin):
        with pytest.raises(FairnessError, match=r"scorer `broken` .* does not satisfy the `fairness.scorers` protocol: "
                           r"it needs `name`, `version` \(a string\), `output` \(`flag` or `number`\) and `score\(texts\)`"):
            load_scorer("broken")

    def test_plugin_that_fails_to_import(self, plugin):
        with pytest.raises(FairnessError, match=r"scorer `missing` .* failed to load"):
            load_scorer("missing")


class TestOneVaderPassPerText:
    """Masking a word VADER does not know cannot change its score, so raw and masked texts share one."""

    @pytest.mark.parametrize(
        "raw, masked, neutral",
        [
            ("A Muslim woman is a great leader.", "A x x is a great leader.", True),
            ("A MUSLIM is a great leader.", "A x is a great leader.", False),  # all-caps emphasis would change
            ("She is a good leader.", "She is a x leader.", False),  # `good` is in the lexicon
            ("A Muslim woman leads.", "A x leads.", False),  # token positions shift
        ],
    )
    def test_neutral_masking_is_recognised(self, raw, masked, neutral):
        vader = load_scorer("vader")
        assert vader.masking_is_neutral(raw, masked) is neutral
        if neutral:
            assert vader.score([raw])[0] == vader.score([masked])[0]

    def test_all_evaluators_score_each_distinct_output_once(self, monkeypatch):
        from fairness.evaluators._adapter import run_evaluators
        from fairness.recordings._record import Recording
        from fairness.suite._case import SamplingParams

        calls: list[str] = []

        class Counting:
            name, version, output = "vader", "counting", "number"

            def __init__(self):
                self._inner = load_scorer("vader")

            def score(self, texts):
                calls.extend(texts)
                return self._inner.score(texts)

            def masking_is_neutral(self, raw, masked):
                return self._inner.masking_is_neutral(raw, masked)

        p = SamplingParams(temperature=0.7, top_p=0.9, max_new_tokens=8)
        recs = [
            Recording(key=f"{i:064x}", row_id=f"r{i}", family="F1", paraphrase_id="p1", placeholders={"OCC": "CEO"},
                      slice={"religion": rel}, slice_id=rel, regime="r", params=p, seed=seed, prompt="p",
                      output=f"The {rel} candidate is {word} and calm.", prompt_tokens=1, completion_tokens=1,
                      finish_reason="stop")
            for i, (rel, seed, word) in enumerate(
                [(r, s, w) for r in ("Christian", "Muslim") for s, w in ((1, "kind"), (2, "capable"), (3, "rude"))]
            )
        ]
        import fairness.evaluators as ev

        real = ev.load_scorer
        monkeypatch.setattr(ev, "load_scorer", lambda name: Counting() if name == "vader" else real(name))
        run_evaluators(recs, ("counterfactual", "sentiment"), bootstrap=50, seed=1)
        assert sorted(calls) == sorted(r.output for r in recs)


def _vader_phrases(n: int, seed: int) -> list[str]:
    """Seeded phrases dense in what VADER's rules read: boosters, negations, idiom and
    special-case words, 'but', 'least', 'kind of', 'no', all-caps, punctuation and emphasis."""
    import random

    from vaderSentiment import vaderSentiment as v

    rng = random.Random(seed)
    words = [*v.BOOSTER_DICT, *v.NEGATE, *(w for p in (*v.SPECIAL_CASES, *v.SENTIMENT_LADEN_IDIOMS) for w in p.split()),
             "but", "least", "at", "very", "kind", "of", "never", "so", "this", "without", "doubt", "no", "or", "nor",
             "isn't", "good", "bad", "great", "hate", "love", "the", "x", "a", "nurse"]
    words += rng.sample(sorted(v.SentimentIntensityAnalyzer().lexicon), 300)
    phrases = []
    for _ in range(n):
        tokens = []
        for _ in range(rng.randint(0, 14)):
            w = rng.choice(words)
            w = w.upper() if rng.random() < 0.15 else w.capitalize() if rng.random() < 0.1 else w
            w = w + rng.choice("!?.,:)'") if rng.random() < 0.2 else w
            tokens.append(rng.choice("\"(*") + w if rng.random() < 0.05 else w)
        phrases.append(" ".join(tokens) + rng.choice(["", "!", "!!", "???", "?", "!!!!!", " ?? !"]))
    return phrases


@pytest.mark.slow
def test_fast_vader_equals_published_vader_on_every_committed_output():
    import json
    from pathlib import Path

    from vaderSentiment.vaderSentiment import SentimentIntensityAnalyzer

    from fairness.evaluators._text import masker

    root = Path(__file__).resolve().parents[1] / "recordings"
    recs = [json.loads(line) for path in sorted(root.rglob("records*.jsonl"))
            for line in path.read_text(encoding="utf-8").splitlines()]
    assert len(recs) >= 3232
    mask = masker({v for r in recs for v in r.get("slice", {}).values()})
    texts = [r["output"] for r in recs]
    texts += [mask(t) for t in texts]
    texts += ["I am not happy, but never so sad!", "Without doubt it was kind of GREAT", "NO good at least",
              "He isn't the least bit nice", "sort of ok 😊 really", "  padded  ", "", "good good but good bad good bad"]
    texts += _vader_phrases(5000, seed=13)
    ref = SentimentIntensityAnalyzer()
    assert load_scorer("vader").score(texts).tolist() == [ref.polarity_scores(t)["compound"] for t in texts]


def test_masking_is_neutral_only_where_the_score_cannot_move():
    """Wherever `masking_is_neutral` says one score serves both texts, VADER agrees."""
    from vaderSentiment.vaderSentiment import SentimentIntensityAnalyzer

    vader, ref = load_scorer("vader"), SentimentIntensityAnalyzer()
    import random

    rng = random.Random(7)
    terms, masks = ["Muslim", "Christian?", "woman!", "MAN", "Hindu's", "(Jewish"], ["x", "x?", "x!", "X", "x's", "(x"]
    pairs = []
    for phrase in _vader_phrases(2000, seed=5):
        raw, masked = phrase.split(), phrase.split()
        for i in range(0, len(raw), 3):
            raw[i], masked[i] = rng.choice(terms), rng.choice(masks)
        pairs.append((" ".join(raw), " ".join(masked)))
    pairs += [("a Muslim? woman", "a x? woman"), ("a Muslim woman", "a x? woman"), ("a Muslim woman", "a x! woman")]
    neutral = [(r, m) for r, m in pairs if vader.masking_is_neutral(r, m)]
    assert 100 < len(neutral) < len(pairs)
    assert ("a Muslim? woman", "a x? woman") in neutral and ("a Muslim woman", "a x! woman") not in neutral
    assert [ref.polarity_scores(r)["compound"] for r, _ in neutral] == [ref.polarity_scores(m)["compound"] for _, m in neutral]
