"""Put a set of new files into a repository: all of them, inside it, or none of them.

`init` writes two or three workflows and a suite copy that only work together, and with
`--force` it replaces a scaffold someone already has. So every target is checked first
(inside the repository after following symlinks, not a directory, its parents
directories, absent unless forced); all files are written to one staging directory in the
repository (same filesystem, so moving them in is a rename); then each old file is moved
aside and the new one moved in, and on any failure every move is undone. Messages name
the target, never a staging or temporary file.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from pathlib import Path

from fairness._util.errors import FairnessError

STAGING_PREFIX = ".fairness-init-"


class _Stuck(FairnessError):
    """Undoing failed too: the staging directory holds old files and must stay."""


def _target(root: Path, real_root: Path, rel: str) -> Path:
    """`root/rel`, refused when any existing part of it is a symlink leading out of the repository."""
    path = root
    for part in Path(rel).parts:
        path = path / part
        if path.is_symlink():
            real = path.resolve()
            if real != real_root and real_root not in real.parents:
                raise FairnessError(f"`{path}` is a symbolic link leading out of the repository (to `{real}`); "
                                    "refusing to write through it")
    return path


def check_targets(root: Path, rels: list[str], *, force: bool) -> list[Path]:
    """The target paths of `rels` under `root`, each checked before anything is written."""
    real_root = root.resolve()
    targets = [_target(root, real_root, rel) for rel in rels]
    for rel, target in zip(rels, targets, strict=True):
        parent = root
        for part in Path(rel).parts[:-1]:
            parent = parent / part
            if os.path.lexists(parent) and not parent.is_dir():
                raise FairnessError(f"`{parent}` is not a directory; cannot write `{target}`")
        if target.is_dir():
            raise FairnessError(f"`{target}` is a directory; refusing to replace it")
        if os.path.lexists(target) and not force:
            raise FairnessError(f"`{target}` already exists; pass --force to overwrite it")
    return targets


def place(root: Path, files: dict[str, str], *, force: bool) -> list[Path]:
    """Write `files` (repository-relative path → text) into `root` together; returns the paths written."""
    targets = check_targets(root, list(files), force=force)
    try:
        staging = Path(tempfile.mkdtemp(prefix=STAGING_PREFIX, dir=root))
    except OSError as exc:
        raise FairnessError(f"cannot write into `{root}`: {exc.strerror or exc}") from None
    keep_staging = False
    try:
        _move_in(targets, _stage(root, staging, list(files.values())), staging)
    except _Stuck:
        keep_staging = True
        raise
    finally:
        if not keep_staging:
            shutil.rmtree(staging, ignore_errors=True)
    return targets


def _stage(root: Path, staging: Path, texts: list[str]) -> list[Path]:
    paths = []
    try:
        for i, text in enumerate(texts):
            path = staging / f"new-{i}"
            with open(path, "w", encoding="utf-8") as fh:
                fh.write(text)
                fh.flush()
                os.fsync(fh.fileno())
            paths.append(path)
    except OSError as exc:
        raise FairnessError(f"cannot write into `{root}`: {exc.strerror or exc}; nothing was changed") from None
    return paths


def _move_in(targets: list[Path], new: list[Path], staging: Path) -> None:
    """Move each old target aside and each new file in; on failure undo it all and raise
    (`_Stuck` when undoing failed too)."""
    made: list[Path] = []
    moved: list[tuple[Path, Path | None, bool]] = []  # (target, its old file aside, new file in place)
    current = targets[0]
    try:
        for i, (target, path) in enumerate(zip(targets, new, strict=True)):
            current = target
            for parent in reversed(target.parents):
                if not parent.exists():
                    parent.mkdir()
                    made.append(parent)
            aside = None
            if os.path.lexists(target):
                aside = staging / f"old-{i}"
                os.replace(target, aside)
            moved.append((target, aside, False))
            os.replace(path, target)
            moved[-1] = (target, aside, True)
    except OSError as exc:
        stuck = _undo(moved, made)
        if stuck:
            raise _Stuck(f"cannot write `{current}`: {exc.strerror or exc}; `{stuck}` could not be put back "
                                f"(its previous content is in `{staging}`)") from None
        raise FairnessError(f"cannot write `{current}`: {exc.strerror or exc}; the previous files are back in place") from None


def _put_back(target: Path, aside: Path | None, placed: bool) -> bool:
    try:
        if aside is not None:
            os.replace(aside, target)
        elif placed:
            target.unlink()
    except OSError:
        return False
    return True


def _undo(moved: list[tuple[Path, Path | None, bool]], made: list[Path]) -> Path | None:
    """Put every old file back and remove every new one and every directory made; the first target that
    could not be restored, if any."""
    stuck = None
    for target, aside, placed in reversed(moved):
        if not _put_back(target, aside, placed):
            stuck = stuck or target
    for directory in reversed(made):
        with contextlib.suppress(OSError):
            directory.rmdir()
    return stuck
