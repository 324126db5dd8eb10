"""What a reader sees: the summary's Mermaid charts and card.html, rendered in headless Chromium.

The charts are drawn by the real mermaid library (pinned in tests/browser/package-lock.json)
and measured in the browser: every block must render, and no two bars may overlap, which
is how mermaid-js/mermaid#7392 (bar series drawn on top of each other) hid three of our
four families. card.html must open with no request and no console error.
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

from fairness.cli import main

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
    """Run tests/browser/render.mjs; keep the screenshot in $FAIRNESS_SCREENSHOTS when set."""
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
