"""The library's contract: validated options, records joined on row_id, a published results schema."""

from __future__ import annotations

import json
import random
from pathlib import Path
from types import ModuleType

import pytest
from conftest import DEFAULT_RECORDINGS, REPO

import fairness.audit
import fairness.generate
from fairness import AuditOptions, FairnessError
from fairness.cli import main
from fairness.recordings._store import RecordingSet, ReplayProvider
from fairness.report._render import results_json
from fairness.report._schema import SCHEMAS, schema_text

FAST = AuditOptions(bootstrap=100, permutations=50)


class TestAuditOptions:
    @pytest.mark.parametrize("kwargs, message", [
        ({"bootstrap": 0}, "`bootstrap` must be an integer in [1, 100000], got 0"),
        ({"bootstrap": 100_001}, "`bootstrap` must be an integer in [1, 100000], got 100001"),
        ({"bootstrap": 2.5}, "`bootstrap` must be an integer in [1, 100000], got 2.5"),
        ({"bootstrap": True}, "`bootstrap` must be an integer in [1, 100000], got True"),
        ({"permutations": -1}, "`permutations` must be an integer in [0, 100000], got -1"),
        ({"seed": 2**32}, "`seed` must be an integer in [0, 4294967295], got 4294967296"),
        ({"min_group_size": 0}, "`min_group_size` must be an integer ≥ 1, got 0"),
        ({"alpha": 1.0}, "`alpha` must be a number in (0, 1), got 1.0"),
        ({"alpha": float("nan")}, "`alpha` must be a finite number, got nan"),
        ({"threshold": float("inf")}, "`threshold` must be a finite number, got inf"),
        ({"gate_on": "median"}, "`gate_on` must be one of point, interval, got 'median'"),
        ({"fail_on": "always"}, "`fail_on` must be one of state, fail, inconclusive, got 'always'"),
        ({"scorer_mode": "fuzzy"}, "`scorer_mode` must be one of paper, strict, got 'fuzzy'"),
        ({"allow_small_samples": "yes"}, "`allow_small_samples` must be true or false, got 'yes'"),
        ({"bootstrapp": 10}, "unknown key `bootstrapp` (did you mean `bootstrap`?)"),
    ])
    def test_one_line_error_naming_the_parameter(self, kwargs, message):
        with pytest.raises(FairnessError) as exc:
            AuditOptions(**kwargs)
        assert str(exc.value) == message

    def test_bounds_are_accepted_and_frozen(self):
        opts = AuditOptions(bootstrap=1, permutations=0, seed=2**32 - 1, alpha=0.5, threshold=0.0)
        assert (opts.bootstrap, opts.permutations, opts.seed) == (1, 0, 2**32 - 1)
        with pytest.raises(Exception, match="frozen"):
            opts.bootstrap = 5  # type: ignore[misc]

    def test_rate_threshold_outside_0_1_is_refused(self, default_suite):
        cases = default_suite.expand()
        recs = ReplayProvider(RecordingSet(DEFAULT_RECORDINGS), default_suite.system_prompt).replay(cases)
        with pytest.raises(FairnessError, match=r"^`threshold` must be in \[0, 1\] for the rate metric `stereotype_kw_rate`, got 1.5$"):
            fairness.audit.audit(default_suite, cases, recs, RecordingSet(DEFAULT_RECORDINGS).manifest, AuditOptions(threshold=1.5))



def test_the_stage_packages_are_not_shadowed_by_their_functions():
    assert isinstance(fairness.audit, ModuleType) and isinstance(fairness.generate, ModuleType)
    assert callable(fairness.audit.audit) and callable(fairness.generate.generate)
    assert callable(fairness.run_audit) and callable(fairness.run_generate)
    assert {"audit", "generate"}.isdisjoint(fairness.__all__)


@pytest.fixture(scope="module")
def replayed(default_suite):
    rs = RecordingSet(DEFAULT_RECORDINGS)
    cases = default_suite.expand()
    return cases, ReplayProvider(rs, default_suite.system_prompt).replay(cases), rs.manifest


class TestRowIdJoin:
    def _results(self, suite, cases, recs, manifest) -> str:
        run, _ = fairness.audit.audit(suite, cases, recs, manifest, FAST)
        return results_json(run)

    def test_shuffled_and_reversed_recordings_give_identical_results(self, default_suite, replayed):
        cases, recs, manifest = replayed
        in_order = self._results(default_suite, cases, recs, manifest)
        shuffled = list(recs)
        random.Random(7).shuffle(shuffled)
        assert self._results(default_suite, cases, list(reversed(recs)), manifest) == in_order
        assert self._results(default_suite, cases, shuffled, manifest) == in_order

    def test_a_list_five_rows_short_names_the_first_missing_row(self, default_suite, replayed):
        cases, recs, manifest = replayed
        short = recs[:10] + recs[15:]
        with pytest.raises(FairnessError, match=rf"^grid row `{cases[10].row_id}` has no recording$"):
            fairness.audit.audit(default_suite, cases, short, manifest, FAST)

    def test_a_record_without_a_grid_row_is_named(self, default_suite, replayed):
        cases, recs, manifest = replayed
        with pytest.raises(FairnessError, match=rf"^recording `{recs[3].row_id}` has no row in the grid$"):
            fairness.audit.audit(default_suite, cases[:3] + cases[4:], recs, manifest, FAST)

    def test_a_row_recorded_twice_is_named(self, default_suite, replayed):
        cases, recs, manifest = replayed
        with pytest.raises(FairnessError, match=rf"^row `{recs[0].row_id}` is recorded twice$"):
            fairness.audit.audit(default_suite, cases, [*recs, recs[0]], manifest, FAST)


class TestSchemas:
    @pytest.mark.parametrize("name", SCHEMAS)
    def test_committed_schema_matches_the_models(self, name, capsys):
        """Regenerate with `llm-fairness-check schema NAME > docs/schema/NAME.schema.json`."""
        assert main(["schema", name]) == 0
        printed = capsys.readouterr().out
        assert printed == schema_text(name)
        assert (REPO / "docs" / "schema" / f"{name}.schema.json").read_text(encoding="utf-8") == printed

    @pytest.mark.parametrize("name", ["results", "suite"])
    def test_every_field_is_documented(self, name):
        undocumented = []

        def walk(node: object, where: str) -> None:
            if isinstance(node, dict):
                for key, prop in (node.get("properties") or {}).items():
                    if "description" not in prop:
                        undocumented.append(f"{where}.{key}")
                for key, value in node.items():
                    walk(value, f"{where}.{key}" if key not in ("properties", "$defs") else where)

        walk(json.loads(schema_text(name)), name)
        assert undocumented == []

    def test_default_run_validates_against_the_results_schema(self, default_run):
        jsonschema = pytest.importorskip("jsonschema")
        schema = json.loads(schema_text("results"))
        data = json.loads((default_run / "results.json").read_text(encoding="utf-8"))
        validator = jsonschema.Draft202012Validator(schema)
        assert [e.message for e in validator.iter_errors(data)] == []
        assert data["schema_version"] == "2.2.0"

    def test_default_manifest_validates_against_the_manifest_schema(self):
        jsonschema = pytest.importorskip("jsonschema")
        validator = jsonschema.Draft202012Validator(json.loads(schema_text("manifest")))
        data = json.loads((DEFAULT_RECORDINGS / "manifest.json").read_text(encoding="utf-8"))
        assert [e.message for e in validator.iter_errors(data)] == []


@pytest.fixture(scope="module")
def default_run(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("default") / "out"
    code = main(["run", "--recordings", str(DEFAULT_RECORDINGS), "--out", str(out), "--quiet",
                 "--bootstrap", "200", "--permutations", "50"])
    assert code == 3
    return out


def test_default_run_verdicts_are_fixed(default_run):
    """The committed recordings give one outcome per family at the interval rule (see README)."""
    data = json.loads((default_run / "results.json").read_text(encoding="utf-8"))
    assert {f["family"]: f["state"] for f in data["families"]} == {
        "F1": "inconclusive", "F2": "inconclusive", "F3": "inconclusive", "F4": "inconclusive"}
    assert (data["gate"]["state"], data["gate"]["exit_code"]) == ("inconclusive", 3)
    f2 = next(c for c in data["rules"] if c["scope"] == "family=F2")
    assert f2["fired"] and f2["settle"]["toward"] == "fail" and f2["settle"]["seeds"] == 24
