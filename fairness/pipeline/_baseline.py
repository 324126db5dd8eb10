"""Base vs head: audit the base revision (or a given base run) the same way and diff the two.

The head run is audited first by `run_audit`; this module adds the comparison. With a
git ref, the base revision's suite (when it is a file) and recordings are read from the
workspace's history, audited with the same options into `<out>/base`, and diffed into
`<out>/diff`. Regression rules (`kind: regression`) come from the head's suite: the
policy under review is the one the pull request proposes. A confident regression fails
the step even when the head passes on its own, and summary.md then leads with it.
"""

from __future__ import annotations

import contextlib
import re
import shutil
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from pydantic import ValidationError

from fairness._util.errors import FairnessError
from fairness._util.files import write_atomic
from fairness.audit._diff import DiffResult, RegressionCheck, diff_md
from fairness.audit._gate import State, exit_code, overall_state
from fairness.recordings import _git
from fairness.recordings._store import MANIFEST, Manifest, read_manifest
from fairness.report._render import ICONS, cap_summary
from fairness.suite._suite import BUILTIN_SUITES, Suite, load_suite

if TYPE_CHECKING:
    from fairness.pipeline._options import RunOptions

BASE_DIR = "base"
DIFF_DIR = "diff"


@dataclass(frozen=True)
class Comparison:
    """The outcome of base vs head; `diff` is None when the comparison was skipped (`note` says why)."""

    base: str
    """What was compared against: `ref <name> (<sha12>)` or the base run's path."""
    diff: DiffResult | None
    note: str = ""

    @property
    def state(self) -> State | None:
        return self.diff.state if self.diff is not None else None

    def markdown(self) -> str:
        if self.diff is None:
            return f"### Base vs head\n\n_Skipped: {self.note}_\n"
        return diff_md(self.diff)


def _fail_prefix(where: str, exc: FairnessError) -> FairnessError:
    return FairnessError(f"{where}: {exc}")


def _base_suite(root: Path, commit: str, suite_ref: str, head: Suite, tmp: Path) -> tuple[str | None, Suite | None]:
    """The base revision's suite: a built-in is the same code; a file is read at `commit`."""
    if suite_ref in BUILTIN_SUITES and not Path(suite_ref).is_file():
        return suite_ref, head
    blob = _git.read_blob(root, commit, _git.path_in_repo(root, suite_ref))
    if blob is None:
        return None, None
    path = tmp / "suite.yaml"
    path.write_bytes(blob)
    return str(path), load_suite(path)


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


@dataclass
class BaseAtRef:
    """The base revision, read and audited before the head run writes anything.

    `comparison` is set when the comparison is skipped (no recordings or suite at the ref,
    or nothing can differ); otherwise `audited` holds the base's outputs in a temporary directory."""

    label: str
    comparison: Comparison | None = None
    audited: Path | None = None

    def finish(self, options: RunOptions) -> Comparison:
        """After the head run: move the base's outputs into `<out>/base` and diff the two."""
        if self.comparison is not None:
            return self.comparison
        assert self.audited is not None
        from fairness._util.files import staged_outputs

        with staged_outputs(options.out / BASE_DIR) as staging:
            for p in sorted(self.audited.iterdir()):
                if p.is_file():
                    shutil.copyfile(p, staging / p.name)
        return Comparison(self.label, _diff(options.out / BASE_DIR, options))


def _same_data(root: Path, commit: str, rec_rel: str, base: Manifest, head: Manifest) -> bool:
    """The base's data files, as actually stored at the commit, hash to the head's (a manifest alone can lie)."""
    import hashlib

    if _data_files(base) != _data_files(head):
        return False
    for path, sha in _data_files(base):
        blob = _git.read_blob(root, commit, f"{rec_rel}/{path}")
        if blob is None or hashlib.sha256(blob).hexdigest() != sha:
            return False
    return True


@contextlib.contextmanager
def base_at_ref(ref: str, options: RunOptions, *, workspace: str | Path | None = None) -> Iterator[BaseAtRef]:
    """Resolve `ref`, read the base revision's suite and recordings and audit them the way `options`
    audits the head, into a temporary directory: every error about the base (not a commit, a shallow
    clone, corrupt recordings) is raised before the head run writes anything into `options.out`."""
    from fairness.pipeline._run import check_inputs, run_audit

    check_inputs(options)
    if workspace is not None:
        ws = Path(workspace)
        if not ws.is_dir():
            raise FairnessError(f"workspace `{workspace}` does not exist or is not a directory")
    root = _git.repo_root(Path(workspace) if workspace is not None else options.recordings.resolve())
    commit = _git.resolve_commit(root, ref)
    label = f"ref `{ref}` ({commit[:12]})" if not commit.startswith(ref) else f"commit `{commit[:12]}`"
    rec_rel = _git.path_in_repo(root, options.recordings)
    head_suite = load_suite(options.suite)
    with tempfile.TemporaryDirectory(prefix="fairness-base-") as tmpdir:
        tmp = Path(tmpdir)
        blob = _git.read_blob(root, commit, f"{rec_rel}/{MANIFEST}")
        if blob is None:
            yield BaseAtRef(label, Comparison(
                label, None, f"the base revision {label} has no recordings at `{rec_rel}`; nothing to compare"))
            return
        try:
            base_suite_ref, base_suite = _base_suite(root, commit, options.suite, head_suite, tmp)
        except FairnessError as exc:
            raise _fail_prefix(f"the suite at {label}", exc) from None
        if base_suite_ref is None or base_suite is None:
            yield BaseAtRef(label, Comparison(
                label, None, f"the base revision {label} has no suite file `{options.suite}`; nothing to compare"))
            return
        base_manifest = _base_manifest(blob, f"the recordings at {label}")
        if base_suite.hash == head_suite.hash and _same_data(root, commit, rec_rel, base_manifest,
                                                              read_manifest(options.recordings)):
            yield BaseAtRef(label, Comparison(
                label, None, f"the recordings at {label} are byte-identical to the head's (same data-file "
                             "sha256 in both manifests) and the suite is unchanged, so nothing can differ"))
            return
        base_recordings = tmp / "recordings"
        _git.export_dir(root, commit, rec_rel, base_recordings)
        base = options.model_copy(update={  # the same audit options; the extras do not enter the diff
            "suite": base_suite_ref, "recordings": base_recordings, "out": tmp / "out",
            "junit": None, "evaluators": (), "bbq_recordings": None,
        })
        try:
            run_audit(base)
        except FairnessError as exc:
            raise _fail_prefix(f"auditing the base revision {label}", exc) from None
        yield BaseAtRef(label, audited=tmp / "out")


def compare_with_ref(ref: str, options: RunOptions, *, workspace: str | Path | None = None) -> Comparison:
    """Audit the suite and recordings as of `ref` and the head the way `options` asks (the head into
    `options.out`), and diff the two. `workspace`: the git work tree to read (default: the recordings')."""
    from fairness.pipeline._run import run_audit

    with base_at_ref(ref, options, workspace=workspace) as base:
        run_audit(options)
        return base.finish(options)


def compare_with_run(baseline: str | Path, options: RunOptions) -> Comparison:
    """Diff against a base run the user produced (an output directory of `run` or its results.json)."""
    return Comparison(f"run `{baseline}`", _diff(Path(baseline), options))


def _diff(base_out: Path, options: RunOptions) -> DiffResult:
    """Regression rules come from the head's suite: the policy under review is the one proposed."""
    from fairness.pipeline._diff import run_diff

    d, _ = run_diff(base_out, options.out, suite=options.suite, out=options.out / DIFF_DIR, options=options.audit)
    return d


def combined_state(head_state: State, comparison: Comparison | None) -> State:
    """The step's verdict: the more severe of the head's gate and the regression checks."""
    if comparison is None or comparison.state is None:
        return head_state
    return overall_state([head_state, comparison.state])


def combined_exit_code(head_state: State, comparison: Comparison | None, fail_on: str | None) -> int:
    return exit_code(combined_state(head_state, comparison), fail_on)  # type: ignore[arg-type]


def check_text(check: RegressionCheck) -> str:
    """A regression check in words: the change from base to head, then the gate's reason."""
    return check.reason if check.change is None else f"change {check.change:+.4g} from base to head; {check.reason}"


def lead_md(comparison: Comparison) -> str:
    """The regression headline that opens the summary when the diff does not pass."""
    d = comparison.diff
    if d is None or d.state == "pass":
        return ""
    bad = [c for c in d.checks if c.state != "pass"]
    what = {"fail": "a confident regression", "inconclusive": "a possible regression (the interval straddles the threshold)",
            "undefined": "the regression rules could not be evaluated"}[d.state]
    lines = [f"## {ICONS[d.state]} Base vs head: {what} against {comparison.base}", ""]
    lines += [f"- **{c.rule}** [{c.scope}]: {check_text(c)}" for c in bad[:20]]
    return "\n".join(lines) + "\n"


def outcome_line(comparison: Comparison) -> str:
    """One console line for the comparison (plain text, like the verdict line)."""
    if comparison.diff is None:
        return f"base vs head skipped: {comparison.note}"
    lead = lead_md(comparison)
    if lead:
        return re.sub(r"[*✅❌⚠️❔#]+", "", lead.splitlines()[0]).strip()
    return f"base vs head against {comparison.base}: no regression rule breached"


def write_summary(head_out: str | Path, comparison: Comparison) -> str:
    """Rewrite `<out>/summary.md`: the regression headline first (if any), the head's summary, then the diff."""
    path = Path(head_out) / "summary.md"
    parts = [lead_md(comparison), path.read_text(encoding="utf-8"), comparison.markdown()]
    text = cap_summary("\n".join(p for p in parts if p))
    write_atomic(path, text)
    return text


__all__ = ["BaseAtRef", "Comparison", "base_at_ref", "check_text", "combined_exit_code", "combined_state", "compare_with_ref", "compare_with_run", "lead_md",
           "outcome_line", "write_summary"]
