"""Log inputs: files, globs and directories resolved to one sorted list of files of one format."""

from __future__ import annotations

import glob
from pathlib import Path

from fairness._util.errors import FairnessError
from fairness.monitor._engine import Format

SUFFIXES: dict[str, Format] = {
    ".jsonl": "jsonl", ".ndjson": "jsonl", ".json": "jsonl", ".jsonl.gz": "jsonl", ".ndjson.gz": "jsonl",
    ".json.gz": "jsonl", ".parquet": "parquet", ".csv": "csv", ".csv.gz": "csv",
}


def file_format(path: Path) -> Format | None:
    """The format a file's name says (`.jsonl[.gz]`, `.parquet`, `.csv[.gz]`), or None."""
    name = path.name.lower()
    for suffix in sorted(SUFFIXES, key=len, reverse=True):
        if name.endswith(suffix):
            return SUFFIXES[suffix]
    return None


def resolve_inputs(inputs: list[str]) -> tuple[tuple[str, ...], Format]:
    """Every log file named by `inputs` (files, globs, directories searched recursively), sorted, and their format.

    Nothing matched, a file of an unknown kind named directly, or formats mixed: exit 2."""
    files: set[Path] = set()
    for item in inputs:
        path = Path(item)
        if path.is_dir():
            found = [p for p in path.rglob("*") if p.is_file() and file_format(p) is not None]
            if not found:
                raise FairnessError(f"log directory `{item}` holds no .jsonl[.gz], .parquet or .csv[.gz] file")
            files.update(found)
        elif path.is_file():
            if file_format(path) is None:
                raise FairnessError(f"log file `{item}` is not .jsonl[.gz], .ndjson[.gz], .json[.gz], .parquet or .csv[.gz]")
            files.add(path)
        else:
            matched = [Path(p) for p in glob.glob(item, recursive=True)]
            matched = [p for p in matched if p.is_file() and file_format(p) is not None]
            if not matched:
                raise FairnessError(f"no log file matches `{item}`")
            files.update(matched)
    ordered = sorted(files, key=lambda p: str(p.absolute()))
    formats = {file_format(p) for p in ordered}
    if len(formats) > 1:
        raise FairnessError(f"the logs mix formats ({', '.join(sorted(str(f) for f in formats))}); monitor one format at a time")
    fmt = formats.pop()
    assert fmt is not None
    return tuple(str(p.absolute()) for p in ordered), fmt
