"""Suite: a YAML prompt grid, validated into pydantic and expanded into `Case` rows.

Everything about the grid is resolved here, once, so later stages never re-derive
prompts, slices or ids.
"""


import itertools
import math
import re
from collections import Counter
from collections.abc import Iterator
from functools import cached_property
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from pydantic import Field, PrivateAttr, ValidationError, ValidationInfo, field_validator, model_validator

from fairness._util.canonical import sha256_json
from fairness._util.errors import FairnessError, validation_message
from fairness._util.files import env_limit
from fairness._util.models import Frozen, empty_list
from fairness._util.yaml_io import loads_yaml
from fairness._util.yaml_io import read_yaml as _read_yaml
from fairness.score._spec import RubricSpec, parse_rubric
from fairness.suite._case import Case, SamplingParams
from fairness.suite._rules import DecisionRule, metric_problem, threshold_problem
from fairness.suite._runs import SeedRun

if TYPE_CHECKING:
    from fairness.score._compiled import Rubric

PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")
_ID_UNSAFE = re.compile(r"[^A-Za-z0-9_-]+")

MAX_GRID_ROWS = 1_000_000
"""Largest grid a suite may expand to (the default suite has 3,200 rows); a larger one is
refused before it is expanded. Override with FAIRNESS_MAX_GRID_ROWS or `--max-grid-rows`."""
MAX_GRID_ROWS_ENV = "FAIRNESS_MAX_GRID_ROWS"
MAX_SEED = 2**32 - 1
"""Seeds are sent to engines as unsigned 32-bit integers."""

BUILTIN_SUITES = {"fairness-cards/qwen-v0.1": "qwen-v0.1.yaml"}
"""Suites shipped inside the package, by name."""


class Insertion(Frozen):
    """How the protected attributes enter a template: `{A}` → `a {gender} who is {religion}`."""

    placeholder: str = Field(default="A", pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")
    """The placeholder every paraphrase must contain (default `A`, written `{A}` in templates); a
    name of letters, digits and `_`, not also a key of `placeholders`."""
    template: str = Field(min_length=1)
    """The phrase that replaces it, e.g. `a {gender} who is {religion}`: it must show every attribute
    dimension, as `{dimension}` or, with name pools, `{dimension_name}`, and may use nothing else."""


class Placeholder(Frozen):
    """A non-protected placeholder (e.g. `{OCC}`) and the values it ranges over."""

    values: list[str] = Field(min_length=1)
    """The values it takes, at least one, each once; every value multiplies the grid (one prompt per value)."""
    column: str | None = None
    """Column name in the exported grid (default: the placeholder name, lower-cased)."""


class Family(Frozen):
    """A prompt family: its paraphrases; the first is the canonical template."""

    id: str = Field(min_length=1, pattern=r"^[A-Za-z0-9_-]+$")
    """Short id (letters, digits, `_`, `-`), unique in the suite; it starts every row id (`F1.p1.…`)
    and names the family in reports and `each_family` rule checks."""
    name: str
    """Human-readable name shown in reports, e.g. `Story continuation`."""
    description: str = ""
    """What the framing probes, in a sentence (default empty)."""
    paraphrases: list[str] = Field(min_length=1)
    """Templates `p1` … `pN` of the same request, at least one: each must contain the insertion
    placeholder (`{A}`) and every key of `placeholders`, and may add only `{dimension_name}` name-pool
    placeholders. More paraphrases separate the model's bias from the wording of one prompt."""


class Regime(SamplingParams):
    """A decoding regime: named sampling parameters."""

    name: str = Field(min_length=1, pattern=r"^[A-Za-z0-9_-]+$")
    """Short name (letters, digits, `_`, `-`), unique in the suite; part of every row id."""

    @property
    def params(self) -> SamplingParams:
        return SamplingParams(temperature=self.temperature, top_p=self.top_p, max_new_tokens=self.max_new_tokens)


class ScorerConfig(Frozen):
    """How the outputs are scored."""

    mode: Literal["paper", "strict"] = "paper"
    """`paper` (default): the reference rubric's substring semantics, for parity with the paper (traps
    included: `miss` counts inside `mission`); `strict`: whole words only."""


class CardText(Frozen):
    """What the suite says about its own audit, for the Fairness Card. Card text only: it is not
    part of the suite's `hash`, so editing it never makes recordings stale. A key left out is
    stated on the card as not stated by the suite (the paper's built-in suite has the paper's text)."""

    intended_use: list[str] | None = None
    """In-scope uses of the audit's conclusions, one sentence each (the card's `intended_use.in_scope`)."""
    out_of_scope: list[str] | None = None
    """Uses the audit's conclusions do not support, one sentence each (the card's `intended_use.out_of_scope`)."""
    model_description: str | None = None
    """What the audited model (or system) is and how it is deployed, in a sentence or two (the card's `system.description`)."""
    contact: str | None = None
    """Who answers for this audit: a name, an email address or a URL (the card's `contact`)."""


class Suite(Frozen):
    """A controlled prompt grid plus the audit settings that go with it. Cross-key rules the schema
    cannot state (every template uses every placeholder, name pools have one name per template, …)
    are checked when the suite is loaded; docs/suites.md lists them."""

    name: str = Field(min_length=1)
    """The suite's name, e.g. `acme/hiring-assistant`: recordings carry it and must match it."""
    version: str = "0.1.0"
    """Your version of the suite (default `0.1.0`), recorded in manifests and results; informational
    (staleness is decided by the content hashes, not by this string)."""
    description: str = ""
    """What the suite probes, in a sentence or two (default empty)."""
    system_prompt: str = ""
    """The system message sent with every prompt (default empty: none); part of the grid, so
    changing it makes recordings stale."""
    attributes: dict[str, list[str]] = Field(min_length=1)
    """Protected dimensions and their values, e.g. `{gender: [man, woman]}`: at least one dimension,
    each with at least one value, each value once."""
    slices: Literal["product"] | list[dict[str, str]] = "product"
    """`product` (default) for every combination of the attribute values, or an explicit, non-empty
    list of slices, each giving exactly one value of every dimension, no slice twice."""
    insertion: Insertion
    """How the slice's attribute values are written into each template."""
    placeholders: dict[str, Placeholder] = Field(default_factory=dict)
    """Non-protected placeholders by name (e.g. `OCC`), default none; every paraphrase must use
    every one, and the grid holds every combination of their values."""
    families: list[Family] = Field(min_length=1)
    """The prompt families (framings), at least one, ids unique; results are reported per family."""
    regimes: list[Regime] = Field(min_length=1)
    """Decoding regimes, at least one, names unique: every prompt is asked under each."""
    seeds: list[int] = Field(min_length=1, json_schema_extra={
        "uniqueItems": True, "items": {"type": "integer", "minimum": 0, "maximum": MAX_SEED}})
    """Sampling seeds, at least one, each once, from 0 to 2^32 − 1 (engines take unsigned 32-bit
    seeds): every prompt is asked once per regime and seed. More seeds narrow the intervals."""
    name_pools: dict[str, dict[str, list[str]]] | None = None
    """`{dimension: {value: [one name per template]}}` (default none): a name for every value of the
    dimension and one per template across all families (the i-th name goes with the i-th template);
    use `{<dimension>_name}` in templates or the insertion."""
    scorer: ScorerConfig = Field(default_factory=ScorerConfig)
    """Scoring options (default `mode: paper`)."""
    rules: list[DecisionRule] = Field(default_factory=empty_list)
    """The decision rules the gate checks, ids unique (default none: the verdict is `undefined`)."""
    min_group_size: int = Field(default=5, ge=1, le=1_000_000_000)
    """Fewest rows and template cells a slice needs for a rule on it to be judged (default 5, from 1
    to 10^9); below it the check is `undefined`. `--min-group-size` overrides it for one run."""
    card: CardText | None = None
    """The card's own text: intended use, out-of-scope uses, the audited model's description, a contact."""
    rubric: str | RubricSpec | None = None
    """The rubric that scores the outputs: a rubric file's path (relative to the suite file, inside its
    directory) or the rubric itself as a mapping; none = the paper's rubric (`fairness/score/rubric.yaml`)."""

    _compiled: "Rubric | None" = PrivateAttr(default=None)

    @field_validator("rubric", mode="before")
    @classmethod
    def _rubric_mapping(cls, value: object) -> object:
        """An inline rubric is validated on its own, so its errors name its keys (`lists.x.terms`)."""
        if isinstance(value, dict):
            try:
                return parse_rubric(value, "`rubric`")
            except FairnessError as exc:
                raise ValueError(str(exc)) from None
        return value

    @model_validator(mode="after")
    def _check(self, info: ValidationInfo) -> "Suite":
        from fairness.score._compiled import resolve_rubric

        _check_grid_size(self)
        suite_dir = (info.context or {}).get("suite_dir")
        try:
            self._compiled = resolve_rubric(self.rubric, suite_dir)
        except FairnessError as exc:
            _fail(self.name, str(exc))
        _validate_suite(self)
        return self

    @property
    def compiled_rubric(self) -> "Rubric":
        """The suite's rubric, compiled: its metric catalogue (`.metrics`) and scorer (`.score`)."""
        if self._compiled is None:  # built without validation (`model_construct`): no file to anchor a path
            from fairness.score._compiled import resolve_rubric

            self._compiled = resolve_rubric(self.rubric, None)
        return self._compiled

    @property
    def n_rows(self) -> int:
        """Rows the grid expands to, computed without expanding it."""
        return grid_size(self)

    # -- derived -------------------------------------------------------------------
    @cached_property
    def slice_list(self) -> list[dict[str, str]]:
        dims = list(self.attributes)
        if self.slices == "product":
            return [dict(zip(dims, combo, strict=True)) for combo in itertools.product(*self.attributes.values())]
        return [dict(s) for s in self.slices]

    @cached_property
    def templates(self) -> list[tuple[Family, int, str]]:
        """(family, paraphrase index, template) across all families, in order."""
        return [(f, i, t) for f in self.families for i, t in enumerate(f.paraphrases)]

    @property
    def hash(self) -> str:
        """sha256 of the suite's content, its rubric's content included (`rubric_sha256`, whether the rubric
        is a file or inline): what results are stale against. Fields left at their defaults do not enter
        it, so a new optional field in a later version does not change the hash of an existing suite (a
        suite without `rubric:` keeps its hash). The card's text (`card`) is presentation, not the audit:
        it never enters the hash."""
        content = self.model_dump(mode="json", exclude_defaults=True, exclude={"card", "rubric"})
        if self.rubric is not None:
            content["rubric_sha256"] = self.compiled_rubric.sha256
        return sha256_json(content)

    @property
    def recording_hash(self) -> str:
        """The suite's hash without its rubric: what a recording set is made for (its manifest's
        `suite_hash`). Scoring is not generation, so a rubric change never touches recordings."""
        return sha256_json(self.model_dump(mode="json", exclude_defaults=True, exclude={"card", "rubric"}))

    def column_for(self, placeholder: str) -> str:
        spec = self.placeholders[placeholder]
        return spec.column or placeholder.lower()

    def expand(self) -> list[Case]:
        """The full grid in canonical order (family, paraphrase, placeholders, slice, regime, seed)."""
        return expand(self)


def grid_size(s: Suite) -> int:
    n_slices = math.prod(len(v) for v in s.attributes.values()) if s.slices == "product" else len(s.slices)
    n_placeholders = math.prod(len(p.values) for p in s.placeholders.values())
    n_templates = sum(len(f.paraphrases) for f in s.families)
    return n_templates * n_placeholders * n_slices * len(s.regimes) * len(s.seeds)


def max_grid_rows() -> int:
    return env_limit(MAX_GRID_ROWS_ENV, MAX_GRID_ROWS, "a positive integer", ValueError)


def _check_grid_size(s: Suite) -> None:
    """Refuse a grid too large to expand before anything walks it (a 10^4-seed list is 6.4M rows)."""
    limit = max_grid_rows()
    n = grid_size(s)
    if n > limit:
        _fail(s.name, f"the grid has {n:,} rows, over the limit of {limit:,} (raise it with --max-grid-rows "
                      f"or {MAX_GRID_ROWS_ENV})")


def _first_duplicate(items: list) -> object | None:
    counts = Counter(items)
    return next((x for x in items if counts[x] > 1), None)


def _fail(suite_name: str, message: str) -> None:
    raise ValueError(f"suite `{suite_name}`: {message}")


def _validate_suite(s: Suite) -> None:
    for dim, values in s.attributes.items():
        if not values:
            _fail(s.name, f"attribute `{dim}` has no values")
        if len(set(values)) != len(values):
            _fail(s.name, f"attribute `{dim}` lists a value twice")
    if isinstance(s.slices, list):
        if not s.slices:
            _fail(s.name, "`slices` is an empty list")
        seen = set()
        for sl in s.slices:
            if set(sl) != set(s.attributes):
                _fail(s.name, f"slice {sl} must give exactly the dimensions {sorted(s.attributes)}")
            for dim, v in sl.items():
                if v not in s.attributes[dim]:
                    _fail(s.name, f"slice {sl}: `{v}` is not a value of `{dim}`")
            key = tuple(sl[d] for d in s.attributes)
            if key in seen:
                _fail(s.name, f"duplicate slice {sl}")
            seen.add(key)
    for ph, spec in s.placeholders.items():
        if len(set(spec.values)) != len(spec.values):
            _fail(s.name, f"placeholder `{ph}` lists a value twice")
        if ph == s.insertion.placeholder:
            _fail(s.name, f"placeholder `{ph}` is also the insertion placeholder")
    dup = _first_duplicate([f.id for f in s.families])
    if dup is not None:
        _fail(s.name, f"duplicate family id `{dup}`")
    dup = _first_duplicate([r.name for r in s.regimes])
    if dup is not None:
        _fail(s.name, f"duplicate regime name `{dup}`")
    dup = _first_duplicate(s.seeds)
    if dup is not None:
        _fail(s.name, f"`seeds` lists seed {dup} twice")
    bad = next((x for x in s.seeds if not 0 <= x <= MAX_SEED), None)
    if bad is not None:
        _fail(s.name, f"seed {bad} is out of range (0 to {MAX_SEED})")
    dup = _first_duplicate([r.id for r in s.rules])
    if dup is not None:
        _fail(s.name, f"duplicate rule id `{dup}`")

    name_phs = set()
    n_templates = sum(len(f.paraphrases) for f in s.families)
    if s.name_pools is not None:
        for dim, pools in s.name_pools.items():
            if dim not in s.attributes:
                _fail(s.name, f"name pool for unknown dimension `{dim}`")
            for value in s.attributes[dim]:
                if value not in pools:
                    _fail(s.name, f"name pool `{dim}` has no names for `{value}`")
            for value, names in pools.items():
                if value not in s.attributes[dim]:
                    _fail(s.name, f"name pool `{dim}` names unknown value `{value}`")
                if len(names) != n_templates:
                    _fail(
                        s.name,
                        f"name pool `{dim}.{value}` has {len(names)} names but the suite has "
                        f"{n_templates} templates (one name per template)",
                    )
            name_phs.add(f"{dim}_name")

    ins_used = set(PLACEHOLDER.findall(s.insertion.template))
    allowed_in_insertion = set(s.attributes) | name_phs
    extra = ins_used - allowed_in_insertion
    if extra:
        _fail(s.name, f"insertion template uses unknown placeholder `{{{sorted(extra)[0]}}}`")
    for dim in s.attributes:
        if dim not in ins_used and f"{dim}_name" not in ins_used:
            _fail(s.name, f"insertion template never shows dimension `{dim}` (use `{{{dim}}}`)")

    required = {s.insertion.placeholder} | set(s.placeholders)
    allowed = required | name_phs
    for fam in s.families:
        for i, tmpl in enumerate(fam.paraphrases, start=1):
            used = set(PLACEHOLDER.findall(tmpl))
            missing = required - used
            if missing:
                _fail(s.name, f"family {fam.id} paraphrase p{i} is missing placeholder `{{{sorted(missing)[0]}}}`")
            added = used - allowed
            if added:
                _fail(s.name, f"family {fam.id} paraphrase p{i} adds unknown placeholder `{{{sorted(added)[0]}}}`")
    metrics = s.compiled_rubric.metrics
    for rule in s.rules:
        unknown = metric_problem(rule.metric, metrics)
        if unknown:
            _fail(s.name, f"rule `{rule.id}` names {unknown}")
        problem = threshold_problem(rule.threshold, metrics[rule.metric].kind, rule.kind)
        if problem:
            _fail(s.name, f"rule `{rule.id}`: threshold {problem}")


def _fill(template: str, values: dict[str, str]) -> str:
    return PLACEHOLDER.sub(lambda m: values[m.group(1)], template)


def _safe(value: str) -> str:
    return _ID_UNSAFE.sub("-", value).strip("-") or "x"


def iter_cases(s: Suite) -> Iterator[Case]:
    """The grid rows one at a time, in canonical order (what `expand` lists); a large grid
    can be streamed without holding every `Case`. Row ids are not checked for collisions
    here (see `expand`, `distinct_row_ids`)."""
    # every value comes from the validated suite: construct without re-validating
    return (Case.model_construct(**fields) for run in iter_seed_runs(s) for fields in run.rows())


def iter_seed_runs(s: Suite, max_seeds: int | None = None) -> Iterator[SeedRun]:
    """The grid as `SeedRun`s, in canonical order: one per prompt and regime, or several of at
    most `max_seeds` seeds each (so a chunk of rows never has to hold a longer run)."""
    ph_names = list(s.placeholders)
    ph_products = list(itertools.product(*(s.placeholders[p].values for p in ph_names)))
    params = {r.name: r.params for r in s.regimes}
    step = max_seeds or len(s.seeds)
    # each regime's seeds in pieces, with the end of their row ids: made once, shared by every run
    pieces = {r.name: [(s.seeds[i : i + step], [f".{r.name}.s{seed}" for seed in s.seeds[i : i + step]])
                       for i in range(0, len(s.seeds), step)] for r in s.regimes}
    index = 0
    for t_index, (fam, p_index, tmpl) in enumerate(s.templates):
        pid = f"p{p_index + 1}"
        for combo in ph_products:
            ph_values = dict(zip(ph_names, combo, strict=True))
            for sl in s.slice_list:
                slice_id = "_".join(sl[d] for d in s.attributes)
                names = {}
                if s.name_pools:
                    names = {f"{d}_name": pools[sl[d]][t_index] for d, pools in s.name_pools.items()}
                inserted = _fill(s.insertion.template, {**sl, **names})
                prompt = _fill(tmpl, {**ph_values, **names, s.insertion.placeholder: inserted})
                prompt_id = ".".join([fam.id, pid, *(_safe(v) for v in combo), _safe(slice_id)])
                for regime in s.regimes:
                    for seeds, ends in pieces[regime.name]:
                        yield SeedRun(
                            first=index, prompt_id=prompt_id, family=fam.id, paraphrase_id=pid, template_index=t_index,
                            placeholders=ph_values, slice=sl, slice_id=slice_id, regime=regime.name,
                            params=params[regime.name], prompt=prompt, seeds=seeds, row_ids=[prompt_id + e for e in ends],
                        )
                        index += len(seeds)


def distinct_row_ids(s: Suite) -> None:
    """Raise when two grid rows would share an id (placeholder values colliding once made
    id-safe), checked on the prompt ids: a row id is its prompt id, regime and seed."""
    seen: set[str] = set()
    ph_products = itertools.product(*(s.placeholders[p].values for p in s.placeholders))
    combos = [[_safe(v) for v in combo] for combo in ph_products]
    for fam, p_index, _ in s.templates:
        for combo in combos:
            for sl in s.slice_list:
                pid = ".".join([fam.id, f"p{p_index + 1}", *combo, _safe("_".join(sl[d] for d in s.attributes))])
                if pid in seen:
                    raise FairnessError(f"suite `{s.name}`: two grid rows share the id `{pid}.…` (placeholder values collide)")
                seen.add(pid)


def expand(s: Suite) -> list[Case]:
    cases = list(iter_cases(s))
    if not cases:
        raise FairnessError(f"suite `{s.name}` expands to 0 cases")
    ids = [c.row_id for c in cases]
    if len(set(ids)) != len(ids):
        seen: set[str] = set()
        dup = ""
        for i in ids:
            if i in seen:
                dup = i
                break
            seen.add(i)
        raise FairnessError(f"suite `{s.name}`: two grid rows share the id `{dup}` (placeholder values collide)")
    return cases


def parse_suite(data: object, source: str = "suite", suite_dir: Path | None = None) -> Suite:
    """Validate a mapping (parsed YAML) into a `Suite`, raising `FairnessError` with one line.
    `suite_dir`, the suite file's directory, anchors a `rubric:` file path."""
    if not isinstance(data, dict):
        raise FairnessError(f"{source}: a suite must be a YAML mapping")
    try:
        return Suite.model_validate(data, context={"suite_dir": suite_dir})
    except ValidationError as err:
        raise FairnessError(validation_message(err, source, Suite)) from None


def read_yaml(path: Path, what: str = "file") -> object:
    """Kept for callers of the old name: the project's one strict YAML reader."""
    return _read_yaml(path, what)


def load_suite(name_or_path: str | Path) -> Suite:
    """Load a built-in suite by name (e.g. `fairness-cards/qwen-v0.1`) or a YAML file by path."""
    key = str(name_or_path)
    if key in BUILTIN_SUITES:
        text = resources.files("fairness.suite").joinpath(f"builtin/{BUILTIN_SUITES[key]}").read_text(encoding="utf-8")
        return parse_suite(loads_yaml(text, f"suite `{key}`"), source=f"suite `{key}`")
    path = Path(key)
    if path.is_file():
        return parse_suite(_read_yaml(path, "suite"), source=str(path), suite_dir=path.parent)
    raise FairnessError(
        f"unknown suite `{key}`: no such file, and not a built-in suite (built-in: {', '.join(BUILTIN_SUITES)})"
    )
