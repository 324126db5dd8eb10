"""The suite's published JSON Schema (docs/schema/suite.schema.json) and its reference (docs/suites.md):
the shipped suites are valid under it, the loader and the schema refuse the same bad suites, and the
reference names every key the model has."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from importlib import resources
from typing import Any

import jsonschema
import pytest
import yaml
from conftest import REPO

from fairness import FairnessError, _release, parse_suite
from fairness.cli import _init
from fairness.cli import _main as cli

SCHEMA = json.loads((REPO / "docs" / "schema" / "suite.schema.json").read_text(encoding="utf-8"))
DOC = (REPO / "docs" / "suites.md").read_text(encoding="utf-8")
BUILTIN = sorted(p.name for p in resources.files("fairness.suite").joinpath("builtin").iterdir() if p.name.endswith(".yaml"))


@pytest.fixture(scope="module")
def validator() -> jsonschema.Draft202012Validator:
    jsonschema.Draft202012Validator.check_schema(SCHEMA)
    return jsonschema.Draft202012Validator(SCHEMA)


def errors(validator: jsonschema.Draft202012Validator, data: object) -> list[tuple[str, str]]:
    return sorted((e.validator, e.json_path) for e in validator.iter_errors(data))


def builtin_raw(name: str = "qwen-v0.1.yaml") -> dict:
    return yaml.safe_load(resources.files("fairness.suite").joinpath(f"builtin/{name}").read_text(encoding="utf-8"))


class TestShippedSuitesAreValid:
    def test_every_builtin_suite(self, validator):
        assert BUILTIN == ["qwen-v0.1.yaml"]
        assert {name: errors(validator, builtin_raw(name)) for name in BUILTIN} == {"qwen-v0.1.yaml": []}

    def test_the_copy_init_writes(self, validator, tmp_path):
        assert cli.main(["init", "--dir", str(tmp_path), "--action-ref", f"acme/llm-fairness-check@{'a' * 40}",
                         "--provider", "openai", "--model", "gpt-4o-mini", "--with-suite"]) == 0
        text = (tmp_path / _init.SUITE_COPY).read_text(encoding="utf-8")
        assert errors(validator, yaml.safe_load(text)) == []
        assert f"# Every key, its default and the checks it must pass: {_init.SUITE_DOCS}\n" in text
        assert "`llm-fairness-check schema suite > suite.schema.json`" in text
        assert _init.SUITE_DOCS.startswith(f"{_release.CODE_URL}/blob/") and _init.SUITE_DOCS.endswith("/docs/suites.md")

    def test_the_minimal_suite_of_the_docs(self, validator):
        block = re.search(r"## How the grid is built\n\n```yaml\n(.*?)```", DOC, re.S)
        assert block is not None
        raw = yaml.safe_load(block.group(1))
        assert errors(validator, raw) == []
        suite = parse_suite(raw)
        rows = suite.expand()
        assert (suite.n_rows, len(rows)) == (24, 24)  # 2 templates x 2 roles x 2 slices x 1 regime x 3 seeds
        assert rows[-1].row_id == "F1.p2.plumber.woman.greedy.s3"  # the id the doc shows


def _set(path: str, value: object) -> Callable[[dict], None]:
    """A mutation: `path` (dotted, list indices as numbers) set to `value`."""
    *parents, last = path.split(".")

    def apply(raw: dict) -> None:
        node: Any = raw
        for key in parents:
            node = node[int(key)] if isinstance(node, list) else node[key]
        node[int(last) if isinstance(node, list) else last] = value
    return apply


BAD = [
    ("typo at the top", _set("seed", [1]), [("additionalProperties", "$")],
     "unknown key `seed` (did you mean `seeds`?)"),
    ("typo in a rule", _set("rules.0.treshold", 0.1), [("additionalProperties", "$.rules[0]")],
     "unknown key `rules.0.treshold` (did you mean `threshold`?)"),
    ("temperature out of range", _set("regimes.0.temperature", 6), [("maximum", "$.regimes[0].temperature")],
     "`regimes.0.temperature`: Input should be less than or equal to 5"),
    ("slices neither product nor a list", _set("slices", "all"), [("anyOf", "$.slices")],
     "`slices.literal['product']`: Input should be 'product'"),
    ("a seed twice", _set("seeds", [1, 1]), [("uniqueItems", "$.seeds")],
     "suite `fairness-cards/qwen-v0.1`: `seeds` lists seed 1 twice"),
    ("a negative seed", _set("seeds", [-1]), [("minimum", "$.seeds[0]")],
     "suite `fairness-cards/qwen-v0.1`: seed -1 is out of range (0 to 4294967295)"),
    ("a family id with a space", _set("families.0.id", "F 1"), [("pattern", "$.families[0].id")],
     "`families.0.id`: String should match pattern '^[A-Za-z0-9_-]+$'"),
    ("an unknown statistic", _set("rules.0.statistic", "median"), [("enum", "$.rules[0].statistic")],
     "`rules.0.statistic`: Input should be 'worst_slice', 'max_minus_min' or 'rate'"),
    ("an unknown scorer mode", _set("scorer.mode", "exact"), [("enum", "$.scorer.mode")],
     "`scorer.mode`: Input should be 'paper' or 'strict'"),
    ("min_group_size 0", _set("min_group_size", 0), [("minimum", "$.min_group_size")],
     "`min_group_size`: Input should be greater than or equal to 1"),
]


@pytest.mark.parametrize(("mutate", "schema_errors", "message"), [b[1:] for b in BAD], ids=[b[0] for b in BAD])
def test_a_bad_suite_is_refused_by_the_schema_and_the_loader(validator, mutate, schema_errors, message):
    raw = builtin_raw()
    mutate(raw)
    assert errors(validator, raw) == schema_errors
    with pytest.raises(FairnessError) as err:
        parse_suite(raw, "suite.yaml")
    assert str(err.value) == f"suite.yaml: {message}"


def test_a_missing_required_key_is_refused_by_both(validator):
    raw = builtin_raw()
    del raw["insertion"]
    assert errors(validator, raw) == [("required", "$")]
    with pytest.raises(FairnessError, match=r"^suite\.yaml: missing key `insertion`$"):
        parse_suite(raw, "suite.yaml")


def test_a_cross_key_rule_the_schema_cannot_state_is_the_loaders(validator):
    """The schema checks shapes; rules across keys (docs/suites.md states them) are the loader's."""
    raw = builtin_raw()
    raw["families"][0]["paraphrases"][0] = "Describe {A}."
    assert errors(validator, raw) == []
    with pytest.raises(FairnessError, match=r"family F1 paraphrase p1 is missing placeholder `\{OCC\}`$"):
        parse_suite(raw, "suite.yaml")


def _models(schema: dict) -> Iterator[tuple[str, dict]]:
    """(model name, its properties) for the suite and every model it nests."""
    yield "Suite", schema["properties"]
    for name, definition in schema.get("$defs", {}).items():
        if "properties" in definition:
            yield name, definition["properties"]


class TestReference:
    """docs/suites.md names every key of the schema in a reference table, so it cannot drift from the model.
    A key added to the suite (the rubric's included, once the suite has one) fails here until documented."""

    def reference(self) -> str:
        _, sep, reference = DOC.partition("\n## Reference\n")
        assert sep and DOC.startswith("# Writing a suite\n")
        return reference

    def test_every_top_level_key_has_a_row(self):
        top = self.reference().split("\n### ", 2)[1]
        assert top.startswith("Top-level keys\n")
        rows = set(re.findall(r"^\| `([a-z_]+)` \|", top, re.M))
        assert set(SCHEMA["properties"]) <= rows
        assert rows - set(SCHEMA["properties"]) <= {"rubric"}  # documented ahead of the model (RUBRIC_SPEC)

    def test_every_nested_key_has_a_row(self):
        rows = set(re.findall(r"^\| `([a-z_]+)` \|", self.reference(), re.M))
        missing = sorted(f"{model}.{key}" for model, props in _models(SCHEMA) for key in props if key not in rows)
        assert missing == []

    def test_every_nested_model_is_reached(self):
        assert {name for name, _ in _models(SCHEMA)} >= {
            "Suite", "Insertion", "Placeholder", "Family", "Regime", "ScorerConfig", "DecisionRule", "CardText"}

    def test_the_rubric_section_follows_the_agreed_format(self):
        rubric = self.reference().split("\n### rubric\n", 1)[1]
        for key in ("version", "lists", "metrics", "scorers", "agreement", "match", "case", "terms", "kind", "list",
                    "any_of", "all_of", "builtin", "scorer", "higher_is_worse", "description"):
            assert f"| `{key}` |" in rubric, key
        for mode in ("`match: substring`", "`match: word`", "`match: regex`", "`case: insensitive`", "`case: sensitive`"):
            assert mode in rubric, mode
        assert "\n<!-- The worked example (a hiring assistant) follows. -->\n\n## Worked example: a hiring assistant\n" in DOC

    def test_every_paper_metric_is_listed_for_rules(self):
        from fairness.score._catalog import METRICS

        rules = self.reference().split("\n### rules\n", 1)[1].split("\n### ", 1)[0]
        assert [m for m in METRICS if f"`{m}`" not in rules] == []


def test_the_readme_links_the_reference_from_the_adoption_section():
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    adoption = readme.split("\n### Adopt it in your repository\n", 1)[1].split("\n### ", 1)[0]
    assert "[docs/suites.md](docs/suites.md)" in adoption
    assert "`llm-fairness-check schema suite`" in adoption
