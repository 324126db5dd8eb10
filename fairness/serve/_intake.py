"""From an uploaded archive to a queued audit's `RunOptions`: everything checked before it is queued.

The archive is unpacked (`_archive`), its recording set found and verified against its manifest's
checksums, the suite chosen (a built-in one by name, or a suite file inside the archive: the
server never reads its own files by a name a client gives), and the whole run resolved by the
pipeline's own `resolve`, so a bad upload is a 4xx now rather than a failed job later.
"""

from __future__ import annotations

from fairness._util.errors import FairnessError
from fairness.audit._gate import FailOn, GateOn
from fairness.audit._options import AuditOptions, ScorerMode
from fairness.pipeline._options import DEFAULT_SUITE, RunOptions, parse_evaluators
from fairness.pipeline._run import resolve
from fairness.recordings._store import read_manifest, verify_files
from fairness.serve._archive import Unpacked, archive_file, find_set, shown, unpack
from fairness.serve._errors import Refused, client_line
from fairness.serve._jobs import Job
from fairness.serve._models import Documented, Kind
from fairness.serve._settings import ServeSettings
from fairness.suite._suite import BUILTIN_SUITES

UPLOAD = "upload.tar.gz"


class AuditQuery(Documented):
    """`POST /v1/audits` query parameters: what the upload is and how to audit it (those of `run`)."""

    kind: Kind = "recordings"
    """What the body holds: `recordings`, a recording set (its manifest.json at the archive's top or in its one
    top-level folder). Reserved for later: `monitor`, a monitor batch."""
    suite: str | None = None
    """A built-in suite by name (default fairness-cards/qwen-v0.1); excludes `suite_file`."""
    suite_file: str | None = None
    """A suite YAML inside the archive, by its path there (e.g. `suite.yaml`); excludes `suite`."""
    fail_on: FailOn | None = None
    """Which states fail the gate (`run --fail-on`)."""
    gate_on: GateOn | None = None
    """What must clear a threshold for a rule to fail (`run --gate-on`)."""
    threshold: float | None = None
    """Override the threshold of every absolute decision rule (`run --threshold`)."""
    scorer_mode: ScorerMode | None = None
    """Override the suite's scorer mode (`run --scorer-mode`)."""
    min_group_size: int | None = None
    """Rows and template cells per slice below which a metric is NaN (`run --min-group-size`)."""
    allow_small_samples: bool = False
    """Compute underpowered metrics anyway, shown and not judged (`run --allow-small-samples`)."""
    bootstrap: int | None = None
    """Bootstrap resamples of the peer evaluators (`run --bootstrap`)."""
    permutations: int | None = None
    """Permutations per test, 0 to skip (`run --permutations`)."""
    seed: int | None = None
    """Seed of every random stream (`run --seed`)."""
    evaluators: str = "none"
    """Peer-parity evaluators, comma-separated, `all` or `none` (`run --evaluators`)."""
    allow_incomplete: bool = False
    """Audit the recorded rows of a set whose manifest declares it incomplete (`run --allow-incomplete`)."""

    def audit_options(self) -> AuditOptions:
        given = {k: getattr(self, k) for k in ("fail_on", "gate_on", "threshold", "scorer_mode", "min_group_size",
                                               "bootstrap", "permutations", "seed") if getattr(self, k) is not None}
        return AuditOptions(allow_small_samples=self.allow_small_samples, **given)


def suite_for(query: AuditQuery, unpacked: Unpacked) -> str:
    """The suite argument of the run: a built-in name, or the path of a suite file unpacked from the archive."""
    if query.suite is not None and query.suite_file is not None:
        raise Refused(422, "give `suite` (a built-in suite) or `suite_file` (a suite file in the archive), not both")
    if query.suite_file is not None:
        return str(archive_file(unpacked, query.suite_file, "suite_file"))
    if query.suite is None:
        return DEFAULT_SUITE
    if query.suite not in BUILTIN_SUITES:
        raise Refused(422, f"unknown suite `{shown(query.suite)}`: name a built-in suite ({', '.join(BUILTIN_SUITES)}) "
                           "or send a suite file inside the archive as `suite_file`")
    return query.suite


def intake(job: Job, query: AuditQuery, settings: ServeSettings) -> Unpacked:
    """Unpack `job`'s upload, verify its set and resolve its run into `job.options` (a `Refused` on any problem)."""
    archive = job.dir / UPLOAD
    unpacked = unpack(archive, job.upload, max_unpacked=settings.max_unpacked_bytes, max_entries=settings.max_entries)
    archive.unlink()
    try:
        options = query.audit_options()
        set_dir = find_set(unpacked)
        suite = suite_for(query, unpacked)
        manifest = read_manifest(set_dir)
        verify_files(set_dir, manifest.files)
        job.options = RunOptions(recordings=set_dir, out=job.out, junit=job.out / "junit.xml", suite=suite,
                                 audit=options, evaluators=parse_evaluators(query.evaluators),
                                 allow_incomplete=query.allow_incomplete, shown_root=job.upload)
        resolve(job.options)
    except FairnessError as exc:
        raise Refused(422, client_line(str(exc), job.dir)) from None
    job.kind = query.kind
    return unpacked
