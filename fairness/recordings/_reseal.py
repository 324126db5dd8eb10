"""`recordings reseal`: rewrite a recording set's checksums after a deliberate edit, on the record.

Replay and `recordings verify` refuse a data file whose sha256 is not the manifest's. After a
deliberate edit (a corrected record, a re-scored output) `reseal` pins the files as they are now
and appends a `ManifestEvent` (who, when, why, and each changed sha256, old and new) to the
manifest's `history`. A set whose records no longer parse as records is refused.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from fairness._util.canonical import sha256_file
from fairness._util.errors import FairnessError
from fairness.recordings._store import (
    DataFile,
    FileChange,
    Manifest,
    ManifestEvent,
    iter_records,
    read_manifest,
    today,
    write_manifest,
)


def reseal(directory: Path, reason: str, by: str | None = None) -> tuple[Manifest, list[FileChange]]:
    """Reseal `directory`; returns the manifest written and the changed files (none: nothing written)."""
    if not reason.strip():
        raise FairnessError("`recordings reseal` needs a non-blank --reason (why the records were edited)")
    manifest = read_manifest(directory)
    files, changes, seen = [], [], set()
    for f in manifest.files:
        if Path(f.path).is_absolute() or ".." in Path(f.path).parts:
            raise FairnessError(f"manifest in `{directory}` names data file `{f.path}` outside the recording directory")
        path = directory / f.path
        rows = 0
        try:
            for rec in iter_records(path):
                if rec.key in seen:
                    raise FairnessError(f"`{path}` records row `{rec.row_id}` twice")
                seen.add(rec.key)
                rows += 1
        except FairnessError as exc:
            raise FairnessError(f"cannot reseal `{directory}`: {exc}") from None
        sha = sha256_file(path)
        if sha != f.sha256:
            changes.append(FileChange(path=f.path, old_sha256=f.sha256, new_sha256=sha))
        files.append(DataFile(path=f.path, sha256=sha, rows=rows))
    if not changes:
        return manifest, []
    at = today()
    event = ManifestEvent(action="reseal", by=by.strip() if by and by.strip() else who(), at=at, reason=reason.strip(),
                          changes=changes)
    total = sum(f.rows for f in files)
    resealed = manifest.model_copy(update={
        "files": files, "rows": total, "complete": total == manifest.expected_rows, "updated": at,
        "history": [*manifest.history, event],
    })
    write_manifest(directory, resealed)
    return resealed, changes


def who() -> str:
    """git's `user.name <user.email>`, else $USER, else `unknown`."""
    parts = [_git_config("user.name"), _git_config("user.email")]
    name, email = parts
    if name and email:
        return f"{name} <{email}>"
    return name or email or os.environ.get("USER") or os.environ.get("USERNAME") or "unknown"


def _git_config(key: str) -> str:
    try:
        out = subprocess.run(["git", "config", "--get", key], capture_output=True, text=True, timeout=10, check=False)
    except (OSError, subprocess.SubprocessError):
        return ""
    return out.stdout.strip() if out.returncode == 0 else ""
