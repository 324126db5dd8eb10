"""Generated production logs with planted per-group rates, for the monitor's tests (written at test time).

Each record's output either contains a stereotype-list word (`submissive`) or not, drawn with
its slice's planted rate (seeded), so the exact per-window counts are known to the test; users
(units) belong to one slice and have heterogeneous numbers of records. Every text carries the
marker word `Quokkaline`, so a test can prove that no output holds log text.
"""

from __future__ import annotations

import csv
import datetime as dt
import gzip
import json
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np

MARKER = "Quokkaline"
FLAGGED = f"The {MARKER} answer: a submissive helper."
CLEAN = f"The {MARKER} answer: a thorough engineer with a clear plan."
PLANTED = {"man_Christian": 0.10, "man_Muslim": 0.20, "woman_Christian": 0.15, "woman_Muslim": 0.30}
DRIFT_DAY = 3
"""The day (0-based) whose woman_Muslim rate is planted at `DRIFTED`."""
DRIFTED = 0.60
DAYS = 4
START = dt.datetime(2026, 3, 2, tzinfo=dt.timezone.utc)  # a Monday


def day_label(day: int) -> str:
    return (START + dt.timedelta(days=day)).strftime("%Y-%m-%d")


def planted(slice_id: str, day: int) -> float:
    return DRIFTED if (day == DRIFT_DAY and slice_id == "woman_Muslim") else PLANTED[slice_id]


def make_records(seed: int = 7, users_per_slice: int = 40, mean_records: float = 8.0,
                 drift: bool = True) -> tuple[list[dict], Counter, Counter]:
    """Records (in a shuffled order) and the exact expected counts: records and flagged, per (window, slice)."""
    rng = np.random.default_rng(seed)
    records: list[dict] = []
    n, x = Counter(), Counter()
    k = 0
    for s_i, slice_id in enumerate(PLANTED):
        gender, religion = slice_id.split("_")
        for u in range(users_per_slice):
            user = f"u{s_i}-{u}"
            for day in range(DAYS):
                size = int(rng.geometric(1 / mean_records))  # heterogeneous: 1, 2, … (mean 8)
                p = planted(slice_id, day) if drift else PLANTED[slice_id]
                flags = rng.random(size) < p
                for flag in flags:
                    ts = START + dt.timedelta(days=day, seconds=int(rng.integers(0, 86_400)))
                    records.append({"request_id": f"req-{k:07d}", "ts": ts.strftime("%Y-%m-%dT%H:%M:%SZ"),
                                    "output": FLAGGED if flag else CLEAN, "gender": gender, "religion": religion,
                                    "user": user})
                    n[day_label(day), slice_id] += 1
                    x[day_label(day), slice_id] += int(flag)
                    k += 1
    order = rng.permutation(len(records))
    return [records[i] for i in order], n, x


def write_logs(directory: Path, records: list[dict], fmt: str, parts: int = 2) -> Path:
    """The records in `parts` files of one format: `jsonl`, `jsonl.gz`, `parquet` or `csv`."""
    directory.mkdir(parents=True, exist_ok=True)
    chunks = [records[i::parts] for i in range(parts)]
    for i, chunk in enumerate(chunks):
        path = directory / f"part-{i}.{fmt}"
        if fmt == "jsonl":
            path.write_text("".join(json.dumps(r) + "\n" for r in chunk), encoding="utf-8")
        elif fmt == "jsonl.gz":
            with gzip.open(path, "wt", encoding="utf-8") as fh:
                fh.writelines(json.dumps(r) + "\n" for r in chunk)
        elif fmt == "parquet":
            import pyarrow as pa
            import pyarrow.parquet as pq

            pq.write_table(pa.Table.from_pylist(chunk), path)
        elif fmt == "csv":
            with path.open("w", encoding="utf-8", newline="") as fh:
                w = csv.DictWriter(fh, fieldnames=list(chunk[0]))
                w.writeheader()
                w.writerows(chunk)
        else:
            raise ValueError(fmt)
    return directory


MAPPING = """\
text: output
groups: [gender, religion]
timestamp: ts
unit: user
id: request_id
"""


# -- issue 22: inputs whose values or names an engine could read differently --------------------------------

EDGE_MAPPING = """\
text: output
groups: [code, flag]
timestamp: ts
unit: user
id: request_id
"""
"""The mapping of `text_like_numbers`: two group fields, a unit and an id."""


def text_like_numbers(n: int = 240) -> list[dict]:
    """CSV rows whose ids, group values and units read like numbers or booleans: `007`, `1e3`, `TRUE`, an empty
    cell, users `7`, `07` and `007` (one user each: a CSV cell is its text)."""
    return [{"request_id": f"{i:03d}", "output": FLAGGED if i % 4 == 0 else CLEAN, "code": ("1e3", "2e3")[i % 2],
             "flag": ("TRUE", "FALSE", "")[i % 3], "user": ("7", "07", "007")[i % 3],
             "ts": f"2026-03-02T{i % 24:02d}:00:00Z"} for i in range(n)]


def edge_slice(row: dict) -> str:
    """The slice of a `text_like_numbers` row: the cells as written, an empty one `(missing)`."""
    return "_".join(row[g] or "(missing)" for g in ("code", "flag"))


NS_DAY = 1_772_409_600 * 10**9
"""2026-03-02T00:00:00Z (a Monday) in nanoseconds since the epoch."""


def nanosecond_records(tz: str | None) -> Any:
    """A Parquet table whose `ts` is `timestamp('ns', tz)`: 30 records a nanosecond before Monday 2026-03-02
    (Sunday, ISO week 9, where rounding to the microsecond would move them), 50 at 00:00 and 40 at noon
    (Monday, week 10). Group `g` is `a`/`b` alternately; ids `n0`…"""
    import pyarrow as pa

    stamps = [NS_DAY - 1] * 30 + [NS_DAY] * 50 + [NS_DAY + 12 * 3600 * 10**9] * 40
    return pa.table({
        "request_id": [f"n{i}" for i in range(len(stamps))],
        "output": [FLAGGED if i % 5 == 0 else CLEAN for i in range(len(stamps))],
        "g": [("a", "b")[i % 2] for i in range(len(stamps))],
        "ts": pa.array(stamps, pa.timestamp("ns", tz=tz)),
    })


GLOB_NAMES = {"logs[1].jsonl": 3, "logs1.jsonl": 5, "a*b.jsonl": 7, "ab.jsonl": 11, "b{1,2}.jsonl": 13, "q?.jsonl": 2,
              "qx.jsonl": 4}
"""Log files whose names hold glob characters, beside the files a glob of that name would match, and their sizes."""


def glob_named_logs(directory: Path) -> Path:
    """`GLOB_NAMES`' files in `directory`, each record's group its file's name (so a file read twice shows)."""
    directory.mkdir(parents=True, exist_ok=True)
    for name, size in GLOB_NAMES.items():
        rows = [{"request_id": f"{name}-{i}", "output": CLEAN, "g": name, "ts": "2026-03-02T10:00:00Z"}
                for i in range(size)]
        (directory / name).write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return directory
