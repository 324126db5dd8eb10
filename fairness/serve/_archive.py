"""Unpacking an uploaded recording set safely: a gzip'd tar, read as a stream and checked entry by entry.

Nothing in an upload is trusted. The decompressed stream is counted as it is read (a gzip bomb
stops at the limit, whatever the headers claim); entries are counted; each name must stay inside
the archive (no absolute path, no `..`) and appear once; only regular files and folders are
accepted (no symbolic or hard links, devices or FIFOs). Files are written by this module with
`O_EXCL | O_NOFOLLOW` and private modes, never by `tarfile.extract`. Each refusal is a `Refused`
with its 4xx status and one line naming the entry.
"""

from __future__ import annotations

import gzip
import os
import re
import tarfile
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from fairness.recordings._store import MANIFEST
from fairness.serve._errors import Refused
from fairness.serve._settings import LIMITS

GZIP_MAGIC = b"\x1f\x8b"
_CHUNK = 1 << 20


class _TooLarge(Exception):
    """The decompressed stream passed its limit."""


class _Capped:
    """A reader that refuses to yield more than `limit` bytes in all: never asks its source for more than fits."""

    def __init__(self, inner: BinaryIO, limit: int) -> None:
        self.inner, self.limit, self.count = inner, limit, 0

    def read(self, n: int | None = -1) -> bytes:
        room = self.limit - self.count
        data = self.inner.read(room + 1 if n is None or n < 0 else min(n, room + 1))
        self.count += len(data)
        if self.count > self.limit:
            raise _TooLarge
        return data


@dataclass(frozen=True)
class Unpacked:
    """An archive unpacked into `root`: its regular files by relative name, and what it held."""

    root: Path
    files: frozenset[str]
    entries: int
    bytes: int


def shown(name: str) -> str:
    """An entry name as one short line (names come from the upload)."""
    name = name.replace("\r", "\\r").replace("\n", "\\n").replace("\x00", "\\0")
    return name if len(name) <= 200 else name[:200] + "…"


def entry_parts(name: str, what: str = "entry") -> list[str]:
    """The path components of an archive name; absolute names and `..` are refused (422)."""
    if name.startswith(("/", "\\")) or re.match(r"^[A-Za-z]:", name):
        raise Refused(422, f"{what} `{shown(name)}` has an absolute path; names must be relative to the archive")
    parts = [p for p in re.split(r"[/\\]", name) if p not in ("", ".")]
    if ".." in parts:
        raise Refused(422, f"{what} `{shown(name)}` climbs out of the archive with `..`")
    if "\x00" in name:
        raise Refused(422, f"{what} `{shown(name)}` holds a NUL byte")
    return parts


def _kind_problem(member: tarfile.TarInfo) -> str | None:
    if member.issym():
        return "is a symbolic link: links are refused"
    if member.islnk():
        return "is a hard link: links are refused"
    if member.ischr() or member.isblk():
        return "is a device: only files and folders are accepted"
    if member.isfifo():
        return "is a FIFO: only files and folders are accepted"
    if not (member.isreg() or member.isdir()):
        return "is not a regular file or folder"
    return None


def unpack(archive: Path, dest: Path, *, max_unpacked: int, max_entries: int) -> Unpacked:
    """Unpack the gzip'd tar `archive` into the empty folder `dest`, checking as it goes (see the module)."""
    over = Refused(413, f"the archive unpacks to over {max_unpacked:,} bytes, the limit "
                        f"({LIMITS['max_unpacked_bytes'][0]})")
    with open(archive, "rb") as raw:
        if raw.read(2) != GZIP_MAGIC:
            raise Refused(415, "the body is not gzip data: send the recording set as a .tar.gz")
        raw.seek(0)
        stream = _Capped(gzip.GzipFile(fileobj=raw, mode="rb"), max_unpacked)  # type: ignore[arg-type]
        try:
            return _unpack_tar(stream, dest, max_unpacked, max_entries, over)
        except _TooLarge:
            raise over from None
        except (gzip.BadGzipFile, zlib.error, EOFError):
            raise Refused(400, "the body is not a complete gzip stream (truncated or corrupt)") from None
        except tarfile.TarError:
            raise Refused(400, "the body is gzip data but not a tar archive") from None


def _unpack_tar(stream: _Capped, dest: Path, max_unpacked: int, max_entries: int, over: Refused) -> Unpacked:
    seen: set[str] = set()
    files: set[str] = set()
    entries = declared = 0
    with tarfile.open(fileobj=stream, mode="r|") as tar:  # type: ignore[call-overload]
        for member in tar:
            entries += 1
            if entries > max_entries:
                raise Refused(413, f"the archive holds over {max_entries:,} entries, the limit "
                                   f"({LIMITS['max_entries'][0]})")
            parts = entry_parts(member.name)
            problem = _kind_problem(member)
            if problem:
                raise Refused(422, f"entry `{shown(member.name)}` {problem}")
            if not parts:  # the archive's own top folder (`./`)
                continue
            name = "/".join(parts)
            if name in seen:
                raise Refused(422, f"entry `{shown(name)}` appears twice in the archive")
            seen.add(name)
            declared += member.size
            if declared > max_unpacked:
                raise over
            _write_entry(tar, member, dest, parts)
            if member.isreg():
                files.add(name)
    return Unpacked(dest, frozenset(files), entries, stream.count)


def _write_entry(tar: tarfile.TarFile, member: tarfile.TarInfo, dest: Path, parts: list[str]) -> None:
    """Create one folder, or one file with the member's bytes; never through a link (none exist under `dest`)."""
    target = dest.joinpath(*parts)
    try:
        if member.isdir():
            target.mkdir(mode=0o700, parents=True, exist_ok=True)
            return
        target.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    except OSError:
        raise Refused(422, f"entry `{shown(member.name)}` cannot be unpacked: a file stands where its folder goes") from None
    source = tar.extractfile(member)
    with os.fdopen(fd, "wb") as out:
        while source is not None and (chunk := source.read(_CHUNK)):
            out.write(chunk)


def find_set(unpacked: Unpacked) -> Path:
    """The recording set's folder: `manifest.json` at the archive's top, else in its one top-level folder (422 otherwise)."""
    if MANIFEST in unpacked.files:
        return unpacked.root
    found = sorted(n for n in unpacked.files if n.count("/") == 1 and n.endswith(f"/{MANIFEST}"))
    if len(found) > 1:
        raise Refused(422, f"the archive holds {len(found)} recording sets ({', '.join(map(shown, found))}); upload one")
    if not found:
        raise Refused(422, f"the archive has no {MANIFEST} at its top level or in a top-level folder: "
                           "it is not a recording set")
    return unpacked.root / found[0].split("/")[0]


def archive_file(unpacked: Unpacked, name: str, what: str) -> Path:
    """A regular file of the archive named by the client (`what` names the parameter), checked like an entry."""
    key = "/".join(entry_parts(name, what))
    if key not in unpacked.files:
        raise Refused(422, f"{what} `{shown(name)}` is not a file in the archive")
    return unpacked.root / key
