"""The summary's per-family Mermaid charts and card.html, as text (the browser tests render them)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import pytest
from conftest import write_recording_set
from paper_grid import paper_text_for

from fairness.audit._audit import FairnessRun
from fairness.cli import main
from fairness.report._charts import mermaid_charts
from fairness.report._html import CSP, _axis, _wrap, card_html
from fairness.suite import Suite, load_suite

HOSTILE = 'F"9`` ```\n<script>alert(1)</script>'


@dataclass(frozen=True)
class Paper:
    out: Path
    run: FairnessRun
    suite: Suite


@pytest.fixture(scope="module")
def paper(tmp_path_factory) -> Paper:
    """The main job on recordings with the paper's counts, through the CLI."""
    suite = load_suite("fairness-cards/qwen-v0.1")
    root = tmp_path_factory.mktemp("charts")
    rec = write_recording_set(root / "rec", suite, paper_text_for(suite.expand()))
    main(["run", "--suite", suite.name, "--recordings", str(rec), "--out", str(root / "out"), "--bootstrap", "200", "--permutations", "200"])
    run = FairnessRun.model_validate_json((root / "out" / "results.json").read_text())
    return Paper(root / "out", run, suite)


def _blocks(text: str) -> list[str]:
    return re.findall(r"^```mermaid\n(.*?)^```", text, flags=re.MULTILINE | re.DOTALL)


def test_one_chart_per_family_with_one_bar_series_and_the_threshold(paper):
    run = paper.run
    text = (paper.out / "summary.md").read_text()
    blocks = _blocks(text)
    st = next(m for m in run.metrics if m.metric == "stereotype_kw_rate")
    assert len(blocks) == 4
    for fam, block in zip(run.families, blocks, strict=True):
        bars = re.findall(r"^    bar \[(.*)\]$", block, re.MULTILINE)
        lines = re.findall(r"^    line \[(.*)\]$", block, re.MULTILINE)
        assert len(bars) == 1 and lines == ["0.05, 0.05, 0.05, 0.05"]
        by_slice = st.scopes[f"family={fam.family}"].by_slice
        assert [float(v) for v in bars[0].split(", ")] == [round(by_slice[s].value, 4) for s in run.slices]
        assert f'title "{fam.family} ({fam.name}): {fam.state}"' in block
    assert "left to right" not in text
    assert "one bar per slice, none stacked or hidden. The red line is the rule's threshold 0.05." in text


def test_undefined_slices_are_left_out_and_named(paper):
    run = paper.run
    st = next(m for m in run.metrics if m.metric == "stereotype_kw_rate")
    scope = st.scopes["family=F3"]
    hole = scope.by_slice["woman_Muslim"].model_copy(update={"value": None, "ci": None})
    scope = scope.model_copy(update={"by_slice": {**scope.by_slice, "woman_Muslim": hole}})
    st = st.model_copy(update={"scopes": {**st.scopes, "family=F3": scope}})
    run = run.model_copy(update={"metrics": [st if m.metric == st.metric else m for m in run.metrics]})
    text = mermaid_charts(run, "stereotype_kw_rate")
    f3 = _blocks(text)[2]
    assert 'x-axis ["man_Christian", "man_Muslim", "woman_Christian"]' in f3
    assert "Not drawn (undefined: too few rows): F3 woman_Muslim." in text


def test_suite_strings_cannot_break_the_chart_or_the_page(paper):
    run = paper.run
    fams = [f.model_copy(update={"name": HOSTILE}) if f.family == "F1" else f for f in paper.run.families]
    run = run.model_copy(update={"families": fams})
    text = mermaid_charts(run, "stereotype_kw_rate")
    title = next(ln for ln in _blocks(text)[0].splitlines() if "title" in ln)
    assert title == "    title \"F1 (F'9'' ''''<script>alert(1)</script>): " + fams[0].state + '"'
    assert text.count("```") == 8
    page = card_html(run, paper.suite)
    assert "<script" not in page and "&lt;script&gt;alert(1)&lt;/script&gt;" in page


def test_card_html_is_self_contained(paper):
    page = (paper.out / "card.html").read_text()
    assert f'<meta http-equiv="Content-Security-Policy" content="{CSP}">' in page
    assert CSP == "default-src 'none'; style-src 'unsafe-inline'; img-src data:"
    assert "http:" not in page.replace('http-equiv="Content-Security-Policy"', "") and "https:" not in page
    assert "<script" not in page and "<link" not in page and "src=" not in page
    assert page.count("<svg ") == 4 and page.count("threshold 0.05</text>") == 4
    assert page.index("Per-family results") < page.index("<svg ")


def test_axis_is_round():
    assert _axis(0.149363) == (0.15000000000000002, [0.0, 0.05, 0.1, 0.15])
    assert _axis(0.05) == (0.05, [0.0, 0.01, 0.02, 0.03, 0.04, 0.05])
    assert _axis(1.0) == (1.0, [0.0, 0.2, 0.4, 0.6, 0.8, 1.0])


def test_slice_names_wrap_at_a_separator_then_are_cut():
    """A slice name gets up to two lines of its slot's width; the full name is the label's tooltip."""
    assert _wrap("man_Christian", 87.5) == ["man_Christian"]
    assert _wrap("woman_Muslim", 57) == ["woman_", "Muslim"]
    assert _wrap("older adult (65+) with a disability, rural", 87.5) == ["older adult", "(65+) with a…"]
    assert _wrap("non_binary_person_described_at_great_length_in_the_suite_file", 57) == ["non_", "binary_…"]
    assert _wrap("WWWWWWWWWWWWWWWWWWWWWWWW", 57) == ["WWWW", "WWW…"]


def test_chart_title_keeps_family_and_state_when_the_name_is_cut(paper):
    fams = [f.model_copy(update={"name": "x" * 200}) if f.family == "F1" else f for f in paper.run.families]
    page = card_html(paper.run.model_copy(update={"families": fams}), paper.suite)
    assert re.findall(r'<text x="4" y="18"[^>]*>(F1 [^<]*)</text>', page) == [f"F1 ({'x' * 30}…): {fams[0].state}"]
    assert f'aria-label="F1 ({"x" * 200}): {fams[0].state}"' in page


@pytest.mark.parametrize("text", ["", "plain", "a & b < c > d \"q\" 'r'", "&amp; already", "<<&&>>", "é — ≥ 😀", "''\"\""])
@pytest.mark.parametrize("quote", [True, False])
def test_card_html_escapes_as_html_escape_does(text, quote):
    import html

    from fairness.report._html import escape

    assert escape(text, quote) == html.escape(text, quote)
