"""A rubric compiled: its metric catalogue, definitions and hash, without the scanner's weight.

`Rubric` is what a suite resolves its `rubric:` key to (`resolve_rubric`): the `MetricSpec`s every
stage reads, each metric's definition for results.json and the card, and the sha256 that joins the
suite's hash. Loading a suite must stay light, so numpy and the scanner (`_rubric`) load only when
outputs are scored.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from functools import cached_property, lru_cache
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from fairness._util.canonical import sha256_json
from fairness._util.errors import FairnessError
from fairness._util.yaml_io import loads_yaml
from fairness.score._catalog import MetricSpec
from fairness.score._spec import RubricSpec, TermList, parse_rubric, read_rubric

if TYPE_CHECKING:
    import numpy as np

    from fairness.score._rubric import Plan, ScoreTable

Mode = Literal["paper", "strict"]
MODES: tuple[Mode, ...] = ("paper", "strict")
PAPER_RUBRIC_FILE = "fairness/score/rubric.yaml"


class Rubric:
    """A validated rubric compiled for scoring: its metric catalogue (`metrics`, in report order) and
    `score`, which turns outputs into one column per metric."""

    def __init__(self, spec: RubricSpec, source: str):
        self.spec = spec
        self.source = source
        """Where it came from: the built-in file, a suite-relative path, or `inline`."""
        self.version = spec.version
        self.sha256 = sha256_json(spec.model_dump(mode="json"))
        """sha256 of the rubric's canonical JSON, scorers and agreement pairs included."""
        self.metrics: dict[str, MetricSpec] = {
            name: MetricSpec(name, m.column or name, "rate" if m.kind == "flag" else "count", m.higher_is_worse, m.description)
            for name, m in spec.metrics.items()
        }
        self.regex = {n: lst.items for n, lst in spec.lists.items() if lst.match == "regex"}
        """Regex lists' patterns, by list name."""
        self.terms = {n: lst.items for n, lst in spec.lists.items() if lst.match != "regex"}
        """Substring and word lists' terms, by list name."""

    @cached_property
    def counted(self) -> set[str]:
        """Lists some count metric reads (a regex list read by flags only needs no counts)."""
        return {m.list for m in self.spec.metrics.values() if m.list is not None and m.kind == "count"}

    def _fast(self, name: str) -> bool:
        from fairness.score._rubric import _anchors

        lst = self.spec.lists[name]
        if lst.case != "insensitive":
            return False
        return lst.match == "substring" or (lst.match == "regex" and name not in self.counted and _anchors(lst.items) is not None)

    @cached_property
    def plan(self) -> Plan | None:
        """The one-pass finder over the case-insensitive substring lists and the anchors of the simple,
        flag-only case-insensitive regex lists (see `fairness.score._rubric._plan`)."""
        from fairness.score._rubric import _plan

        fast = [n for n in self.spec.lists if self._fast(n)]
        return _plan({n: tuple(t.lower() for t in self.terms[n]) for n in fast if n in self.terms},
                     {n: self.regex[n] for n in fast if n in self.regex})

    def score(self, texts: Sequence[str], mode: Mode = "paper", external: Mapping[str, np.ndarray] | None = None) -> ScoreTable:
        """Score every output: one column per metric, named by its `column`. `external` holds each scorer
        plug-in's per-output values (float64, NaN for no valid score), by scorer name, in `texts`' order."""
        from fairness.score._rubric import _Scoring

        if mode not in MODES:
            raise ValueError(f"`mode` must be one of {MODES}, got {mode!r}")
        return _Scoring(self, list(texts), mode, external or {}).table()

    def definitions(self, mode: Mode) -> list[dict[str, Any]]:
        """Each metric's definition as scored in `mode`: kind, source, the terms or patterns with their
        match mode (`substring` reads `word` in `strict` mode) and case rule, direction, description."""
        out = []
        for name, m in self.spec.metrics.items():
            key, value = m.source
            lst = self.spec.lists.get(value) if key == "list" else None
            out.append({
                "name": name, "column": m.column or name, "kind": m.kind, "unit": "rate" if m.kind == "flag" else "count",
                "source": key, "of": [value] if isinstance(value, str) else list(value),
                "match": None if lst is None else effective_match(lst, mode),
                "case": None if lst is None else lst.case,
                "terms": None if lst is None else list(lst.items),
                "higher_is_worse": m.higher_is_worse, "description": m.description,
            })
        return out


def effective_match(lst: TermList, mode: Mode) -> str:
    """How `lst` is matched in `mode`: `strict` reads every substring list as a word list."""
    return "word" if lst.match == "substring" and mode == "strict" else lst.match


_COMPILED: dict[tuple[str, str], Rubric] = {}


def compile_rubric(spec: RubricSpec, source: str) -> Rubric:
    """The compiled `spec` (one per content and source, so a suite loaded twice scans with one finder)."""
    key = (sha256_json(spec.model_dump(mode="json")), source)
    if key not in _COMPILED:
        _COMPILED[key] = Rubric(spec, source)
    return _COMPILED[key]


@lru_cache(maxsize=1)
def paper_rubric() -> Rubric:
    """The paper's rubric: the built-in `rubric.yaml`, the rubric of every suite without a `rubric:` key."""
    text = resources.files("fairness.score").joinpath("rubric.yaml").read_text(encoding="utf-8")
    where = f"rubric `{PAPER_RUBRIC_FILE}`"
    return Rubric(parse_rubric(loads_yaml(text, where), where), PAPER_RUBRIC_FILE)


def load_rubric() -> Rubric:
    """The paper's rubric (the name older callers use)."""
    return paper_rubric()


INLINE = "inline"
"""`Rubric.source` of a rubric written in the suite itself."""


def resolve_rubric(value: str | RubricSpec | None, suite_dir: Path | None) -> Rubric:
    """A suite's `rubric:` value compiled: none → the paper's; a mapping → itself; a path → the file,
    relative to the suite's directory `suite_dir` and inside it."""
    if value is None:
        return paper_rubric()
    if isinstance(value, RubricSpec):
        return compile_rubric(value, INLINE)
    if suite_dir is None:
        raise FairnessError(f"`rubric`: the path `{value}` needs a suite read from a file (its directory anchors the path)")
    return compile_rubric(read_rubric(value, suite_dir), value)


