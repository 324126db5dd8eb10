"""Reading untrusted input files and writing outputs atomically.

Every file a user hands us is size-capped before it is parsed (a 50 MB `description`
or a 10^7-seed list must be refused, not parsed for minutes) and decoded as strict
UTF-8, so a stray byte is one line naming the file and the byte offset, not a traceback.
Outputs go into a staging directory beside `--out` and are moved into place only once
all of them are written: a failure part-way leaves `--out` exactly as it was.
"""

from __future__ import annotations

import contextlib
import errno
import itertools
import json
import os
import shutil
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, TextIO

from fairness._util.errors import FairnessError

MiB = 1024 * 1024
MAX_CONFIG_BYTES = 10 * MiB
"""Suites, provider configs, manifests, baselines' results.json: far above any real one."""
MAX_RECORDS_BYTES = 1024 * MiB
"""One records data file (the default suite's 3,200 rows take 3.7 MB)."""
MAX_CONFIG_ENV = "FAIRNESS_MAX_FILE_BYTES"
"""Overrides MAX_CONFIG_BYTES (bytes) for unusually large suites."""


def config_limit() -> int:
    return env_limit(MAX_CONFIG_ENV, MAX_CONFIG_BYTES, "a positive whole number of bytes")


def env_limit(name: str, default: int, what: str, error: type[Exception] = FairnessError) -> int:
    """A size limit overridable by the environment variable `name` (unset or blank: `default`);
    anything but a positive integer raises `error` (a ValueError inside pydantic validators)."""
    raw = os.environ.get(name, "").strip()
    if not raw:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise error(f"{name} must be {what}, got {raw!r}") from None
    if value < 1:
        raise error(f"{name} must be {what}, got {raw!r}")
    return value


def decode_utf8(data: bytes, source: str, *, base_offset: int = 0) -> str:
    """Strict UTF-8; a bad byte names the file and its byte offset (from the start of the file)."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        bad = data[exc.start : exc.start + 1].hex()
        raise FairnessError(
            f"{source} is not UTF-8 text: byte 0x{bad} at byte offset {base_offset + exc.start}"
        ) from None


def read_bytes_capped(path: str | Path, limit: int | None = None, what: str = "file") -> bytes:
    """The file's bytes, refused (without reading them) when larger than `limit`."""
    path = Path(path)
    limit = config_limit() if limit is None else limit
    try:
        if path.is_dir():
            raise FairnessError(f"{what} `{path}` is a directory, not a file")
        size = path.stat().st_size
        if size > limit:
            raise FairnessError(
                f"{what} `{path}` is {size:,} bytes, over the {limit:,}-byte limit for input files"
                f" (raise it with {MAX_CONFIG_ENV})"
            )
        with open(path, "rb") as fh:
            data = fh.read(limit + 1)
    except FileNotFoundError:
        raise FairnessError(f"{what} `{path}` does not exist") from None
    except OSError as exc:
        raise FairnessError(f"cannot read {what} `{path}`: {exc.strerror or exc}") from None
    if len(data) > limit:  # grew while we read it (a pipe, /dev/zero …)
        raise FairnessError(f"{what} `{path}` is over the {limit:,}-byte limit for input files")
    return data


def read_text_capped(path: str | Path, limit: int | None = None, what: str = "file") -> str:
    return decode_utf8(read_bytes_capped(path, limit, what), f"{what} `{path}`")


def _no_duplicates(source: str):
    def hook(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for k, v in pairs:
            if k in out:
                raise FairnessError(f"{source}: duplicate key `{k}` (each key may appear once)")
            out[k] = v
        return out

    return hook


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def loads_json(text: str, source: str) -> Any:
    """Strict JSON: a duplicate key or NaN/Infinity is an error, never silently resolved."""
    try:
        return json.loads(text, object_pairs_hook=_no_duplicates(source), parse_constant=_no_constant)
    except json.JSONDecodeError as exc:
        raise FairnessError(f"{source} is not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}") from None
    except (ValueError, RecursionError) as exc:
        raise FairnessError(f"{source} is not valid JSON: {exc}") from None


def read_json(path: str | Path, what: str = "file", limit: int | None = None) -> Any:
    return loads_json(read_text_capped(path, limit, what), f"{what} `{path}`")


# -- output paths -------------------------------------------------------------------------


def _nearest_existing(path: Path) -> Path:
    p = path.absolute()
    while not p.exists() and p != p.parent:
        p = p.parent
    return p


def check_output_dir(path: str | Path, flag: str = "--out") -> Path:
    """Fail now, before any work, if `path` cannot become a directory we can write into."""
    path = Path(path)
    if path.exists():
        if not path.is_dir():
            raise FairnessError(f"{flag} `{path}` exists and is not a directory")
        if not os.access(path, os.W_OK | os.X_OK):
            raise FairnessError(f"{flag} `{path}` is not writable")
        return path
    base = _nearest_existing(path)
    if not base.is_dir():
        raise FairnessError(f"{flag} `{path}`: `{base}` is a file, not a directory")
    if not os.access(base, os.W_OK | os.X_OK):
        raise FairnessError(f"{flag} `{path}` cannot be created: `{base}` is not writable")
    return path


def check_output_file(path: str | Path, flag: str) -> Path:
    """Fail now if `path` cannot be written as a file (it is a directory, or its folder is read-only)."""
    path = Path(path)
    if path.is_dir():
        raise FairnessError(f"{flag} `{path}` is a directory, not a file")
    if path.exists() and not path.is_file():
        raise FairnessError(f"{flag} `{path}` is not a regular file (a device, pipe or socket); it would be replaced")
    if path.exists() and not os.access(path, os.W_OK):
        raise FairnessError(f"{flag} `{path}` is not writable")
    parent = path.parent if path.parent != Path("") else Path(".")
    if parent.exists():
        if not parent.is_dir():
            raise FairnessError(f"{flag} `{path}`: `{parent}` is not a directory")
        if not os.access(parent, os.W_OK | os.X_OK):
            raise FairnessError(f"{flag} `{path}`: folder `{parent}` is not writable")
    else:
        check_output_dir(parent, flag)
    return path


def write_error(out: Path, exc: OSError) -> FairnessError:
    """The one-line error of an output that could not be written into `out`."""
    reason = exc.strerror or str(exc)
    if exc.errno == errno.ENOSPC:
        reason = "no space left on device"
    return FairnessError(f"cannot write the outputs to `{out}`: {reason}; nothing in `{out}` was changed")


def write_atomic(path: Path, text: str | TextIO) -> None:
    """Write via a temporary file and rename, so a reader never sees half a file.

    `text` is the content, or an open text file to copy from its current position (a
    streamed output that was never held in memory)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            if isinstance(text, str):
                fh.write(text)
            elif hasattr(text, "buffer") and str(getattr(text, "encoding", "")).lower() in ("utf-8", "utf8"):
                # a UTF-8 text file: copy its bytes, no decode and re-encode
                fh.flush()
                shutil.copyfileobj(text.buffer, fh.buffer, 1 << 20)
            else:
                shutil.copyfileobj(text, fh, 1 << 20)
            fh.flush()
            os.fsync(fh.fileno())
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


@contextlib.contextmanager
def staged_outputs(out: str | Path, drop: set[str] | None = None) -> Iterator[Path]:
    """Yield an empty staging directory; on success move each file in it into `out`.

    `drop` names entries of `out` that belong to an earlier run and must not outlive this one
    (a comparison's `base/` and `diff/` when this run made none); the caller may fill the set
    inside the block. They leave `out` in the same swap as the new files arrive, and come back
    if the swap fails.

    The staging directory lies beside `out` (same filesystem, so each move is an atomic
    rename); if that folder is read-only it lies inside `out`. On any failure the staging
    directory is removed and `out` is left as it was, and so are the folders made to hold
    it: a run may write into the staging directory long before its outputs are ready.
    Files in `out` that the run does not write (an earlier `diff/`, `junit.xml`) are kept.
    """
    out = check_output_dir(out)
    parent = out.absolute().parent
    existed = out.exists()
    done = False
    try:
        base = parent if os.access(_nearest_existing(parent), os.W_OK) else out
        made = list(itertools.takewhile(lambda d: not d.exists(), (base, *base.parents)))  # deepest first
        base.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=f".{out.name}.staging-", dir=base))
    except OSError as exc:
        raise write_error(out, exc) from None
    try:
        yield staging
        names = sorted(p.name for p in staging.iterdir())
        for name in names:
            if (out / name).is_dir() and not (staging / name).is_dir():
                raise FairnessError(f"--out `{out}` holds a directory `{name}` where an output file goes")
        out.mkdir(parents=True, exist_ok=True)
        _swap_in(staging, out, names, sorted((drop or set()) - set(names)))
        done = True
    except OSError as exc:
        if not existed:
            with contextlib.suppress(OSError):
                out.rmdir()  # only if still empty: we created it
        raise write_error(out, exc) from None
    finally:
        shutil.rmtree(staging, ignore_errors=True)
        for folder in made if not done else ():
            with contextlib.suppress(OSError):
                folder.rmdir()  # only if still empty


_replace = os.replace
"""The rename used to move outputs into place (a seam for tests that simulate a failure)."""


def _swap_in(staging: Path, out: Path, names: list[str], drop: Sequence[str] = ()) -> None:
    """Move each staged file over its old version and each `drop` entry out of the way; if one
    move fails, undo the others."""
    previous = staging / ".previous"
    previous.mkdir()
    replaced: list[str] = []
    placed: list[str] = []
    try:
        for name in drop:
            if (out / name).exists() or (out / name).is_symlink():
                _replace(out / name, previous / name)
                replaced.append(name)
        for name in names:
            if (out / name).exists():
                _replace(out / name, previous / name)
                replaced.append(name)
            _replace(staging / name, out / name)
            placed.append(name)
    except OSError:
        for name in placed:
            with contextlib.suppress(OSError):
                _replace(out / name, staging / name)
        for name in replaced:
            with contextlib.suppress(OSError):
                _replace(previous / name, out / name)
        raise
