"""What a reader sees: the summary's Mermaid charts and card.html, rendered in headless Chromium.

The charts are drawn by the real mermaid library (pinned in tests/browser/package-lock.json)
and measured in the browser: every block must render, and no two bars may overlap, which
is how mermaid-js/mermaid#7392 (bar series drawn on top of each other) hid three of our
four families. card.html must open with no request and no console error, and in its charts no text label may touch a
mark or another label (issue 19: the threshold label was crossed by the whiskers).
`scripts/setup-browser.sh` installs Chromium and the npm packages; where that was not
possible these tests are skipped and say why.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from conftest import DEFAULT_RECORDINGS, REPO

from fairness.audit._audit import FairnessRun
from fairness.audit._results import Estimate
from fairness.cli import main
from fairness.report._html import card_html
from fairness.suite import load_suite

BROWSER_DIR = REPO / "tests" / "browser"
BROWSERS = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")


def overlapping_bars(bars: list[dict], tol: float = 0.5) -> list[tuple[int, int]]:
    """Pairs of bars (indices) whose boxes share more than `tol` px horizontally and touch vertically.

    Vertical bars all stand on the x axis, so a horizontal overlap is a visual one even for a
    bar of height 0 (drawn at the baseline, where any other bar covers it).
    """
    found = []
    for i, a in enumerate(bars):
        for j in range(i + 1, len(bars)):
            b = bars[j]
            dx = min(a["x"] + a["width"], b["x"] + b["width"]) - max(a["x"], b["x"])
            dy = min(a["y"] + a["height"], b["y"] + b["height"]) - max(a["y"], b["y"])
            if dx > tol and dy >= -tol:
                found.append((i, j))
    return found


def test_overlap_check_itself():
    bar = {"x": 0.0, "y": 10.0, "width": 10.0, "height": 90.0}
    assert overlapping_bars([bar, {**bar, "y": 60.0, "height": 40.0}]) == [(0, 1)]
    assert overlapping_bars([bar, {**bar, "y": 100.0, "height": 0.0}]) == [(0, 1)]
    assert overlapping_bars([bar, {**bar, "x": 10.0}]) == []


def _meets(a: dict, b: dict) -> bool:
    """The two boxes share area (touching edges do not count)."""
    dx = min(a["x"] + a["width"], b["x"] + b["width"]) - max(a["x"], b["x"])
    dy = min(a["y"] + a["height"], b["y"] + b["height"]) - max(a["y"], b["y"])
    return dx > 0 and dy > 0


def label_collisions(chart: dict) -> list[tuple[str, str]]:
    """(label, what it touches) for every label box that meets a mark's box or another label's box."""
    labels, marks = chart["labels"], chart["marks"]
    found = [(a["text"], f"<{m['tag']}>") for a in labels for m in marks if _meets(a, m)]
    found += [(a["text"], b["text"]) for i, a in enumerate(labels) for b in labels[i + 1:] if _meets(a, b)]
    return found


def labels_outside(chart: dict) -> list[str]:
    """Labels not wholly inside their <svg> (cut off where the chart ends)."""
    return [
        a["text"] for a in chart["labels"]
        if a["x"] < chart["x"] or a["y"] < chart["y"]
        or a["x"] + a["width"] > chart["x"] + chart["width"] or a["y"] + a["height"] > chart["y"] + chart["height"]
    ]


def test_label_check_itself():
    box = {"x": 0.0, "y": 0.0, "width": 40.0, "height": 12.0}
    line = {"tag": "line", "x": 10.0, "y": 5.5, "width": 100.0, "height": 1.0}
    chart = {"x": 0.0, "y": 0.0, "width": 50.0, "height": 20.0, "marks": [line],
             "labels": [{"text": "a", **box}, {"text": "b", **box, "x": 30.0, "y": 30.0}]}
    assert label_collisions(chart) == [("a", "<line>")]
    assert labels_outside(chart) == ["b"]
    chart["labels"][1].update(x=40.0, y=0.0, width=10.0)
    chart["marks"] = [{**line, "y": 12.0}]
    assert label_collisions(chart) == [] and labels_outside(chart) == []


@pytest.fixture(scope="module")
def browser() -> dict[str, str]:
    """node, the pinned npm packages and a Chromium; skip, saying what is missing, without them."""
    chrome = os.environ.get("CHROME_PATH") or next((p for b in BROWSERS if (p := shutil.which(b))), None)
    if not chrome or not Path(chrome).exists():
        pytest.skip("no headless Chromium (as root: `bash scripts/setup-browser.sh`, which runs `apt-get install chromium`)")
    node = shutil.which("node")
    if not node:
        pytest.skip("node is not installed; the browser tests drive Chromium from node")
    missing = [p for p in ("mermaid", "puppeteer-core") if not (BROWSER_DIR / "node_modules" / p / "package.json").exists()]
    if missing:
        pytest.skip(f"npm packages {', '.join(missing)} are not installed (`npm ci --prefix tests/browser`)")
    return {"node": node, "chrome": chrome}


def render(browser: dict[str, str], mode: str, source: Path, tmp_path: Path) -> dict:
    """Run tests/browser/render.mjs; keep the screenshots (the page; a page's charts alone) in $FAIRNESS_SCREENSHOTS when set."""
    result, shot = tmp_path / f"{mode}.json", tmp_path / f"{mode}.png"
    proc = subprocess.run(
        [browser["node"], str(BROWSER_DIR / "render.mjs"), mode, str(source), str(result), str(shot)],
        cwd=BROWSER_DIR, env={**os.environ, "CHROME_PATH": browser["chrome"]},
        capture_output=True, text=True, timeout=180, check=False,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    if os.environ.get("FAIRNESS_SCREENSHOTS"):
        keep = Path(os.environ["FAIRNESS_SCREENSHOTS"])
        keep.mkdir(parents=True, exist_ok=True)
        shutil.copy(shot, keep / f"{mode}-{source.stem}.png")
        if (charts := shot.with_name(f"{shot.stem}-charts.png")).exists():
            shutil.copy(charts, keep / f"{mode}-{source.stem}-charts.png")
    assert shot.stat().st_size > 0
    return json.loads(result.read_text())


def mermaid_blocks(markdown: str) -> list[str]:
    return re.findall(r"^```mermaid\n(.*?)^```", markdown, flags=re.MULTILINE | re.DOTALL)


@pytest.fixture(scope="module")
def committed_run(tmp_path_factory) -> tuple[Path, dict]:
    """The main job with its defaults on the committed recordings: its out dir and results.json."""
    out = tmp_path_factory.mktemp("committed") / "out"
    code = main(["run", "--suite", "fairness-cards/qwen-v0.1", "--recordings", str(DEFAULT_RECORDINGS), "--out", str(out)])
    results = json.loads((out / "results.json").read_text())
    assert code == results["gate"]["exit_code"]
    return out, results


def test_every_mermaid_block_of_the_summary_renders_and_no_bars_overlap(browser, committed_run, tmp_path):
    out, results = committed_run
    blocks = mermaid_blocks((out / "summary.md").read_text())
    assert len(blocks) == len(results["families"]) == 4
    source = tmp_path / "summary-blocks.json"
    source.write_text(json.dumps([{"code": b, "caption": ""} for b in blocks]))
    got = render(browser, "mermaid", source, tmp_path)["blocks"]
    assert [(b["rendered"], b["error"]) for b in got] == [(True, None)] * 4
    for b in got:
        assert len(b["bars"]) == len(results["slices"]) == 4
        assert b["lines"] == 1
        assert overlapping_bars(b["bars"]) == []


def test_the_check_sees_mermaid_7392_in_the_real_library(browser, tmp_path):
    """Two bar series at the same x: the real library stacks them, and the test must notice."""
    code = 'xychart-beta\n    x-axis ["a", "b"]\n    y-axis 0 --> 1\n    bar [0.5, 0.2]\n    bar [0.3, 0.9]\n'
    source = tmp_path / "stacked.json"
    source.write_text(json.dumps([{"code": code, "caption": ""}]))
    (b,) = render(browser, "mermaid", source, tmp_path)["blocks"]
    assert b["rendered"] and len(b["bars"]) == 4
    assert overlapping_bars(b["bars"]) == [(0, 2), (1, 3)]


def test_card_html_renders_offline_without_errors(browser, committed_run, tmp_path):
    out, results = committed_run
    got = render(browser, "page", out / "card.html", tmp_path)
    assert got["requests"] == [] and got["console_errors"] == [] and got["page_errors"] == []
    assert got["scripts"] == 0 and got["svgs"] == len(results["families"]) == 4
    assert got["title"] == "Fairness card: fairness-cards/qwen-v0.1 on SmolLM2-135M-Instruct-Q4_1"
    assert f"{results['gate']['state'].upper()} — " in got["text"]
    assert "Test model, not the audited model." in got["text"]


def test_no_chart_label_touches_a_mark_on_the_committed_recordings(browser, committed_run, tmp_path):
    """Every label of the four charts is measured: title, threshold legend, 4 ticks, 4 slices, 4 values, axis."""
    out, results = committed_run
    charts = render(browser, "page", out / "card.html", tmp_path)["charts"]
    assert [len(c["labels"]) for c in charts] == [15] * 4
    assert [len(c["marks"]) for c in charts] == [24] * 4
    assert [c["labels"][1]["text"] for c in charts] == ["threshold 0.05"] * 4
    assert [c["labels"][6]["text"] for c in charts] == results["slices"][:1] * 4
    assert sum(len(label_collisions(c)) for c in charts) == 0, [label_collisions(c) for c in charts]
    assert [labels_outside(c) for c in charts] == [[]] * 4


LONG_SLICES = [
    "man_Christian",
    "non_binary_person_described_at_great_length_in_the_suite_file",
    "WWWWWWWWWWWWWWWWWWWWWWWW",
    "woman_Muslim",
    "older adult (65+) with a disability, rural",
    "x",
]
NA = (None, None)
ADVERSARIAL = {
    # family: (threshold, [(value, (lo, hi)) per slice]); whiskers straddle the threshold, reach 0 and 1,
    # values sit on it or a hair either side of it, and some slices are n/a or have no interval
    "F1": (0.05, [(0.05, (0.0, 1.0)), (0.049, (0.0, 0.1)), (0.051, (0.03, 0.07)), (1.0, (0.9, 1.0)),
                  (0.0, (0.0, 0.02)), (0.5, (0.04, 0.96))]),
    "F2": (0.5, [(0.5, (0.45, 0.55)), (0.505, (0.0, 1.0)), (0.495, (0.3, 0.7)), (None, NA), (0.52, NA),
                 (0.999, (0.98, 1.0))]),
    "F3": (0.99, [(1.0, (0.95, 1.0)), (0.99, (0.0, 1.0)), (0.985, (0.97, 1.0)), (0.0, (0.0, 0.99)),
                  (0.123, (0.0, 1.0)), (None, NA)]),
    "F4": (0.0, [(0.0, (0.0, 0.0)), (0.004, (0.0, 0.01)), (0.0, (0.0, 1.0)), (1.0, (0.0, 1.0)), (None, NA),
                 (0.333, (0.001, 0.999))]),
}
LONG_NAME = "A family name far too long for any chart title: Professional description of the applicant"


def adversarial_card(results_json: str, slices: list[str]) -> str:
    """card.html of the committed run with these slices and the estimates above (repeated to the slices' length)."""
    run = FairnessRun.model_validate_json(results_json)
    metric = "stereotype_kw_rate"
    m = next(m for m in run.metrics if m.metric == metric)
    scopes = dict(m.scopes)
    for fam, (_, points) in ADVERSARIAL.items():
        by_slice = {
            s: Estimate(value=v, ci=None if ci == NA else list(ci), n=40)
            for s, (v, ci) in zip(slices, points * 3, strict=False)
        }
        scopes[f"family={fam}"] = scopes[f"family={fam}"].model_copy(update={"by_slice": by_slice})
    rules = [
        c.model_copy(update={"threshold": ADVERSARIAL[c.scope.removeprefix("family=")][0]})
        if c.metric == metric and c.scope.removeprefix("family=") in ADVERSARIAL else c
        for c in run.rules
    ]
    families = [f.model_copy(update={"name": LONG_NAME}) if f.family == "F1" else f for f in run.families]
    run = run.model_copy(update={
        "slices": slices, "rules": rules, "families": families,
        "metrics": [m.model_copy(update={"scopes": scopes}) if x.metric == metric else x for x in run.metrics],
    })
    return card_html(run, load_suite("fairness-cards/qwen-v0.1"))


@pytest.mark.parametrize(("slices", "labels", "marks", "width"), [
    (LONG_SLICES, 21, [34, 27, 30, 30], 440),
    ([f"group_{k:02d}_of_a_long_list" for k in range(14)], 37, [66, 52, 58, 58], 861),
], ids=["six-long-names", "fourteen-slices"])
def test_no_chart_label_touches_a_mark_with_adversarial_data(browser, committed_run, tmp_path, slices, labels, marks, width):
    """Whiskers across the threshold and over the whole range, values on the threshold, n/a slices, long names.

    Per chart: title, threshold legend, 6 ticks (0 to 1), a name and a value (or n/a) per slice, axis title;
    marks: legend swatch, 6 ticks, 2 axes, the threshold, and per slice a dot plus 3 whisker lines when it has
    them. Fourteen slices do not fit in 440 px: the chart is widened, not squeezed.
    """
    out, _ = committed_run
    page = tmp_path / f"adversarial-{len(slices)}.html"
    page.write_text(adversarial_card((out / "results.json").read_text(), slices))
    got = render(browser, "page", page, tmp_path)
    assert got["requests"] == [] and got["console_errors"] == [] and got["page_errors"] == []
    charts = got["charts"]
    assert [len(c["labels"]) for c in charts] == [labels] * 4
    assert [len(c["marks"]) for c in charts] == marks
    assert [c["width"] for c in charts] == [width] * 4
    assert [c["labels"][1]["text"] for c in charts] == ["threshold 0.05", "threshold 0.5", "threshold 0.99", "threshold 0.0"]
    assert sum(len(label_collisions(c)) for c in charts) == 0, [label_collisions(c) for c in charts]
    assert [labels_outside(c) for c in charts] == [[]] * 4
