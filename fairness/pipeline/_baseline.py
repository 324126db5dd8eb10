"""Base vs head: audit the base revision (or read a given base run) and diff it with the head.

`run_audit` calls these while the head's outputs are still staged, so the comparison's
regression checks join the head's verdict before any output is rendered (`fairness.audit._gate`).
With a git ref, the base revision's suite (when it is a file) and recordings are read from the
workspace's history and audited with the same options into `<out>/base`; the diff goes into
`<out>/diff`. Regression rules (`kind: regression`) come from the head's suite: the policy under
review is the one the pull request proposes.
"""

from __future__ import annotations

import contextlib
import hashlib
import shutil
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

from pydantic import ValidationError

from fairness._util.errors import FairnessError
from fairness._util.files import write_atomic
from fairness.audit._results import Comparison
from fairness.recordings import _git
from fairness.recordings._store import MANIFEST, Manifest, read_manifest
from fairness.suite._rules import DecisionRule
from fairness.suite._suite import BUILTIN_SUITES, Suite, load_suite

if TYPE_CHECKING:  # the diff's models load only when a comparison runs: a plain run never diffs
    from fairness.audit._diff import DiffResult
    from fairness.pipeline._options import RunOptions

BASE_DIR = "base"
DIFF_DIR = "diff"
OWN_FILE = {BASE_DIR: "results.json", DIFF_DIR: "diff.json"}
"""The file that marks `<out>/base` and `<out>/diff` as a comparison's (cleared when a run makes none)."""


def stale_comparison(out: Path, written: Sequence[str], keep: Path | None = None) -> set[str]:
    """The comparison folders an earlier run left in `out` that this run does not write; never
    the one holding `keep` (a base run the user named, e.g. `--baseline out/base`)."""
    kept = keep.resolve() if keep is not None else None
    return {name for name, marker in OWN_FILE.items()
            if name not in written and (out / name).is_dir() and (out / name / marker).is_file()
            and not (kept is not None and (kept == (out / name).resolve() or (out / name).resolve() in kept.parents))}


def _fail_prefix(where: str, exc: FairnessError) -> FairnessError:
    return FairnessError(f"{where}: {exc}")


def _base_suite(root: Path, commit: str, suite_ref: str, head: Suite, tmp: Path) -> tuple[str | None, Suite | None]:
    """The base revision's suite: a built-in is the same code; a file is read at `commit`."""
    if suite_ref in BUILTIN_SUITES and not Path(suite_ref).is_file():
        return suite_ref, head
    suite_rel = _git.path_in_repo(root, suite_ref)
    blob = _git.read_blob(root, commit, suite_rel)
    if blob is None:
        return None, None
    path = tmp / "suite.yaml"
    path.write_bytes(blob)
    _base_rubric(root, commit, suite_rel, blob, tmp)
    return str(path), load_suite(path)


def _base_rubric(root: Path, commit: str, suite_rel: str, suite_blob: bytes, tmp: Path) -> None:
    """Write the rubric file the base revision's suite names (its `rubric:` path) at `commit` next to
    the copy of that suite in `tmp`, so the base is scored with its own rubric. A path that leads out of
    the suite's directory is left for `load_suite` to refuse."""
    import posixpath

    from fairness._util.yaml_io import loads_yaml

    try:
        ref = loads_yaml(suite_blob.decode("utf-8"), "the base suite")
    except (FairnessError, UnicodeDecodeError):
        return  # load_suite words the error
    ref = ref.get("rubric") if isinstance(ref, dict) else None
    if not isinstance(ref, str):
        return
    rel = posixpath.normpath(ref)
    if rel.startswith("../") or rel == ".." or posixpath.isabs(rel):
        return
    rubric_blob = _git.read_blob(root, commit, posixpath.join(posixpath.dirname(suite_rel), rel))
    if rubric_blob is not None:
        (tmp / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp / rel).write_bytes(rubric_blob)


def _base_manifest(blob: bytes, where: str) -> Manifest:
    """The base revision's manifest, read as strictly as one on disk (size cap, UTF-8, JSON keys)."""
    from fairness._util.errors import validation_message
    from fairness._util.files import config_limit, decode_utf8, loads_json

    source = f"{where}: {MANIFEST}"
    if len(blob) > config_limit():
        raise FairnessError(f"{source} is over the {config_limit():,}-byte limit for input files")
    raw = loads_json(decode_utf8(blob, source), source)
    try:
        return Manifest.model_validate(raw)
    except ValidationError as err:
        raise FairnessError(validation_message(err, source, Manifest)) from None


def _data_files(m: Manifest) -> list[tuple[str, str]]:
    return sorted((f.path, f.sha256) for f in m.files)


def _same_data(root: Path, commit: str, rec_rel: str, base: Manifest, head: Manifest) -> bool:
    """The base's data files, as actually stored at the commit, hash to the head's (a manifest alone can lie)."""
    if _data_files(base) != _data_files(head):
        return False
    for path, sha in _data_files(base):
        blob = _git.read_blob(root, commit, f"{rec_rel}/{path}")
        if blob is None or hashlib.sha256(blob).hexdigest() != sha:
            return False
    return True


class Base(NamedTuple):
    """What the head is compared with: a base run's directory, or why there is nothing to compare."""

    label: str
    """`ref <name> (<sha12>)`, `commit <sha12>` or `run <path>`."""
    outputs: Path | None = None
    """The base run's output directory (results.json + transcripts.jsonl)."""
    note: str = ""
    """Why the comparison is skipped (then `outputs` is None)."""
    copy: bool = False
    """The base was audited here: its outputs are copied into `<out>/base`."""
    results: dict[str, Any] | None = None
    """Its results.json, when already read (a base run vetted up front)."""


@contextlib.contextmanager
def base_at_ref(ref: str, options: RunOptions, head_suite: Suite, *,
                workspace: str | Path | None = None) -> Iterator[Base]:
    """Resolve `ref`, read the base revision's suite and recordings and audit them the way `options`
    audits the head, into a temporary directory: every error about the base (not a commit, a shallow
    clone, corrupt recordings) is raised before the head run writes anything into `options.out`.
    `head_suite`: the head's suite as the run resolved it (a built-in base suite is the same code)."""
    from fairness.pipeline._run import run_audit

    if workspace is not None and not Path(workspace).is_dir():
        raise FairnessError(f"workspace `{workspace}` does not exist or is not a directory")
    root = _git.repo_root(Path(workspace) if workspace is not None else options.recordings.resolve())
    commit = _git.resolve_commit(root, ref)
    label = f"ref `{ref}` ({commit[:12]})" if not commit.startswith(ref) else f"commit `{commit[:12]}`"
    rec_rel = _git.path_in_repo(root, options.recordings)
    with tempfile.TemporaryDirectory(prefix="fairness-base-") as tmpdir:
        tmp = Path(tmpdir)
        blob = _git.read_blob(root, commit, f"{rec_rel}/{MANIFEST}")
        if blob is None:
            yield Base(label, note=f"the base revision {label} has no recordings at `{rec_rel}`; nothing to compare")
            return
        try:
            base_suite_ref, base_suite = _base_suite(root, commit, options.suite, head_suite, tmp)
        except FairnessError as exc:
            raise _fail_prefix(f"the suite at {label}", exc) from None
        if base_suite_ref is None or base_suite is None:
            yield Base(label, note=f"the base revision {label} has no suite file `{options.suite}`; nothing to compare")
            return
        base_manifest = _base_manifest(blob, f"the recordings at {label}")
        if base_suite.hash == head_suite.hash and _same_data(root, commit, rec_rel, base_manifest,
                                                              read_manifest(options.recordings)):
            yield Base(label, note=f"the recordings at {label} are byte-identical to the head's (same data-file "
                                   "sha256 in both manifests) and the suite is unchanged, so nothing can differ")
            return
        base_recordings = tmp / "recordings"
        _git.export_dir(root, commit, rec_rel, base_recordings)
        base = options.model_copy(update={  # the same audit options; the extras do not enter the diff
            "suite": base_suite_ref, "recordings": base_recordings, "out": tmp / "out",
            "junit": None, "evaluators": (), "bbq_recordings": None,
            "baseline_ref": None, "baseline": None, "workspace": None,
        })
        try:
            run_audit(base)
        except FairnessError as exc:
            raise _fail_prefix(f"auditing the base revision {label}", exc) from None
        yield Base(label, outputs=tmp / "out", copy=True)


def base_run(path: Path) -> Base:
    """A base run the user produced (an output directory of `run` or its results.json), vetted cheaply."""
    from fairness.audit._diff import read_results

    rp, results = read_results(path)
    return Base(f"run `{path}`", outputs=rp.parent, results=results)


def compare(base: Base, staging: Path, head: dict[str, Any], rules: Sequence[DecisionRule],
            options: RunOptions) -> tuple[Comparison, DiffResult | None]:
    """Diff the staged head run (`head`: its results as JSON data; its transcripts in `staging`)
    with `base`, writing `staging/base` (an audited base revision) and `staging/diff`."""
    if base.outputs is None:
        return Comparison(base=base.label, ran=False, note=base.note), None
    from fairness.audit._diff import diff_md, diff_sides, load_side

    d = diff_sides(load_side(base.outputs, base.results), load_side(staging, head), rules=list(rules),
                   B=options.audit.bootstrap, seed=options.audit.seed, alpha=options.audit.alpha)
    if base.copy:
        (staging / BASE_DIR).mkdir()
        for p in sorted(base.outputs.iterdir()):
            if p.is_file():
                shutil.copyfile(p, staging / BASE_DIR / p.name)
    (staging / DIFF_DIR).mkdir()
    write_atomic(staging / DIFF_DIR / "diff.json", d.model_dump_json(indent=1) + "\n")
    write_atomic(staging / DIFF_DIR / "diff.md", diff_md(d))
    return Comparison(base=base.label, ran=True, paired=d.paired, state=d.state, checks=d.checks,
                      diff_path=f"{DIFF_DIR}/diff.json", not_compared=d.not_compared), d


__all__ = ["BASE_DIR", "DIFF_DIR", "Base", "base_at_ref", "base_run", "compare", "stale_comparison"]
