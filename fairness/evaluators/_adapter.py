"""Peer-parity evaluators inside the audit: counterfactual divergence (with its no-effect
baseline), refusal vs scope disclaimer, sentiment and toxicity disparity, and BBQ.

Each returns plain JSON-able data for results.json plus a Markdown section; heavy lifting
lives in `fairness.evaluators`.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fairness._util.canonical import json_number

if TYPE_CHECKING:
    import numpy as np

    from fairness.evaluators._inputs import Data
    from fairness.evaluators.counterfactual import Component
    from fairness.evaluators.sentiment import TextScorer

EVALUATORS = ("counterfactual", "refusal", "sentiment", "toxicity")


class _Memo:
    """Scores each distinct text once, however many evaluators ask (VADER is the slow part)."""

    def __init__(self, scorer: TextScorer) -> None:
        self._scorer = scorer
        self.name, self.version, self.output = scorer.name, scorer.version, scorer.output
        self._cache: dict[str, float] = {}

    def masking_is_neutral(self, raw: str, masked: str) -> bool:
        neutral = getattr(self._scorer, "masking_is_neutral", None)
        return neutral is not None and neutral(raw, masked)

    def score(self, texts: Sequence[str]) -> np.ndarray:
        import numpy as np

        todo = [t for t in dict.fromkeys(texts) if t not in self._cache]
        if todo:
            self._cache.update(zip(todo, np.asarray(self._scorer.score(todo), dtype=float).tolist(), strict=True))
        return np.array([self._cache[t] for t in texts], dtype=float)


def _iv(iv) -> list[float | None]:
    return [json_number(iv.low), json_number(iv.high)]


def _rates(gr) -> dict[str, Any]:
    return {
        "by_group": {k: json_number(v) for k, v in gr.by_group.items()},
        "n_per_group": dict(gr.n_per_group),
        "disparity": json_number(gr.disparity),
        "ci": _iv(gr.interval),
        "n_clusters": gr.interval.n_clusters,
    }


def run_evaluators(data: Data, names: tuple[str, ...], *, bootstrap: int, seed: int, mask_terms: Iterable[str] | None = None,
                   bbq_dir: Path | None = None, bbq_items: Path | None = None) -> dict[str, Any]:
    """The `names` evaluators on `data` (recordings or samples; converted once for all of them),
    and BBQ when `bbq_dir` is given. `mask_terms` default to the recordings' slice values."""
    from fairness import evaluators as ev
    from fairness.evaluators._inputs import as_samples, group_terms

    terms = group_terms(data) if mask_terms is None else set(mask_terms)
    recordings = as_samples(data) if names else []

    out: dict[str, Any] = {}
    has_vader = importlib.util.find_spec("vaderSentiment") is not None
    if not has_vader and ("sentiment" in names or "counterfactual" in names):
        out["skipped"] = {"sentiment": "VADER is not installed (pip install 'llm-fairness-check[sentiment]'); "
                                       "sentiment measures were left out"}
    vader = _Memo(ev.load_scorer("vader")) if has_vader else None
    if "counterfactual" in names:
        comps: tuple[Component, ...] = ("sentiment", "refusal", "length", "lexical") if has_vader else ("refusal", "length", "lexical")
        cf = ev.counterfactual_divergence(recordings, components=comps, sentiment=vader or "vader", mask_terms=terms,
                                           n_resamples=bootstrap, n_permutations=min(bootstrap, 999), seed=seed)
        out["counterfactual"] = {
            "components": {
                name: {
                    "divergence": json_number(d.divergence), "baseline": json_number(d.baseline), "excess": json_number(d.excess),
                    "ci": _iv(d.interval), "p_value": json_number(d.p_value),
                    "n_cross_pairs": d.n_cross_pairs, "n_within_pairs": d.n_within_pairs,
                }
                for name, d in cf.components.items()
            },
            "n_strata": cf.n_strata,
            "caveat": cf.caveat + " Gates use the excess over the within-group baseline, never the raw divergence.",
        }
    if "refusal" in names:
        ref = ev.refusal_disparity(recordings, n_resamples=bootstrap, seed=seed)
        out["refusal"] = {"paper_flag": _rates(ref.paper_flag), "refusal_to_engage": _rates(ref.refusal),
                          "disclaimer_on_complete_answer": _rates(ref.disclaimer), "caveat": ref.caveat}
    if "sentiment" in names and vader is not None:
        sen = ev.sentiment_disparity(recordings, scorer=vader, n_resamples=bootstrap, seed=seed)
        out["sentiment"] = {"scorer": sen.scorer, "mean": _rates(sen.mean), "negative_rate": _rates(sen.rate), "caveat": sen.caveat}
    if "toxicity" in names:
        tox = ev.toxicity_disparity(recordings, n_resamples=bootstrap, seed=seed)
        out["toxicity"] = {"scorer": tox.scorer, "mean": _rates(tox.mean), "toxic_rate": _rates(tox.rate), "caveat": tox.caveat}
    if bbq_dir is not None:
        items_path = bbq_items or ev.sample_path()
        items, outputs, manifest = ev.replay_bbq(bbq_dir, items_path)
        bbq = ev.bbq_evaluate(items, outputs, n_resamples=bootstrap, seed=seed)
        o = bbq.overall

        def est(e: Any) -> dict[str, Any]:
            return {"value": json_number(e.value), "ci": _iv(e.interval)}

        out["bbq"] = {
            "items": o.n_items, "unparsed": o.n_unparsed, "coverage": json_number(o.coverage),
            "accuracy_ambiguous": est(o.accuracy_ambig), "accuracy_disambiguated": est(o.accuracy_disambig),
            "s_dis": est(o.s_dis), "s_amb": est(o.s_amb), "answer_parsing": dict(bbq.methods),
            "model_id": getattr(manifest, "model_id", None) or getattr(getattr(manifest, "model", None), "id", None),
            "caveat": bbq.caveat,
        }
    return out


def _f(x: float | None) -> str:
    return "n/a" if x is None else f"{x:.3f}"


def _ci(ci) -> str:
    return "" if not ci or ci[0] is None or ci[1] is None else f" [{ci[0]:.3f}, {ci[1]:.3f}]"


def evaluators_md(data: dict[str, Any]) -> str:
    if not data:
        return ""
    lines = ["### Peer-parity evaluators", ""]
    cf = data.get("counterfactual")
    if cf:
        lines += ["**Counterfactual divergence** (template-matched pairs vs the within-group no-effect baseline):", "",
                  "| component | divergence | baseline | excess [95% CI] | p |", "|---|---|---|---|---|"]
        for name, c in cf["components"].items():
            lines.append(f"| {name} | {_f(c['divergence'])} | {_f(c['baseline'])} | {_f(c['excess'])}{_ci(c['ci'])} | {_f(c['p_value'])} |")
        lines.append("")
    rows = []
    if "refusal" in data:
        r = data["refusal"]
        rows += [("refusal (paper flag)", r["paper_flag"]), ("refusal to engage", r["refusal_to_engage"]),
                 ("disclaimer on a complete answer", r["disclaimer_on_complete_answer"])]
    if "sentiment" in data:
        rows += [("sentiment (VADER compound, mean)", data["sentiment"]["mean"]), ("negative-sentiment rate", data["sentiment"]["negative_rate"])]
    if "toxicity" in data:
        rows += [(f"toxic rate ({data['toxicity']['scorer']})", data["toxicity"]["toxic_rate"])]
    if rows:
        lines += ["| measure | max−min over slices [95% CI] | by slice |", "|---|---|---|"]
        for label, g in rows:
            by = ", ".join(f"{k} {_f(v)}" for k, v in g["by_group"].items())
            lines.append(f"| {label} | {_f(g['disparity'])}{_ci(g['ci'])} | {by} |")
        lines.append("")
    for name, why in data.get("skipped", {}).items():
        lines += [f"_{name}: {why}._", ""]
    b = data.get("bbq")
    if b:
        lines += [f"**BBQ** ({b['items']} items, coverage {_f(b['coverage'])}): accuracy ambiguous {_f(b['accuracy_ambiguous']['value'])}, "
                  f"disambiguated {_f(b['accuracy_disambiguated']['value'])}; S_DIS {_f(b['s_dis']['value'])}{_ci(b['s_dis']['ci'])}, "
                  f"S_AMB {_f(b['s_amb']['value'])}{_ci(b['s_amb']['ci'])}. {b['caveat']}", ""]
    return "\n".join(lines)
