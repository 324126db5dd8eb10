"""card.html: the run as one self-contained page — verdict, per-family table, a chart per family.

Inline CSS and inline SVG only, and a Content-Security-Policy that forbids every fetch, so
the page opens from an artifact or an e-mail attachment and makes no request. Unlike the
Markdown charts, each slice is drawn with its 95% interval against the threshold. Every
string from the suite or the recordings is escaped.
"""

from __future__ import annotations

import math
import re

from fairness.audit._audit import FairnessRun
from fairness.report._charts import FamilySeries, deciding_metric, family_series
from fairness.report._render import (
    ICONS,
    _ci,
    _fmt,
    agreement_md,
    caveat_lines,
    comparison_md,
    definition_text,
    family_columns,
    family_value,
    intervals_note,
    rubric_source,
    rules_as_checked,
    settle_md,
    verdict_line,
    worst_slice_interval,
)
from fairness.suite._suite import Suite

CSP = "default-src 'none'; style-src 'unsafe-inline'; img-src data:"

_CSS = """
body{font:15px/1.45 system-ui,-apple-system,"Segoe UI",sans-serif;margin:2rem auto;max-width:60rem;padding:0 1rem;color:#1b1f24}
h1{font-size:1.5rem}h2{font-size:1.2rem;margin-top:2rem}
.verdict{padding:.8rem 1rem;border-radius:6px;border-left:6px solid #888;background:#f4f4f4}
.verdict.state-pass{border-color:#2e7d32}.verdict.state-fail{border-color:#c62828}
.verdict.state-illustrative,.verdict.state-inconclusive{border-color:#ef8f00}
td.state-pass{color:#2e7d32}td.state-fail{color:#c62828;font-weight:600}td.state-illustrative,td.state-inconclusive{color:#a65f00}
.warn{background:#fff4e5;padding:.6rem 1rem;border-radius:6px}
table{border-collapse:collapse;margin:.5rem 0}th,td{border:1px solid #d0d7de;padding:.3rem .6rem;text-align:left}
th{background:#f6f8fa}td.num{text-align:right;font-variant-numeric:tabular-nums}
.charts{display:flex;flex-wrap:wrap;gap:1rem}figure{margin:0}figcaption{font-size:.85rem;color:#555;max-width:440px}
svg text{font:11px system-ui,sans-serif;fill:#333}
"""

W, H = 440, 270
LEFT, RIGHT, TOP, BOTTOM = 58, 16, 48, 54
"""The chart's box and margins: title and threshold legend above the plot, slice names and axis title below."""
_PLOT_W = W - LEFT - RIGHT
_MIN_SLOT = 56
"""Narrowest slice slot (px): a chart with more slices than fit in W is widened instead."""
_VALUE_DX = 9
"""A value label starts this far right of its point, clear of the whisker's 6 px caps."""
_HALF = 8
"""Half the height of an 11 px label's box, with a margin (px)."""
_PAD = 4


def escape(s: str, quote: bool = True) -> str:
    """`html.escape`, the same replacements in the same order: `import html` loads `html.entities`
    (~2,200 named references, for `unescape`), ~7 M instructions of every run for five replaces."""
    s = s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    if quote:
        s = s.replace('"', "&quot;").replace("'", "&#x27;")
    return s


def _inline_md(text: str) -> str:
    """Escape a line of the summary's Markdown; **bold** and `code` become <strong> and <code>."""
    text = re.sub(r"\*\*(.+?)\*\*", r"<strong>\1</strong>", escape(text))
    return re.sub(r"`([^`]+)`", r"<code>\1</code>", text)


def _markdown_blocks(text: str) -> list[str]:
    """The few Markdown shapes the shared sections use — `###` headings, pipe tables, paragraphs
    (`_…_` italics included) — as HTML, every cell escaped."""
    out: list[str] = []
    table: list[list[str]] = []

    def flush() -> None:
        if table:
            head, *body = table
            out.append("<table><thead><tr>" + "".join(f"<th>{_inline_md(c)}</th>" for c in head) + "</tr></thead><tbody>"
                       + "".join("<tr>" + "".join(f"<td>{_inline_md(c)}</td>" for c in row) + "</tr>" for row in body)
                       + "</tbody></table>")
            table.clear()

    for line in text.splitlines():
        if line.startswith("|"):
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            if not all(set(c) <= set("-: ") for c in cells):
                table.append(cells)
            continue
        flush()
        if line.startswith("### "):
            out.append(f"<h2>{_inline_md(line[4:])}</h2>")
        elif line.strip():
            body = line.strip()
            italic = body.startswith("_") and body.endswith("_") and len(body) > 1
            out.append(f"<p>{'<em>' if italic else ''}{_inline_md(body.strip('_') if italic else body)}{'</em>' if italic else ''}</p>")
    flush()
    return out


def _verdict(run: FairnessRun) -> str:
    """The summary's verdict line without its emoji (the page colours the state instead)."""
    text = verdict_line(run)
    for icon in ICONS.values():
        text = text.removeprefix(icon + " ")
    return _inline_md(text)


def _axis(top: float) -> tuple[float, list[float]]:
    """A round axis maximum at or above `top` and its ticks (steps of 1, 2, 2.5 or 5 × 10^k)."""
    raw = top / 5
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw)
    n = math.ceil(top / step - 1e-9)
    return n * step, [round(i * step, 10) for i in range(n + 1)]


_ASCII_EM = tuple(w / 1000 for w in (
    318, 401, 460, 838, 636, 950, 780, 275, 390, 390, 500, 838, 318, 361, 318, 337, 636, 636, 636, 636, 636, 636, 636, 636,
    636, 636, 337, 337, 838, 838, 838, 531, 1000, 684, 686, 698, 770, 632, 575, 775, 752, 295, 295, 656, 557, 863, 748, 787,
    603, 787, 695, 635, 611, 732, 684, 989, 685, 611, 685, 390, 337, 390, 838, 500, 500, 613, 635, 550, 635, 615, 352, 635,
    634, 278, 278, 579, 278, 974, 634, 612, 635, 635, 411, 521, 392, 634, 592, 818, 592, 592, 525, 636, 337, 636, 838,
))
"""Advance widths (em) of ASCII 32–126 in DejaVu Sans, the fallback of `system-ui` on Linux and wider than the
usual system fonts of Windows and macOS; any other character counts 1.1 em."""


def _text_width(text: str, px: float = 11, bold: bool = False) -> float:
    """A generous estimate of `text`'s width in px: DejaVu Sans's widths plus 6% (12% more in bold).

    Used only to keep labels apart, so it errs wide: a label is given room or cut before it can touch.
    """
    em = sum(_ASCII_EM[ord(c) - 32] if " " <= c <= "~" else 1.1 for c in text)
    return em * px * (1.06 + 0.12 * bold)


def _fit(text: str, width: float, px: float = 11, bold: bool = False) -> str:
    """`text`, cut with an ellipsis to fit `width`."""
    if _text_width(text, px, bold) <= width:
        return text
    while text and _text_width(text + "…", px, bold) > width:
        text = text[:-1]
    return text + "…"


def _wrap(text: str, width: float) -> list[str]:
    """A slice name on at most two lines of `width`, broken after `_`, `-`, `/` or a space where it can be."""
    if _text_width(text) <= width:
        return [text]
    cut = next((k for k in range(len(text), 1, -1) if _text_width(text[:k]) <= width), 1)
    cut = max((i + 1 for i, c in enumerate(text[:cut]) if c in "_-/ "), default=cut)
    return [text[:cut].rstrip(), _fit(text[cut:].lstrip(), width)]


def _svg(s: FamilySeries, metric: str, top: float, ticks: list[float]) -> str:
    """Points with 95% interval whiskers per slice and the threshold as a dashed line.

    No text crosses a mark (issue 19), whatever the data: the threshold is named in a legend row above
    the plot, not on its line; a value label sits right of its whisker (the next slice's whisker is a
    slot away) and steps off the threshold line when it would cross it; slice names wrap onto two lines
    and are cut to their slot, in full in the tooltip; a chart with many slices is widened instead of
    squeezed. Grid lines (class `grid`) are background, not marks.
    """
    n = max(len(s.points), 1)
    values = [_fmt(e.value) for _, e in s.points]
    value_w = max([_text_width(v) for v in values] + [_text_width("n/a")])
    slot = max(_PLOT_W / n, _MIN_SLOT, value_w + _VALUE_DX + 10)
    pw = slot * n
    right = max(float(RIGHT), _VALUE_DX + value_w + 4 - slot / 2)
    width = math.ceil(LEFT + pw + right)
    ph = H - TOP - BOTTOM
    base = TOP + ph

    def y(v: float) -> float:
        return TOP + ph * (1 - min(max(v, 0.0), top) / top)

    ty = y(s.threshold) if s.threshold is not None else None

    def lane(want: float, above: bool) -> float:
        """The centre of an in-plot label near `want`: inside the plot, and clear of the threshold line."""
        lo, hi = TOP + _HALF, base - _HALF - 1
        yc = min(max(want, lo), hi)
        if ty is None or abs(yc - ty) >= _HALF + 1.5:
            return yc
        sides = (ty - _HALF - 1.5, ty + _HALF + 1.5)
        return next(c for c in (sides if above else sides[::-1]) if lo <= c <= hi)

    title = f"{s.family} ({s.name}): {s.state}"
    room = width - 2 * _PAD - _text_width(f"{s.family} (): {s.state}", 13, bold=True)
    shown = f"{s.family} ({_fit(s.name, room, 13, bold=True)}): {s.state}"
    out = [
        f'<svg width="{width}" height="{H}" viewBox="0 0 {width} {H}" role="img" '
        f'aria-label="{escape(title)}">',
        f"<title>{escape(title)} — {escape(metric)} per slice, 95% intervals</title>",
        f'<text x="{_PAD}" y="18" style="font-size:13px;font-weight:600">{escape(shown)}</text>',
    ]
    if s.threshold is not None:
        out.append(f'<line class="legend" x1="{LEFT}" x2="{LEFT + 22}" y1="32" y2="32" stroke="#c62828" stroke-dasharray="6 4"/>')
        out.append(f'<text x="{LEFT + 28}" y="36" style="fill:#c62828">threshold {_fmt(s.threshold)}</text>')
    for t in ticks:
        out.append(f'<line class="grid" x1="{LEFT}" x2="{LEFT + pw:.1f}" y1="{y(t):.1f}" y2="{y(t):.1f}" stroke="#eee"/>')
        out.append(f'<line x1="{LEFT - 4}" x2="{LEFT}" y1="{y(t):.1f}" y2="{y(t):.1f}" stroke="#333"/>')
        out.append(f'<text x="{LEFT - 7}" y="{y(t) + 4:.1f}" text-anchor="end">{_fmt(t)}</text>')
    out.append(f'<line x1="{LEFT}" x2="{LEFT}" y1="{TOP}" y2="{base}" stroke="#333"/>')
    out.append(f'<line x1="{LEFT}" x2="{LEFT + pw:.1f}" y1="{base}" y2="{base}" stroke="#333"/>')
    if ty is not None:
        out.append(f'<line x1="{LEFT}" x2="{LEFT + pw:.1f}" y1="{ty:.1f}" y2="{ty:.1f}" stroke="#c62828" stroke-dasharray="6 4"/>')
    for i, ((label, e), value) in enumerate(zip(s.points, values, strict=True)):
        cx = LEFT + slot * (i + 0.5)
        lines = _wrap(label, slot - 4)
        spans = "".join(f'<tspan x="{cx:.1f}" y="{base + 15 + 13 * k}">{escape(t)}</tspan>' for k, t in enumerate(lines))
        out.append(f'<text text-anchor="middle">{spans}<title>{escape(label)}</title></text>')
        if e.value is None:
            out.append(f'<text x="{cx:.1f}" y="{lane(TOP + ph / 2, True) + 4:.1f}" text-anchor="middle">n/a</text>')
            continue
        lo, hi = e.ci[:2] if e.ci and len(e.ci) >= 2 else (None, None)
        if lo is not None and hi is not None:
            out.append(f'<line x1="{cx:.1f}" x2="{cx:.1f}" y1="{y(lo):.1f}" y2="{y(hi):.1f}" stroke="#4e79a7" stroke-width="2"/>')
            out.extend(
                f'<line x1="{cx - 6:.1f}" x2="{cx + 6:.1f}" y1="{y(v):.1f}" y2="{y(v):.1f}" stroke="#4e79a7" stroke-width="2"/>'
                for v in (lo, hi)
            )
        out.append(f'<circle cx="{cx:.1f}" cy="{y(e.value):.1f}" r="4.5" fill="#1f3b5c"/>')
        above = s.threshold is None or e.value >= s.threshold
        out.append(f'<text x="{cx + _VALUE_DX:.1f}" y="{lane(y(e.value), above) + 4:.1f}">{value}</text>')
    out.append(f'<text x="{LEFT + pw / 2:.1f}" y="{H - 6}" text-anchor="middle">slice</text>')
    out.append("</svg>")
    return "\n".join(out)


_HEADERS = {"worst_slice_stereotype": "worst-slice stereotype [95% CI]", "worst_slice_pilot_harm": "worst-slice pilot harm [95% CI]",
            "refusal_delta": "refusal delta"}


def _family_table(run: FairnessRun) -> str:
    columns = family_columns(run)

    def cell(metric: str, statistic: str, fam: str) -> str:
        m = next((x for x in run.metrics if x.metric == metric), None)
        ci = _ci(worst_slice_interval(run, m, f"family={fam}")) if m is not None and statistic == "worst_slice" else ""
        return f'<td class="num">{_fmt(family_value(run, metric, statistic, fam))}{escape(ci)}</td>'

    head = "".join(f"<th>{escape(_HEADERS.get(c, f'worst-slice {metric} [95% CI]'))}</th>" for c, metric, _ in columns)
    rows = [f"<table><thead><tr><th>family</th><th>name</th>{head}<th>decision</th><th>gate</th></tr></thead><tbody>"]
    rows.extend(
        f"<tr><td>{escape(f.family)}</td><td>{escape(f.name)}</td>"
        + "".join(cell(metric, statistic, f.family) for _, metric, statistic in columns)
        + f'<td>{escape(f.decision)}</td><td class="state-{escape(f.state)}">{escape(f.state)}</td></tr>'
        for f in run.families
    )
    rows.append("</tbody></table>")
    return "\n".join(rows)


def card_html(run: FairnessRun, suite: Suite, replay_command: str | None = None) -> str:
    """The whole page; a pure function of the run, its suite and the command that replays it."""
    from fairness.report._card_text import card_text

    r = run.recordings
    text = card_text(suite)
    metric = deciding_metric(run)
    series = family_series(run, metric)
    bounds = [v for s in series for _, e in s.points for v in [e.value, *(e.ci or [])] if v is not None]
    top, ticks = _axis(max(bounds + [s.threshold for s in series if s.threshold is not None] + [0.01]))
    name = f"{run.suite.name} on {r.model_id}"
    parts = [
        "<!doctype html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f'<meta http-equiv="Content-Security-Policy" content="{CSP}">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>Fairness card: {escape(name)}</title>",
        f"<style>{_CSS}</style></head><body>",
        f"<h1>Fairness card: <code>{escape(run.suite.name)}</code> on <code>{escape(r.model_id)}</code></h1>",
        f'<p class="verdict state-{escape(run.gate.state)}">{_verdict(run)}</p>',
    ]
    if run.gate.reasons:
        parts += ["<details><summary>Why</summary><ul>", *(f"<li>{_inline_md(x)}</li>" for x in run.gate.reasons[:40]),
                  "</ul></details>"]
    if not r.is_audited_model:
        parts.append(f'<p class="warn"><strong>Test model, not the audited model.</strong> {escape(r.model_note or "")}</p>')
    if run.stability:
        parts += ["<ul>", *(f"<li>{escape(s.summary)}</li>" for s in run.stability), "</ul>"]
    parts += _markdown_blocks(comparison_md(run, icons=False))
    parts += ["<h2>Per-family results</h2>", _family_table(run),
              f"<p>{_inline_md(intervals_note(run))}</p>"]
    settle = settle_md(run)
    if settle:
        parts += ["<h2>How many more seeds would settle it</h2>", *_markdown_blocks(settle)]
    rules = [f"<li>{escape(rule.describe())}</li>" for rule in rules_as_checked(run, suite)]
    if rules:
        parts += ["<h2>Decision rules</h2>", "<ul>", *rules, "</ul>"]
    if run.rubric is not None:
        parts += [f"<h2>Metrics</h2><p>Rubric {escape(run.rubric.version)} ({escape(rubric_source(run))}), "
                  f"mode {escape(run.rubric.mode)}.</p>", "<ul>",
                  *(f"<li><code>{escape(d.name)}</code> ({escape(d.unit)}): {escape(definition_text(d))}</li>"
                    for d in run.rubric.metrics), "</ul>"]
    parts.append(f"<h2><code>{escape(metric)}</code> per slice, by family</h2>")
    if series:
        parts.append('<div class="charts">')
        for s in series:
            parts.append(f"<figure>{_svg(s, metric, top, ticks)}<figcaption>Dot: the slice's point estimate of "
                         f"{escape(metric)} in {escape(s.family)}; whiskers: the slice's own 95% interval (results.json "
                         "<code>by_slice</code>; pointwise, so narrower than the table's simultaneous worst-slice interval)"
                         + (f"; dashed line: the threshold {_fmt(s.threshold)}" if s.threshold is not None else "")
                         + ". Same y scale in every chart; n/a: too few rows.</figcaption></figure>")
        parts.append("</div>")
    else:
        parts.append(f"<p>No family has a value of <code>{escape(metric)}</code>.</p>")
    if run.evaluators:
        from fairness.evaluators._adapter import evaluators_md

        parts += ["<h2>Peer-parity evaluators</h2>",
                  *_markdown_blocks(evaluators_md(run.evaluators).removeprefix("### Peer-parity evaluators\n\n"))]
    if run.agreement:
        parts += ["<h2>Agreement of scorers</h2>", *_markdown_blocks(agreement_md(run.agreement))]
    caveats = caveat_lines(run)
    if caveats:
        parts += ["<h2>Caveats</h2>", "<ul>", *(f"<li>{_inline_md(c)}</li>" for c in caveats), "</ul>"]
    out_of_scope = list(text.out_of_scope or []) + (
        ["Any claim about the audited model: these recordings come from a stand-in test model."] if not r.is_audited_model else [])
    parts += ["<h2>Intended use</h2>", f"<p>{escape(text.model_description or '')}</p>", "<p><strong>In scope:</strong></p><ul>",
              *(f"<li>{escape(x)}</li>" for x in text.intended_use or []), "</ul><p><strong>Out of scope:</strong></p><ul>",
              *(f"<li>{escape(x)}</li>" for x in out_of_scope), "</ul>",
              f"<p><strong>Contact:</strong> {escape(text.contact or '')}</p>"]
    parts += [
        "<h2>Provenance</h2><table><tbody>",
        f"<tr><th>suite</th><td>{escape(run.suite.name)} v{escape(str(run.suite.version))} "
        f"(hash {escape(run.suite.hash[:12])})</td></tr>",
        f"<tr><th>recordings</th><td>{escape(str(r.path))}: {r.rows} rows, manifest sha256 "
        f"{escape(r.manifest_sha256[:12])}</td></tr>",
        f"<tr><th>model</th><td>{escape(r.model_id)} via {escape(str(r.engine))}</td></tr>",
        f"<tr><th>scorer</th><td>lexical rubric {escape(run.scorer.rubric_version)}, mode {escape(run.scorer.mode)}</td></tr>",
        f"<tr><th>tool</th><td>{escape(run.tool.name)} {escape(run.tool.version)}</td></tr>",
        *([f"<tr><th>replay</th><td><code>{escape(replay_command)}</code></td></tr>"] if replay_command else []),
        "</tbody></table>",
        "</body></html>",
    ]
    return "\n".join(parts) + "\n"
