"""What a suite's rubric asks of the scorer plug-ins in a replayed audit: recorded scores and agreement pairs.

A metric with `scorer: NAME` reads that scorer's recorded scores (`_store.RecordedScores`),
opened once per run and looked up chunk by chunk. A row whose score is not valid (a judge
answer that did not parse) refuses the audit of that metric: the audit's intervals need one
value per row of every template cell, and a rate over the valid rows only would not be the
grid's rate (invalid answers need not fall evenly across slices: a judge that balks at
outputs about one group would bias exactly the comparison the audit makes). The refusal
names the metric, the scorer, how many rows, the first one and its raw answer.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from fairness._util.errors import FairnessError
from fairness.scorers._config import ScorerConfig, parse_scorers
from fairness.scorers._store import RecordedScores


def scorer_metrics(rubric: Any) -> dict[str, str]:
    """Metric name → the scorer it reads, for the metrics of `rubric` (a compiled rubric) with `scorer:`."""
    return {name: m.scorer for name, m in rubric.spec.metrics.items() if getattr(m, "scorer", None) is not None}


def agreement_pairs(rubric: Any) -> list[tuple[str, str]]:
    """The rubric's `agreement:` pairs, each two distinct flag metrics it defines."""
    out = []
    for i, pair in enumerate(rubric.spec.agreement):
        where = f"rubric `agreement[{i}]`"
        if not isinstance(pair, (list, tuple)) or len(pair) != 2 or not all(isinstance(x, str) for x in pair):
            raise FairnessError(f"{where}: a pair is a list of two metric names, e.g. [ageist_kw_rate, judged_ageism_rate]")
        a, b = pair
        for name in pair:
            if name not in rubric.spec.metrics:
                raise FairnessError(f"{where}: unknown metric `{name}`")
            if rubric.spec.metrics[name].kind != "flag":
                raise FairnessError(f"{where}: `{name}` is a count; agreement compares two flag metrics")
        if a == b:
            raise FairnessError(f"{where}: names `{a}` twice")
        out.append((a, b))
    return out


class SuiteScores:
    """The recorded scores of every scorer a rubric's metrics read, for one recording set."""

    def __init__(self, rubric: Any, recordings: str | Path, command: Callable[[str], str] | None = None) -> None:
        self.configs: dict[str, ScorerConfig] = parse_scorers(rubric.spec.scorers, "rubric `scorers`")
        self.metrics = scorer_metrics(rubric)
        self.stores = {
            name: RecordedScores(recordings, name, self.configs[name], command=command(name) if command else None)
            for name in dict.fromkeys(self.metrics.values())
        }
        for metric, name in self.metrics.items():
            output = self.stores[name].manifest.output
            if rubric.spec.metrics[metric].kind == "flag" and output != "flag":
                raise FairnessError(f"metric `{metric}` is a flag but scorer `{name}` gives numbers (`output: {output}`)")

    def __bool__(self) -> bool:
        return bool(self.stores)

    def versions(self) -> dict[str, str]:
        """Each scorer's recorded version (results.json records it)."""
        return {name: s.manifest.version for name, s in self.stores.items()}

    def external(self, texts: Sequence[str], row_ids: Sequence[str]) -> dict[str, np.ndarray]:
        """Each scorer's values for `texts` (the rows `row_ids`), for `Rubric.score(..., external=)`.

        Raises:
            FairnessError: a text has no recorded score, or a row's score is not valid (see the module docstring).
        """
        out = {}
        for name, store in self.stores.items():
            col = store.column(texts)
            if col.invalid:
                first = int(np.flatnonzero(np.isnan(col.values))[0])
                metrics = ", ".join(f"`{m}`" for m, s in self.metrics.items() if s == name)
                raw = " ".join((col.raw[first] or "").split())[:80]
                m = store.manifest
                raise FairnessError(
                    f"metric {metrics}: scorer `{name}` recorded no valid score for {m.invalid} of the {m.texts} "
                    f"distinct outputs (first met: row `{row_ids[first]}`, answer {raw!r}); a rate over the rest would "
                    f"not be the grid's rate: fix the scorer's prompt or labels and record again with `{store.command}`")
            out[name] = col.values
        return out
