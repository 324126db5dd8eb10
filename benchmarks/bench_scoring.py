"""Scoring throughput: our vectorised rubric vs a faithful re-implementation of the paper's
reference loop (pandas `apply` per output, per pattern), on the same texts.

Run by hand:  python benchmarks/bench_scoring.py [--recordings DIR] [--repeat 5]
Needs pandas for the reference loop (`pip install pandas`).
"""

from __future__ import annotations

import argparse
import re
import time
from pathlib import Path

import numpy as np

from fairness.recordings._store import RecordingSet
from fairness.score._rubric import load_rubric, score_texts

DEFAULT = Path(__file__).resolve().parents[1] / "recordings/fairness-cards/qwen-v0.1/SmolLM2-135M-Instruct-Q4_1"


def paper_loop(texts: list[str]):
    """The reference scorer's shape: a DataFrame and one pandas `apply` per output per pattern
    (a column per pattern, then combined), as the paper's `score_outputs.py` loops."""
    import pandas as pd

    r = load_rubric()
    df = pd.DataFrame({"output": texts})
    lists = {**{k: ("regex", v) for k, v in r.regex.items()}, **{k: ("sub", v) for k, v in r.terms.items()}}
    for name, (kind, patterns) in lists.items():
        cols = []
        for i, pat in enumerate(patterns):
            col = f"{name}_{i}"
            if kind == "regex":
                df[col] = df["output"].apply(lambda t, p=pat: int(re.search(p, t, flags=re.IGNORECASE) is not None))
            else:
                df[col] = df["output"].apply(lambda t, w=pat: t.lower().count(w))
            cols.append(col)
        df[f"{name}_count"] = df[cols].sum(axis=1)
        df[name] = (df[f"{name}_count"] > 0).astype(int)
    df["religion_mention"] = df["religion"]
    df["identity_salience"] = ((df["religion"] + df["gendered_title"]) > 0).astype(int)
    df["stereotype_count"] = df["stereotype_count"]
    df["demeaning_count"] = df["demeaning_count"]
    df["positive_professional_count"] = df["positive_professional_count"]
    df["caution_count"] = df["caution_count"]
    df["pilot_harm"] = ((df["refusal"] + df["deflection"] + df["stereotype"] + df["demeaning"]) > 0).astype(int)
    df["word_count"] = df["output"].apply(lambda t: len(t.split()))
    return df


def per_feature_loop(texts: list[str]):
    """A faster variant of the reference: one `apply` per feature, short-circuiting over patterns."""
    import pandas as pd

    r = load_rubric()
    df = pd.DataFrame({"output": texts})

    def any_regex(patterns):
        return lambda t: int(any(re.search(p, t, flags=re.IGNORECASE) for p in patterns))

    def any_sub(words):
        return lambda t: int(any(w in t.lower() for w in words))

    def count_sub(words):
        return lambda t: sum(t.lower().count(w) for w in words)

    df["refusal"] = df["output"].apply(any_regex(r.regex["refusal"]))
    df["deflection"] = df["output"].apply(any_regex(r.regex["deflection"]))
    df["religion_mention"] = df["output"].apply(any_sub(r.terms["religion"]))
    df["gendered_title"] = df["output"].apply(any_sub(r.terms["gendered_title"]))
    df["identity_salience"] = ((df["religion_mention"] + df["gendered_title"]) > 0).astype(int)
    df["stereotype_count"] = df["output"].apply(count_sub(r.terms["stereotype"]))
    df["stereotype"] = (df["stereotype_count"] > 0).astype(int)
    df["demeaning_count"] = df["output"].apply(count_sub(r.terms["demeaning"]))
    df["demeaning"] = (df["demeaning_count"] > 0).astype(int)
    df["positive_professional_count"] = df["output"].apply(count_sub(r.terms["positive_professional"]))
    df["caution_count"] = df["output"].apply(count_sub(r.terms["caution"]))
    df["pilot_harm"] = ((df["refusal"] + df["deflection"] + df["stereotype"] + df["demeaning"]) > 0).astype(int)
    df["word_count"] = df["output"].apply(lambda t: len(t.split()))
    return df


def best_of(fn, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--recordings", default=str(DEFAULT))
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    texts = [r.output for r in RecordingSet(args.recordings).by_key.values()]
    ours = score_texts(texts, "paper")
    ref = paper_loop(texts)
    feat = per_feature_loop(texts)
    for col in ("refusal", "deflection", "stereotype", "demeaning", "pilot_harm", "stereotype_count",
                "positive_professional_count", "caution_count", "word_count", "identity_salience"):
        assert np.array_equal(ours.columns[col], ref[col].to_numpy()), col
        assert np.array_equal(ours.columns[col], feat[col].to_numpy()), col
    t_ours = best_of(lambda: score_texts(texts, "paper"), args.repeat)
    t_strict = best_of(lambda: score_texts(texts, "strict"), args.repeat)
    t_ref = best_of(lambda: paper_loop(texts), max(1, args.repeat // 2))
    t_feat = best_of(lambda: per_feature_loop(texts), max(1, args.repeat // 2))
    n = len(texts)
    print(f"{n} outputs; identical scores to the reference loop")
    print(f"reference loop (apply per pattern): {t_ref * 1e3:8.1f} ms  {n / t_ref:10.0f} outputs/s")
    print(f"faster variant (apply per feature): {t_feat * 1e3:8.1f} ms  {n / t_feat:10.0f} outputs/s")
    print(f"ours, paper mode:                   {t_ours * 1e3:8.1f} ms  {n / t_ours:10.0f} outputs/s  "
          f"({t_ref / t_ours:.1f}x the reference, {t_feat / t_ours:.1f}x the faster variant)")
    print(f"ours, strict mode:                  {t_strict * 1e3:8.1f} ms  {n / t_strict:10.0f} outputs/s  ({t_ref / t_strict:.1f}x)")


if __name__ == "__main__":
    main()
