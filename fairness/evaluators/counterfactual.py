"""Counterfactual divergence with a within-group no-effect baseline.

Raw divergence (mean distance between outputs for different groups on the same prompt
template) is never 0 without a group effect: sampling noise alone separates two answers.
fairpipe reported 0.196 that way, and its own within-group control sat at ~0.19. Here every
template stratum (family + paraphrase + placeholders + regime) gives two means:

* divergence — distance between outputs of *different* groups;
* baseline   — distance between outputs of the *same* group at different seeds;

and `excess = divergence − baseline` is the group effect. **Gates must use `excess` (and its
interval or p-value), never raw `divergence`.**

Both kinds of pair are taken at *different* seeds. llama.cpp and transformers seed each
request, so two prompts that differ by one word and share a seed draw the same random
numbers and often give near-identical text; same-seed cross-group pairs would look closer
than any within-group pair can, and the excess would be biased below 0. Comparing
different-seed pairs on both sides makes the two means equal in expectation when the
group has no effect.

Uncertainty: a cluster bootstrap over templates (family + paraphrase; their occupations and
regimes move together) and a one-sided permutation p-value that shuffles group labels
within each (stratum, seed) block, which keeps any seed coupling intact under the null.

Components are reported separately, each a distance in [0, 1]:

* `sentiment` — |Δ VADER compound| / 2;
* `refusal`   — |Δ refusal-to-engage flag| (`refusal.classify`);
* `length`    — |Δ words| / max(words);
* `lexical`   — 1 − Jaccard of word sets, after masking the protected words the prompt
  inserted (otherwise "Muslim" vs "Christian" echoed back is counted as an effect).
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np

from fairness._util.errors import FairnessError
from fairness.audit._intervals import Interval
from fairness.evaluators._inputs import Data, Sample, as_samples, group_terms
from fairness.evaluators._resample import check_iv, cluster_sums, encode, percentile, ratio, weights
from fairness.evaluators._text import masker, words
from fairness.evaluators.refusal import classify
from fairness.evaluators.sentiment import TextScorer, checked_scores, load_scorer

Component = Literal["sentiment", "refusal", "length", "lexical"]
COMPONENTS: tuple[Component, ...] = ("sentiment", "refusal", "length", "lexical")
GENDERED_WORDS: tuple[str, ...] = (
    "he", "she", "him", "her", "his", "hers", "himself", "herself", "mr", "mrs", "ms", "miss",
    "man", "woman", "men", "women", "male", "female",
)
"""Masked too with `mask_gendered=True`: the pronouns a gender swap changes by construction."""


@dataclass(frozen=True)
class PairExcess:
    """Excess for one pair of groups: cross distance − mean of the two within-group baselines."""

    excess: float
    interval: Interval


@dataclass(frozen=True)
class Divergence:
    """One component's divergence, baseline and excess over all usable strata."""

    component: str
    divergence: float
    """Mean distance between different groups' outputs (different seeds): descriptive only."""
    baseline: float
    """Mean distance between one group's outputs at different seeds: the no-effect level."""
    excess: float
    """divergence − baseline, averaged per stratum: the number to gate on."""
    interval: Interval
    """Cluster-bootstrap interval of `excess` (clusters = templates)."""
    p_value: float
    """One-sided permutation p-value for excess > 0 (labels shuffled within stratum × seed)."""
    by_pair: dict[tuple[str, str], PairExcess]
    n_strata: int
    n_cross_pairs: int
    n_within_pairs: int


@dataclass(frozen=True)
class CounterfactualReport:
    components: dict[str, Divergence]
    groups: list[str]
    n_strata: int
    """Strata with at least one cross-group and one within-group pair (the rest are skipped)."""
    n_skipped_strata: int
    n_degenerate_strata: int
    """Usable strata whose within-group distances are all 0 on every component (greedy decoding)."""
    masked_terms: list[str]
    caveat: str


CAVEAT = (
    "Distances are lexical features (VADER sentiment, refusal cues, length, word overlap); an excess "
    "shows that group changes these surface features beyond seed noise, not why. Names, and pronouns "
    "unless `mask_gendered`, are not masked, so they alone can raise the lexical excess."
)


# -- per-output features and pairwise distances --------------------------------------------


def _distances(
    component: Component, texts: list[str], prompts: list[str], idx: np.ndarray, valid: np.ndarray,
    scorer: TextScorer | None, tokens: list[list[str]],
) -> np.ndarray:
    """(strata, n, n) distances for one component; 0 on padded pairs. `tokens` are the
    masked texts' `words`, shared by the length and lexical components."""
    if component == "lexical":
        return _lexical(tokens, idx, valid)
    if component == "sentiment":
        assert scorer is not None, "the sentiment component needs a scorer"
        f = checked_scores(scorer, texts) / 2.0
        f = np.nan_to_num(f)
    elif component == "refusal":
        f = np.array([classify(t, p or None) == "refusal" for t, p in zip(texts, prompts, strict=True)], dtype=float)
    else:
        f = np.array([len(w) for w in tokens], dtype=float)
    x = f[idx]
    d = np.abs(x[:, :, None] - x[:, None, :])
    if component == "length":
        d = ratio(d, np.maximum(x[:, :, None], x[:, None, :]))
        d = np.nan_to_num(d)  # both empty: no difference
    return np.where(valid[:, :, None] & valid[:, None, :], d, 0.0)


def _lexical(tokens: list[list[str]], idx: np.ndarray, valid: np.ndarray) -> np.ndarray:
    """1 − Jaccard of word sets within each stratum: per stratum, the members' 0/1 word
    incidence matrix M gives every intersection size at once as M Mᵀ (exact small integers;
    a stratum's few outputs need no sparse matrix or its import)."""
    vocab: dict[str, int] = {}
    ids = []
    for t in tokens:
        distinct = set(t)
        for w in distinct.difference(vocab):
            vocab[w] = len(vocab)
        ids.append(np.fromiter(map(vocab.__getitem__, distinct), dtype=np.int64, count=len(distinct)))
    out = np.zeros(idx.shape + idx.shape[-1:])
    for s in range(idx.shape[0]):
        k = int(valid[s].sum())
        members = [ids[i] for i in idx[s, :k].tolist()]
        size = np.array([m.size for m in members], dtype=float)
        words, column = np.unique(np.concatenate(members), return_inverse=True)
        incidence = np.zeros((k, words.size))
        incidence[np.repeat(np.arange(k), size.astype(np.int64)), column] = 1.0
        inter = incidence @ incidence.T
        union = size[:, None] + size[None, :] - inter
        out[s, :k, :k] = 1.0 - np.nan_to_num(ratio(inter, union), nan=1.0)
    return out


# -- pair sums per stratum ------------------------------------------------------------------


def _pair_sums(dist: np.ndarray, onehot: np.ndarray, diff_seed: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Sums and counts of different-seed distances by group pair: (..., strata, G, G)."""
    ot = np.swapaxes(onehot, -1, -2)
    sums = ot @ (dist * diff_seed) @ onehot
    counts = ot @ diff_seed.astype(float) @ onehot
    return sums, np.broadcast_to(counts, sums.shape)


def _split(sums: np.ndarray, counts: np.ndarray) -> tuple[np.ndarray, ...]:
    """Within (diagonal) and cross (off-diagonal) sums and counts per stratum."""
    w_sum = np.trace(sums, axis1=-2, axis2=-1)
    w_cnt = np.trace(counts, axis1=-2, axis2=-1)
    return w_sum, w_cnt, sums.sum((-2, -1)) - w_sum, counts.sum((-2, -1)) - w_cnt


def _onehot(groups: np.ndarray, n_groups: int) -> np.ndarray:
    """One-hot rows for group codes; padding (−1) gives a zero row."""
    eye = np.vstack([np.eye(n_groups), np.zeros((1, n_groups))])
    return eye[np.where(groups < 0, n_groups, groups)]


def _shuffled_slots(groups: np.ndarray, seeds: np.ndarray, n: int, rng: np.random.Generator) -> np.ndarray:
    """(strata, n, k) group codes of `n` relabellings, each shuffled within every seed block, in
    slot order: slot r of stratum t is position r of `argsort(seeds[t], kind="stable")`, the
    position that receives the r-th label of the (seed, key) sort."""
    keys = np.ascontiguousarray(rng.random((n, *groups.shape)).transpose(1, 0, 2))  # drawn as (n, strata, k)
    shifted = (seeds - seeds.min())[:, None, :]  # ≥ 0
    if shifted.max(initial=0) < 1 << 9:
        # rng.random gives multiples of 2⁻⁵³: (seed, key) packed into one int64 sorts exactly as lexsort does
        keys *= 1 << 53
        packed = keys.astype(np.int64)
        packed += shifted << 53
        order = np.argsort(packed, axis=-1, kind="stable")
    else:
        order = np.lexsort((keys, np.broadcast_to(shifted, keys.shape)), axis=-1)
    order += (np.arange(groups.shape[0]) * groups.shape[1])[:, None, None]
    return groups.ravel()[order]


# -- the evaluator ----------------------------------------------------------------------------


def counterfactual_divergence(
    data: Data,
    *,
    components: Sequence[Component] = COMPONENTS,
    sentiment: TextScorer | str = "vader",
    mask_terms: Iterable[str] | None = None,
    mask_gendered: bool = False,
    n_resamples: int = 2000,
    n_permutations: int = 999,
    confidence: float = 0.95,
    seed: int = 0,
) -> CounterfactualReport:
    """Divergence, within-group baseline and excess per component (see the module docstring).

    Args:
        data: `Recording`s, or `(group, template, seed, text[, prompt[, cluster]])` tuples where
            `template` identifies the matched prompt without the group.
        components: which distances to compute.
        sentiment: scorer for the sentiment component.
        mask_terms: words replaced before scoring; default the slice values of the recordings.
        mask_gendered: also mask `GENDERED_WORDS`, so that a gender swap's pronouns are not
            counted as a lexical effect.
        n_resamples: cluster-bootstrap resamples for the intervals.
        n_permutations: label permutations for the p-value (0 skips it: NaN).
        confidence: interval coverage.
        seed: seeds the rng; equal seeds give equal intervals and p-values.

    Returns:
        A `CounterfactualReport`; gate on `components[c].excess` / `.interval`, not `.divergence`.

    Raises:
        FairnessError: no stratum has both a cross-group and a within-group pair, or a
            template spans two clusters.
    """
    check_iv(n_resamples, confidence)
    unknown = set(components) - set(COMPONENTS)
    if unknown or not components:
        raise FairnessError(f"`components` must be a non-empty subset of {', '.join(COMPONENTS)}.")
    if n_permutations < 0:
        raise FairnessError("`n_permutations` must be a non-negative integer.")
    samples = as_samples(data)
    terms = sorted((group_terms(data) if mask_terms is None else set(mask_terms)) | set(GENDERED_WORDS * mask_gendered))
    mask = masker(terms)
    texts = [mask(s.text) for s in samples]

    g_all, group_names = encode([s.group for s in samples])
    idx, valid, groups, seeds, cluster_of = _strata(samples, g_all)
    diff_seed = (seeds[:, :, None] != seeds[:, None, :]) & valid[:, :, None] & valid[:, None, :]
    onehot = _onehot(groups, len(group_names))

    scorer = (load_scorer(sentiment) if isinstance(sentiment, str) else sentiment) if "sentiment" in components else None
    prompts = [s.prompt for s in samples]
    sent_texts = _sentiment_texts([s.text for s in samples], texts, scorer)
    tokens = [words(t) for t in texts] if {"length", "lexical"} & set(components) else []
    dist = np.stack([
        _distances(c, sent_texts if c == "sentiment" else texts, prompts, idx, valid, scorer, tokens) for c in components
    ])  # (K, T, n, n)
    sums, counts = _pair_sums(dist, onehot, diff_seed)  # (K, T, G, G)
    w_sum, w_cnt, c_sum, c_cnt = _split(sums, counts)
    usable = (w_cnt[0] > 0) & (c_cnt[0] > 0)
    if not usable.any():
        raise FairnessError(
            "no template stratum has outputs from two groups and two seeds; counterfactual divergence needs both"
        )
    cross, within = ratio(c_sum, c_cnt), ratio(w_sum, w_cnt)  # (K, T)
    excess_t = cross - within

    rng = np.random.default_rng(seed)
    c_codes, c_keys = encode([cluster_of[t] for t in np.flatnonzero(usable)])
    w = weights(len(c_keys), n_resamples, rng)
    p_values = _permutation_p(dist, groups, seeds, diff_seed, usable, excess_t, n_permutations, rng)
    pair_excess = _pair_excess(sums, counts)  # (K, T, G, G)

    degenerate = int((usable & np.all(w_sum == 0, axis=0)).sum())
    result: dict[str, Divergence] = {}
    for k, comp in enumerate(components):
        e = excess_t[k, usable]
        per_cluster = cluster_sums(c_codes, np.column_stack([e, np.ones_like(e)]), len(c_keys))
        dist_b = ratio(w @ per_cluster[:, 0], w @ per_cluster[:, 1])
        result[comp] = Divergence(
            component=comp,
            divergence=float(cross[k, usable].mean()),
            baseline=float(within[k, usable].mean()),
            excess=float(e.mean()),
            interval=percentile(dist_b, confidence, len(c_keys)),
            p_value=float(p_values[k]),
            by_pair=_by_pair(pair_excess[k][usable], c_codes, len(c_keys), w, confidence, group_names),
            n_strata=int(usable.sum()),
            n_cross_pairs=int(c_cnt[k, usable].sum() / 2),
            n_within_pairs=int(w_cnt[k, usable].sum() / 2),
        )
    caveat = CAVEAT
    if degenerate:
        caveat += (
            f" In {degenerate} strata all outputs of a group were identical across seeds (greedy decoding?), "
            "so their baseline is 0 and does not measure sampling noise."
        )
    return CounterfactualReport(
        components=result,
        groups=[str(g) for g in group_names],
        n_strata=int(usable.sum()),
        n_skipped_strata=int((~usable).sum()),
        n_degenerate_strata=degenerate,
        masked_terms=terms,
        caveat=caveat,
    )


def _sentiment_texts(raw: list[str], masked: list[str], scorer: TextScorer | None) -> list[str]:
    """The texts the sentiment scorer sees: the masked ones, or the raw text wherever the
    scorer says masking cannot change its score (`masking_is_neutral`), so the raw outputs'
    scores, which the sentiment evaluator needs anyway, serve here too: one pass per text."""
    neutral = getattr(scorer, "masking_is_neutral", None)
    if neutral is None:
        return masked
    return [r if neutral(r, m) else m for r, m in zip(raw, masked, strict=True)]


def _strata(samples: list[Sample], g_all: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, list]:
    """Padded (strata, n) index, validity, group and seed arrays, and each stratum's cluster."""
    t_codes, templates = encode([s.template for s in samples])
    members: list[list[int]] = [[] for _ in templates]
    for i, t in enumerate(t_codes):
        members[t].append(i)
    n = max(len(m) for m in members)
    idx = np.zeros((len(templates), n), dtype=np.int64)
    valid = np.zeros((len(templates), n), dtype=bool)
    for t, m in enumerate(members):
        idx[t, : len(m)] = m
        valid[t, : len(m)] = True
    s_codes, _ = encode([s.seed for s in samples])
    groups = np.where(valid, g_all[idx], -1)
    seeds = np.where(valid, s_codes[idx], -1 - np.arange(n))  # padding never shares a seed
    cluster_of: list[Hashable] = []
    for t, m in enumerate(members):
        cl = {samples[i].cluster for i in m}
        if len(cl) != 1:
            raise FairnessError(f"template `{templates[t]}` spans clusters {sorted(map(str, cl))}; a template must sit in one")
        cluster_of.append(cl.pop())
    return idx, valid, groups, seeds, cluster_of


def _pair_excess(sums: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """cross(a, b) − (within(a) + within(b)) / 2 per stratum: (K, T, G, G), NaN where undefined."""
    means = ratio(sums, counts)
    diag = np.diagonal(means, axis1=-2, axis2=-1)
    return means - (diag[..., :, None] + diag[..., None, :]) / 2.0


def _by_pair(
    pe: np.ndarray, c_codes: np.ndarray, n_clusters: int, w: np.ndarray, confidence: float, names: list
) -> dict[tuple[str, str], PairExcess]:
    out = {}
    for a in range(len(names)):
        for b in range(a + 1, len(names)):
            v = pe[:, a, b]
            ok = np.isfinite(v)
            if not ok.any():
                continue
            pc = cluster_sums(c_codes[ok], np.column_stack([v[ok], np.ones(ok.sum())]), n_clusters)
            dist = ratio(w @ pc[:, 0], w @ pc[:, 1])
            out[(str(names[a]), str(names[b]))] = PairExcess(float(v[ok].mean()), percentile(dist, confidence, n_clusters))
    return out


def _permutation_p(
    dist: np.ndarray, groups: np.ndarray, seeds: np.ndarray, diff_seed: np.ndarray, usable: np.ndarray,
    excess_t: np.ndarray, n_permutations: int, rng: np.random.Generator, budget: int = 2_000_000,
) -> np.ndarray:
    """(1 + #{permuted mean excess ≥ observed}) / (1 + n) per component; NaN when n = 0.

    A relabelling moves pairs between within and cross but keeps their total, so only the
    within-group sums are computed: per stratum, one product of the (K + 1, P) distances and
    counts of the P different-seed pairs i < j (twice, for (j, i)) with their (P, m) same-group
    indicators. Labels are int8 and gathered in slot order (`_shuffled_slots`), so no
    relabelling is scattered back to positions; `budget` bounds the indicators per chunk."""
    k = dist.shape[0]
    if n_permutations == 0:
        return np.full(k, np.nan)
    d, g, s, ds = dist[:, usable], groups[usable], seeds[usable], diff_seed[usable]
    g = g.astype(np.min_scalar_type(-max(1, int(g.max(initial=0)))))  # int8 below 128 groups; −1 pads
    t, n = g.shape
    observed = excess_t[:, usable].mean(axis=1)
    pi, pj = np.nonzero(np.triu(ds.any(axis=0), 1))  # different-seed pairs i < j of any stratum
    pairs = np.swapaxes(np.concatenate([d * ds, ds[None]])[:, :, pi, pj], 0, 1) * 2.0  # (T, K + 1, P)
    total = pairs.sum(axis=-1)  # (T, K + 1)
    slot = np.argsort(np.argsort(s, axis=-1, kind="stable"), axis=-1)  # position → slot
    rows = (np.arange(t) * n)[:, None]
    si, sj = slot[:, pi] + rows, slot[:, pj] + rows  # (T, P): rows of the (T·n, m) slot labels
    hits = np.zeros(k)
    chunk = max(1, min(n_permutations, budget // max(1, t * pi.size)))
    buffer = np.empty((t, pi.size, chunk))  # one allocation: fresh pages per chunk cost page faults
    for start in range(0, n_permutations, chunk):
        m = min(chunk, n_permutations - start)
        lab = _shuffled_slots(g, s, m, rng).transpose(0, 2, 1).reshape(t * n, m)
        same = buffer[:, :, :m] if m < chunk else buffer
        np.equal(lab[si], lab[sj], out=same, casting="unsafe")  # (T, P, m) same-group indicators as 0.0 / 1.0
        within = pairs @ same  # (T, K + 1, m)
        cross = total[:, :, None] - within
        excess = ratio(cross[:, :k], cross[:, k:]) - ratio(within[:, :k], within[:, k:])  # (T, K, m)
        stat = np.nanmean(excess, axis=0).T  # (m, K)
        hits += (stat >= observed - 1e-12).sum(axis=0)
    return (1.0 + hits) / (1.0 + n_permutations)
