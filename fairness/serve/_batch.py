"""A monitor batch upload (`kind=monitor`) as `MonitorOptions`, checked by the monitor's own `prepare` before it is queued.

The archive holds log files of one format and the mapping YAML (and perhaps a suite file); every
other file is refused, so what is audited is exactly what was sent. The engine is DuckDB (embedded;
Spark is not offered over REST), no log text is ever written (`examples` is not offered), and the
reference is `previous` or `window:LABEL`: the server never reads a results.json by a client's name.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from fairness.monitor._duckdb import require_duckdb
from fairness.monitor._inputs import file_format
from fairness.monitor._job import check_options, prepare
from fairness.monitor._options import MonitorOptions
from fairness.serve._archive import Unpacked, archive_file, shown
from fairness.serve._errors import Refused

MAPPING = "mapping.yaml"
"""The mapping file's default name, at the archive's top."""
if TYPE_CHECKING:
    from fairness.serve._intake import AuditQuery

LOG_KINDS = ".jsonl[.gz], .ndjson[.gz], .json[.gz], .parquet or .csv[.gz]"


def _mapping(unpacked: Unpacked, name: str | None) -> Path:
    if name is not None:
        return archive_file(unpacked, name, "mapping")
    if MAPPING not in unpacked.files:
        raise Refused(422, f"the archive has no {MAPPING} at its top level: add the mapping there, or name the mapping "
                           "file inside the archive with `mapping`")
    return unpacked.root / MAPPING


def _logs(unpacked: Unpacked, others: set[Path]) -> list[str]:
    """Every file of the archive but the mapping and suite files, each a log file by its name."""
    logs = []
    for name in sorted(unpacked.files):
        path = unpacked.root / name
        if path in others:
            continue
        if file_format(path) is None:
            raise Refused(422, f"entry `{shown(name)}` is not a log file ({LOG_KINDS}), the mapping or the suite file")
        logs.append(str(path))
    if not logs:
        raise Refused(422, f"the archive holds no log file ({LOG_KINDS})")
    return logs


def batch_options(query: AuditQuery, unpacked: Unpacked, suite: str, out: Path) -> MonitorOptions:
    """The monitor run of a batch (a `Refused`, or a `FairnessError` line, on any problem)."""
    require_duckdb()  # a server without the `monitor` extra refuses a batch now, not as a failed job later
    reference = query.reference or "previous"
    if reference != "previous" and not reference.startswith("window:"):
        raise Refused(422, f"reference `{shown(reference)}`: give `previous` or `window:LABEL` (a grid audit's "
                           "results.json is not offered over REST)")
    mapping = _mapping(unpacked, query.mapping)
    given = {k: getattr(query, k) for k in ("sample", "window", "fail_on", "gate_on") if getattr(query, k) is not None}
    options = check_options({"logs": _logs(unpacked, {mapping, Path(suite)}), "mapping": str(mapping), "out": str(out),
                             "suite": suite, "reference": reference, "engine": "duckdb", "examples": 0, **given})
    prepare(options)
    return options
