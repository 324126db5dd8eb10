#!/usr/bin/env python3
"""Rewrite the README's inputs/outputs tables from action.yml, so the two never disagree.

    python scripts/action_table.py           # rewrite the block between the markers in README.md
    python scripts/action_table.py --check   # exit 1 (and say so) when README.md is out of date

The block sits between `<!-- inputs:start -->` and `<!-- inputs:end -->`; nothing else in
README.md is touched. tests/test_release.py runs `--check`.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
START, END = "<!-- inputs:start -->", "<!-- inputs:end -->"


def _cell(text: object) -> str:
    """One Markdown table cell: a single line, pipes escaped."""
    return " ".join(str(text).split()).replace("|", "\\|")


def _default(spec: dict) -> str:
    value = spec.get("default")
    if value is None or value == "":
        return "_(empty)_"
    return f"`{_cell(value)}`"


def tables(action: dict) -> str:
    lines = [
        "Generated from `action.yml` by `python scripts/action_table.py`; do not edit by hand.",
        "",
        "| input | required | default | description |",
        "|---|---|---|---|",
    ]
    for name, raw in (action.get("inputs") or {}).items():
        spec = raw or {}
        required = "yes" if spec.get("required") else "no"
        lines.append(f"| `{name}` | {required} | {_default(spec)} | {_cell(spec.get('description', ''))} |")
    lines += ["", "| output | description |", "|---|---|"]
    for name, spec in (action.get("outputs") or {}).items():
        lines.append(f"| `{name}` | {_cell((spec or {}).get('description', ''))} |")
    return "\n".join(lines)


def rewrite(readme: str, block: str) -> str:
    if readme.count(START) != 1 or readme.count(END) != 1 or readme.index(START) > readme.index(END):
        raise SystemExit(f"README.md must hold exactly one {START} … {END} block")
    head, rest = readme.split(START, 1)
    _, tail = rest.split(END, 1)
    return f"{head}{START}\n{block}\n{END}{tail}"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="report whether README.md is current; change nothing")
    ap.add_argument("--action", type=Path, default=REPO / "action.yml")
    ap.add_argument("--readme", type=Path, default=REPO / "README.md")
    args = ap.parse_args(argv)
    action = yaml.safe_load(args.action.read_text(encoding="utf-8"))
    current = args.readme.read_text(encoding="utf-8")
    wanted = rewrite(current, tables(action))
    if args.check:
        if wanted != current:
            print(f"{args.readme.name} is out of date with {args.action.name}: run python scripts/action_table.py", file=sys.stderr)
            return 1
        return 0
    if wanted != current:
        args.readme.write_text(wanted, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
