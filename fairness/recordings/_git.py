"""Read a base revision's suite and recordings out of the workspace's git history.

Base-vs-head needs the base branch's recordings, which the pull request's checkout
already holds as history: reading them with `git` spares the user from producing a
baseline run as an artifact. Only plain blobs are read (`git ls-tree` + `git cat-file`),
never an archive, so a crafted tree cannot write outside the destination.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path, PurePosixPath

from fairness._util.errors import FairnessError

FETCH_FIX = "check the repository out with `actions/checkout` and `fetch-depth: 0` so the base commit is present"
_TIMEOUT_S = 120


def _git(root: Path, *args: str, binary: bool = False) -> subprocess.CompletedProcess:
    exe = shutil.which("git")
    if exe is None:
        raise FairnessError("`git` is not on PATH; the baseline ref is read from the repository's history with git")
    try:
        return subprocess.run([exe, "-C", str(root), *args], capture_output=True, text=not binary, check=False,
                              timeout=_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        raise FairnessError(f"`git {args[0]}` in `{root}` took longer than {_TIMEOUT_S}s") from None


def _first_line(stderr: str | bytes) -> str:
    text = stderr.decode("utf-8", "replace") if isinstance(stderr, bytes) else stderr
    return next((ln.strip() for ln in text.splitlines() if ln.strip()), "no message")


def head_commit(path: str | Path) -> str | None:
    """The commit checked out in the work tree holding `path`; None where git cannot say (no git,
    not a repository, no commit yet) — for provenance, which may be missing but never wrong."""
    try:
        proc = _git(Path(path), "rev-parse", "HEAD")
    except FairnessError:
        return None
    return proc.stdout.strip() if proc.returncode == 0 else None


def repo_root(path: str | Path) -> Path:
    """The top level of the git work tree holding `path`."""
    start = Path(path)
    if not start.is_dir():
        start = start.parent
    proc = _git(start, "rev-parse", "--show-toplevel")
    if proc.returncode != 0:
        raise FairnessError(f"`{path}` is not inside a git repository ({_first_line(proc.stderr)}); "
                            "a baseline ref needs the repository's history")
    return Path(proc.stdout.strip())


def resolve_commit(root: Path, ref: str) -> str:
    """The full sha of `ref`; a missing commit names the fix (a full-history checkout)."""
    if not ref or ref.startswith("-") or any(ch.isspace() for ch in ref):
        raise FairnessError(f"baseline ref {ref!r} is not a git revision")
    proc = _git(root, "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}")
    if proc.returncode == 0:
        return proc.stdout.strip()
    shallow = _git(root, "rev-parse", "--is-shallow-repository").stdout.strip() == "true"
    why = "the clone is shallow" if shallow else "it is not in the fetched history"
    raise FairnessError(f"baseline ref `{ref}` is not a commit in `{root}` ({why}): {FETCH_FIX}")


def path_in_repo(root: Path, path: str | Path) -> str:
    """`path` (absolute or relative to the working directory) as a posix path inside the repository."""
    absolute = Path(path).resolve()
    try:
        rel = absolute.relative_to(root.resolve())
    except ValueError:
        raise FairnessError(f"`{path}` is outside the git repository `{root}`, so its base version cannot be read") from None
    return rel.as_posix() or "."


def read_blob(root: Path, commit: str, relpath: str) -> bytes | None:
    """The file `relpath` at `commit`, or None when that revision has no such file."""
    proc = _git(root, "cat-file", "-e", f"{commit}:{relpath}")
    if proc.returncode != 0:
        return None
    proc = _git(root, "cat-file", "blob", f"{commit}:{relpath}", binary=True)
    if proc.returncode != 0:
        raise FairnessError(f"cannot read `{relpath}` at {commit[:12]}: {_first_line(proc.stderr)}")
    return proc.stdout


def export_dir(root: Path, commit: str, relpath: str, dest: Path) -> int:
    """Copy the directory `relpath` as of `commit` into `dest`; returns the files written.

    Symbolic links and submodules are refused: a recording set is plain files."""
    prefix = relpath.rstrip("/") + "/"
    proc = _git(root, "ls-tree", "-r", "-z", "--full-tree", commit, "--", prefix)
    if proc.returncode != 0:
        raise FairnessError(f"cannot list `{relpath}` at {commit[:12]}: {_first_line(proc.stderr)}")
    count = 0
    for entry in filter(None, proc.stdout.split("\0")):
        meta, name = entry.split("\t", 1)
        mode, kind, sha = meta.split()
        if kind != "blob" or mode == "120000":
            raise FairnessError(f"`{name}` at {commit[:12]} is not a plain file (a link or submodule)")
        rel = PurePosixPath(name).relative_to(prefix.rstrip("/"))
        if ".." in rel.parts:
            raise FairnessError(f"`{name}` at {commit[:12]} escapes `{relpath}`")
        blob = _git(root, "cat-file", "blob", sha, binary=True)
        if blob.returncode != 0:
            raise FairnessError(f"cannot read `{name}` at {commit[:12]}: {_first_line(blob.stderr)}")
        target = dest.joinpath(*rel.parts)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(blob.stdout)
        count += 1
    return count


__all__ = ["FETCH_FIX", "export_dir", "path_in_repo", "read_blob", "repo_root", "resolve_commit"]
