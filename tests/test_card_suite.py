"""The card speaks for the suite: its own intended use and out-of-scope text, the exact command
that reproduces results.json, and the peer evaluators' results (or why one could not run)."""

from __future__ import annotations

import importlib.util
import json
import shlex
from importlib import resources

import pytest
import yaml
from conftest import write_recording_set

from fairness.cli import main
from fairness.report._card_text import NOT_STATED, PAPER_CARD, card_text
from fairness.suite._suite import load_suite

HIRING_CARD = {
    "intended_use": ["Pre-release check of the Acme hiring assistant's answers about candidates."],
    "out_of_scope": ["Ranking or rejecting real candidates.", "Claims about other assistants."],
    "model_description": "Acme's hiring assistant, a fine-tuned 7B model served behind our screening UI.",
    "contact": "fairness@acme.example",
}


def _suite_file(root, card: dict | None, name: str = "acme/hiring-assistant"):
    data = yaml.safe_load(resources.files("fairness.suite").joinpath("builtin/qwen-v0.1.yaml").read_text(encoding="utf-8"))
    data.update(name=name, seeds=[1, 2])
    if card is not None:
        data["card"] = card
    path = root / "audits" / "hiring.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def _record(root, suite_path):
    suite = load_suite(suite_path)
    return write_recording_set(root / "recordings" / "hiring", suite,
                               lambda c: "Sure. A bossy and emotional person." if c.family == "F2" and c.seed == 1 else f"Answer {c.row_id}.")


@pytest.fixture()
def hiring(git_repo):
    suite_path = _suite_file(git_repo, HIRING_CARD)
    _record(git_repo, suite_path)
    return git_repo


FAST = ["--bootstrap", "200", "--permutations", "200"]


def test_the_card_states_the_suites_own_text(hiring, shared_dir):
    code = main(["run", "--suite", "audits/hiring.yaml", "--recordings", "recordings/hiring", "--out", "out", *FAST])
    assert code == 1
    card = yaml.safe_load((hiring / "out" / "card.yaml").read_text())
    assert card["intended_use"]["in_scope"] == HIRING_CARD["intended_use"]
    assert card["intended_use"]["out_of_scope"][:2] == HIRING_CARD["out_of_scope"]
    assert not any("allocative" in x for x in card["intended_use"]["out_of_scope"])
    assert card["system"]["description"] == HIRING_CARD["model_description"]
    assert card["contact"] == "fairness@acme.example"
    md = (hiring / "out" / "card.md").read_text()
    assert "- Ranking or rejecting real candidates." in md and "**Contact:** fairness@acme.example" in md
    assert f"**Description:** {HIRING_CARD['model_description']}" in md
    html = (hiring / "out" / "card.html").read_text()
    assert "<li>Ranking or rejecting real candidates.</li>" in html and "fairness@acme.example" in html
    jsonschema = pytest.importorskip("jsonschema")
    for name in ("core.yaml", "llm.yaml"):
        schema = yaml.safe_load((shared_dir / "reference" / "fairness-card-schema" / name).read_text())
        jsonschema.validate(card, schema, format_checker=jsonschema.FormatChecker())


def test_card_text_is_not_part_of_the_suite_hash(git_repo):
    with_text = load_suite(_suite_file(git_repo, HIRING_CARD))
    without = load_suite(_suite_file(git_repo, None))
    assert with_text.hash == without.hash and with_text.card is not None and without.card is None


def test_a_suite_without_card_keys_says_it_did_not_state_them(git_repo):
    suite = load_suite(_suite_file(git_repo, {"contact": "me@acme.example"}))
    text = card_text(suite)
    assert text.intended_use == NOT_STATED.intended_use and text.out_of_scope == NOT_STATED.out_of_scope
    assert text.model_description == NOT_STATED.model_description and text.contact == "me@acme.example"
    assert text.out_of_scope == ["Not stated: the suite does not say which uses this audit does not support "
                                 "(suite key `card.out_of_scope`)."]


def test_the_papers_suite_keeps_the_papers_text():
    text = card_text(load_suite("fairness-cards/qwen-v0.1"))
    assert text == PAPER_CARD
    assert "Hiring, credit, healthcare, or other allocative decisions." in (text.out_of_scope or [])


def test_an_unknown_card_key_is_refused_in_one_line(git_repo, capsys):
    path = _suite_file(git_repo, {"intended_uses": ["typo"]})
    assert main(["grid", "--suite", str(path), "--output", str(git_repo / "g.csv")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "intended_uses" in err


def test_running_the_cards_replay_command_reproduces_results_json(hiring):
    argv = ["run", "--suite", "audits/hiring.yaml", "--recordings", "recordings/hiring", "--out", "first",
            "--threshold", "0.2", "--seed", "7", "--evaluators", "refusal", *FAST]
    code = main(argv)
    card = yaml.safe_load((hiring / "first" / "card.yaml").read_text())
    command = card["reproducibility"]["replay_command"]
    assert card["reproducibility"]["regen_command"] == command
    assert command == ("llm-fairness-check run --suite audits/hiring.yaml --recordings recordings/hiring --threshold 0.2 "
                       "--bootstrap 200 --permutations 200 --seed 7 --evaluators refusal --out out")
    again = shlex.split(command)
    assert again[:2] == ["llm-fairness-check", "run"] and again[-2:] == ["--out", "out"]
    assert main([*again[1:-1], "second"]) == code
    first, second = ((hiring / d / "results.json").read_bytes() for d in ("first", "second"))
    assert first == second
    data = json.loads(first)
    assert {r["threshold"] for r in data["rules"] if "regression" not in r["rule"]} == {0.2}


def test_the_cards_replay_command_names_a_built_in_suite_by_name(tmp_path, monkeypatch, default_suite):
    monkeypatch.chdir(tmp_path)
    write_recording_set(tmp_path / "rec", default_suite, lambda c: f"Answer {c.row_id}.")
    code = main(["run", "--recordings", "rec", "--out", "o1", *FAST])
    command = yaml.safe_load((tmp_path / "o1" / "card.yaml").read_text())["reproducibility"]["replay_command"]
    assert command.startswith("llm-fairness-check run --suite fairness-cards/qwen-v0.1 --recordings rec ")
    assert main([*shlex.split(command)[1:-1], "o2"]) == code
    assert (tmp_path / "o1" / "results.json").read_bytes() == (tmp_path / "o2" / "results.json").read_bytes()


def test_evaluator_results_reach_the_card(hiring):
    main(["run", "--suite", "audits/hiring.yaml", "--recordings", "recordings/hiring", "--out", "out",
          "--evaluators", "refusal", *FAST])
    out = hiring / "out"
    assert "refusal" in yaml.safe_load((out / "card.yaml").read_text())["evaluators"]
    md = (out / "card.md").read_text()
    assert "## Peer-parity evaluators" in md and "| refusal (paper flag) |" in md
    html = (out / "card.html").read_text()
    assert "<h2>Peer-parity evaluators</h2>" in html and "refusal (paper flag)" in html
    assert "| refusal (paper flag) |" in (out / "summary.md").read_text()


def test_an_evaluator_that_cannot_run_is_a_caveat_everywhere_and_a_warning(hiring, monkeypatch, capsys):
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "vaderSentiment" else real(name, *a))
    code = main(["run", "--suite", "audits/hiring.yaml", "--recordings", "recordings/hiring", "--out", "out",
                 "--evaluators", "all", *FAST])
    assert code == 1
    err = capsys.readouterr().err
    assert "warning: requested evaluator `sentiment` could not run: VADER is not installed" in err
    out = hiring / "out"
    caveats = json.loads((out / "results.json").read_text())["caveats"]
    assert [c["code"] for c in caveats if c["code"] == "evaluator-skipped"] == ["evaluator-skipped"]
    for name in ("summary.md", "card.md", "card.yaml", "card.html"):
        assert "evaluator-skipped" in (out / name).read_text(), name
