"""Cohen's κ of two flag scorers, its cluster-bootstrap interval over prompts, and per-slice confusion counts."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from fairness._util.errors import FairnessError
from fairness.scorers._agreement import METHOD, Confusion, agreement, cohen_kappa


def test_kappa_of_a_textbook_table():
    # 20 both, 5 only A, 10 only B, 15 neither: p_o = 0.7, p_e = 0.5*0.6 + 0.5*0.4 = 0.5, kappa = 0.4
    assert float(cohen_kappa(np.array([20, 5, 10, 15]))) == pytest.approx(0.4, abs=1e-15)
    assert float(cohen_kappa(np.array([10, 0, 0, 10]))) == 1.0
    assert np.isnan(cohen_kappa(np.array([7, 0, 0, 0])))  # both raters constant: chance agreement is 1
    assert np.isnan(cohen_kappa(np.array([0, 0, 0, 0])))


def rows():
    """Six prompts x 2 seeds over two slices; A and B disagree on rows 1 and 6; row 9 has no valid B score."""
    a = np.array([1, 1, 0, 0, 1, 0, 0, 0, 1, 1, 0, 0], dtype=float)
    b = np.array([1, 0, 0, 0, 1, 0, 1, 0, 1, np.nan, 0, 0], dtype=float)
    prompts = [f"p{i // 2}" for i in range(12)]
    slices = ["man" if i % 4 < 2 else "woman" for i in range(12)]
    return a, b, prompts, slices


def test_kappa_confusion_and_disagreements():
    a, b, prompts, slices = rows()
    r = agreement(a, b, prompts, slices, names=("lexical", "judge"), n_resamples=500, seed=3)
    # valid rows: both 3 (0, 4, 8), only A 1 (1), only B 1 (6), neither 6; n = 11
    assert r.confusion == Confusion(both=3, only_a=1, only_b=1, neither=6, invalid=1)
    p_o, p_a, p_b = 9 / 11, 4 / 11, 4 / 11
    p_e = p_a * p_b + (1 - p_a) * (1 - p_b)
    assert r.kappa == pytest.approx((p_o - p_e) / (1 - p_e), abs=1e-15)
    assert r.observed == pytest.approx(9 / 11, abs=1e-15)
    assert r.by_slice == {"man": Confusion(both=3, only_a=1, only_b=0, neither=1, invalid=1),
                          "woman": Confusion(both=0, only_a=0, only_b=1, neither=5, invalid=0)}
    assert r.disagreements.tolist() == [1, 6]
    assert (r.a, r.b, r.interval.method, r.interval.n_clusters, r.interval.n_resamples) == (
        "lexical", "judge", METHOD, 6, 500)


def test_the_interval_redraws_prompts_whole():
    """The bounds are expanded percentiles of κ over resamples that draw whole prompts with replacement (an
    independent loop over the same draws)."""
    a, b, prompts, slices = rows()
    r = agreement(a, b, prompts, slices, n_resamples=400, seed=11)
    rng = np.random.default_rng(11)
    draws = rng.integers(0, 6, size=(400, 6))
    kappas = []
    for draw in draws:
        idx = [i for p in draw for i in range(12) if prompts[i] == f"p{p}" and not np.isnan(b[i])]
        x, y = a[idx], b[idx]
        p_o = np.mean(x == y)
        p_e = x.mean() * y.mean() + (1 - x.mean()) * (1 - y.mean())
        if p_e < 1:
            kappas.append((p_o - p_e) / (1 - p_e))
    alpha = stats.norm.cdf(-np.sqrt(6 / 5) * stats.t.ppf(0.975, 5))  # expanded percentile: t with prompts - 1 df
    low, high = np.quantile(kappas, [alpha, 1 - alpha])
    assert (r.interval.low, r.interval.high) == (pytest.approx(low, abs=1e-12), pytest.approx(high, abs=1e-12))
    assert r.interval.low < r.kappa < r.interval.high


def test_constant_raters_have_no_kappa_and_no_interval():
    r = agreement(np.zeros(4), np.zeros(4), ["p1", "p1", "p2", "p2"], ["s"] * 4, n_resamples=50)
    assert np.isnan(r.kappa) and np.isnan(r.interval.low) and np.isnan(r.interval.high)
    assert r.confusion == Confusion(both=0, only_a=0, only_b=0, neither=4, invalid=0)


def test_a_number_column_is_not_a_flag():
    with pytest.raises(FairnessError, match=r"agreement: `judge` is not a flag \(values other than 0, 1 and NaN\)"):
        agreement(np.array([0.0, 1.0]), np.array([0.5, 1.0]), ["p", "q"], ["s", "s"], names=("lexical", "judge"))
