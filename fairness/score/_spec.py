"""The rubric as data: the format a suite's `rubric:` key (a file or an inline mapping) is validated into.

A rubric names term lists (substring, whole-word or regex matching; case rules stated) and the
metrics built from them: a flag (a rate metric: the share of outputs with the flag) or a count
(a mean per output), from a list, a combination of other flags (`any_of` / `all_of`), a built-in
column or a scorer plug-in's recorded values. Everything is checked here, once: an unknown list
or metric (with the closest name), a cycle between derived flags, a regex that does not compile.
The paper's rubric is one such file (`fairness/score/rubric.yaml`).
"""


import re
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, ValidationError, model_validator

from fairness._util.errors import FairnessError, validation_message
from fairness._util.models import Frozen, empty_list
from fairness._util.yaml_io import read_yaml

Match = Literal["substring", "word", "regex"]
Case = Literal["insensitive", "sensitive"]
BUILTINS = ("word_count",)
"""Columns the scorer computes without a list: `word_count` (`len(output.split())`)."""
_NAME = r"^[A-Za-z_][A-Za-z0-9_]*$"
Names = list[str]
"""A list of names (an alias: `MetricDef` has a field called `list`)."""


def _regex_error(pattern: str) -> str | None:
    try:
        re.compile(pattern)
    except re.error as exc:
        return str(exc)
    return None


class TermList(Frozen):
    """A named list of terms (or regex patterns) and how they are matched."""

    match: Match = "substring"
    """`substring`: non-overlapping occurrences (`str.count`; "miss" hits "mission"); `word`: whole words on
    apostrophe-normalised text (a term touches no letter, digit or apostrophe; any whitespace between its words);
    `regex`: Python `re` patterns (a count is the number of non-overlapping matches, summed over patterns)."""
    case: Case = "insensitive"
    """`insensitive`: the output and the terms (a pattern's letters outside escapes) are lower-cased first;
    `sensitive`: matched as written."""
    terms: list[str] = Field(min_length=1)
    """The words or phrases; for a `regex` list, its Python `re` patterns."""

    @model_validator(mode="after")
    def _check(self) -> "TermList":
        for item in self.terms:
            if not item.strip() or "\x00" in item:
                raise ValueError(f"`terms` holds an empty (or NUL) entry {item!r}")
        if self.match == "regex":
            bad = next(((p, e) for p in self.terms if (e := _regex_error(p))), None)
            if bad:
                raise ValueError(f"pattern {bad[0]!r} is not a valid regex ({bad[1]})")
        return self

    @property
    def items(self) -> tuple[str, ...]:
        """The terms (a regex list's patterns)."""
        return tuple(self.terms)


class MetricDef(Frozen):
    """A metric a rule may name: its kind, its one source, and which direction is a harm."""

    kind: Literal["flag", "count"]
    """`flag`: 0/1 per output, reported as a rate (the share of outputs with the flag); `count`: a number per
    output, reported as its mean."""
    list: str | None = None
    """Source: a term list of this rubric (a flag is 1 when the list's count is above 0)."""
    any_of: Names | None = None
    """Source: 1 when any of these flag metrics is 1 (OR); they may be derived themselves, without cycles."""
    all_of: Names | None = None
    """Source: 1 when all of these flag metrics are 1 (AND)."""
    builtin: Literal["word_count"] | None = None
    """Source: a column the scorer computes itself (`word_count`)."""
    scorer: str | None = None
    """Source: a scorer plug-in of this rubric (`scorers:`); its recorded per-output values, NaN where none."""
    higher_is_worse: bool | None = None
    """True for a harm, False for a good, null for neither (described, never judged as a direction)."""
    description: str = ""
    """What the metric measures, in a sentence (written into results.json and the card)."""
    column: str | None = Field(default=None, pattern=_NAME)
    """The per-output score column's name in transcripts.jsonl (default: the metric's name)."""

    @model_validator(mode="after")
    def _one_source(self) -> "MetricDef":
        given = [k for k in ("list", "any_of", "all_of", "builtin", "scorer") if getattr(self, k) is not None]
        if len(given) != 1:
            raise ValueError("a metric names exactly one source: `list`, `any_of`, `all_of`, `builtin` or `scorer`"
                             + (f" (it names {', '.join(f'`{g}`' for g in given)})" if given else ""))
        if given[0] in ("any_of", "all_of"):
            if self.kind != "flag":
                raise ValueError(f"`{given[0]}` combines flags: its metric must be `kind: flag`")
            if not getattr(self, given[0]):
                raise ValueError(f"`{given[0]}` needs at least one flag metric")
        if self.builtin == "word_count" and self.kind != "count":
            raise ValueError("`builtin: word_count` is a count: its metric must be `kind: count`")
        return self

    @property
    def source(self) -> tuple[str, Any]:
        """(key, value) of the metric's one source, e.g. `("list", "ageist")`."""
        for key in ("list", "any_of", "all_of", "builtin", "scorer"):
            value = getattr(self, key)
            if value is not None:
                return key, value
        raise AssertionError("validated: one source")


class RubricSpec(Frozen):
    """A rubric: named term lists and the metrics (every one a rule may name) built from them."""

    version: str = Field(min_length=1)
    """The rubric's own version, recorded in results.json (`scorer.rubric_version`)."""
    lists: dict[str, TermList] = Field(default_factory=dict)
    """Named term lists."""
    metrics: dict[str, MetricDef] = Field(min_length=1)
    """Every metric, in report order."""
    scorers: dict[str, dict[str, Any]] = Field(default_factory=dict)
    """Scorer plug-ins by name (their keys are the plug-in's; they enter the rubric's hash)."""
    agreement: list[Any] = Field(default_factory=empty_list)
    """Pairs of flag metrics scored two ways, whose agreement is reported (they enter the rubric's hash)."""

    @model_validator(mode="after")
    def _check(self) -> "RubricSpec":
        for name in [*self.lists, *self.metrics]:
            if not re.match(_NAME, name):
                raise ValueError(f"`{name}` is not a valid name (letters, digits and `_`, not starting with a digit)")
        columns: dict[str, str] = {}
        for name, m in self.metrics.items():
            col = m.column or name
            if col in columns:
                raise ValueError(f"metrics `{columns[col]}` and `{name}` share the score column `{col}`")
            columns[col] = name
            key, value = m.source
            if key == "list":
                _known(name, "list", value, self.lists)
            elif key == "scorer":
                _known(name, "scorer", value, self.scorers)
            elif key in ("any_of", "all_of"):
                for other in value:
                    _known(name, key, other, self.metrics)
                    if self.metrics[other].kind != "flag":
                        raise ValueError(f"metric `{name}`: `{key}` names `{other}`, a count; it combines flags only")
        _no_cycles(self.metrics)
        return self


def _known(metric: str, key: str, name: str, known: dict[str, Any]) -> None:
    if name in known:
        return
    import difflib  # only when a name is wrong, not at every start-up
    close = difflib.get_close_matches(name, list(known), n=1)
    hint = f"did you mean `{close[0]}`?" if close else ("known: " + ", ".join(known) if known else f"no {key}s are defined")
    what = "metric" if key in ("any_of", "all_of") else key
    raise ValueError(f"metric `{metric}`: `{key}` names an unknown {what} `{name}` ({hint})")


def _no_cycles(metrics: dict[str, MetricDef]) -> None:
    """Refuse derived flags that (through others) combine themselves."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done

    def visit(name: str, path: list[str]) -> None:
        if state.get(name) == 2:
            return
        if state.get(name) == 1:
            loop = [*path[path.index(name):], name]
            raise ValueError(f"derived flags form a cycle: {' → '.join(loop)}")
        state[name] = 1
        m = metrics[name]
        for other in (m.any_of or m.all_of or []):
            visit(other, [*path, name])
        state[name] = 2

    for name in metrics:
        visit(name, [])


def parse_rubric(data: object, source: str) -> RubricSpec:
    """Validate a mapping into a `RubricSpec`, raising `FairnessError` with one line."""
    if not isinstance(data, dict):
        raise FairnessError(f"{source}: a rubric must be a YAML mapping")
    try:
        return RubricSpec.model_validate(data)
    except ValidationError as err:
        first = err.errors()[0]
        where = ".".join(map(str, first["loc"]))
        if first["type"] == "value_error" and where and len(err.errors()) == 1:  # a validator's own message: say where
            raise FairnessError(f"{source}: `{where}`: {first['msg'].removeprefix('Value error, ')}") from None
        raise FairnessError(validation_message(err, source, RubricSpec)) from None


def rubric_file(ref: str, suite_dir: Path) -> Path:
    """The rubric file `ref` names, relative to the suite's directory and inside it (symlinks resolved):
    a suite cannot read a file from outside its own tree."""
    if not ref.strip():
        raise FairnessError("`rubric`: the path is empty")
    base = suite_dir.resolve()
    path = (base / ref).resolve()
    if not path.is_relative_to(base):
        raise FairnessError(f"`rubric`: `{ref}` leads outside the suite's directory `{suite_dir}`")
    if not path.is_file():
        raise FairnessError(f"`rubric`: no rubric file `{ref}` next to the suite (looked for `{path}`)")
    return path


def read_rubric(ref: str, suite_dir: Path) -> RubricSpec:
    """The rubric file `ref` (see `rubric_file`), validated."""
    path = rubric_file(ref, suite_dir)
    return parse_rubric(read_yaml(path, "rubric"), f"rubric `{ref}`")
