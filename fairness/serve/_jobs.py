"""Audit jobs: a bounded queue, worker threads that call the main job, and bounded retention.

A job's folder (`<root>/<id>/`) holds its unpacked upload until the audit ends and its outputs
(`out/`) until it is removed: after `retention_seconds`, or sooner when more than `keep_jobs`
finished audits are kept. Uploads wait in a queue of at most `queue_size`; one more is 429, never
an unbounded backlog. Logs say only aggregates: ids, counts, states and timings, never a file's
content or a model's text.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import logging
import queue
import secrets
import shutil
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from fairness._util.errors import FairnessError
from fairness.audit._gate import State
from fairness.pipeline._options import RunOptions
from fairness.serve._errors import Refused, client_line
from fairness.serve._models import Kind, Status
from fairness.serve._settings import ServeSettings

log = logging.getLogger("fairness.serve")


def iso(t: float | None) -> str | None:
    return None if t is None else _dt.datetime.fromtimestamp(t, _dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass
class Job:
    """One upload's audit, from its acceptance to its removal."""

    id: str
    dir: Path
    kind: Kind = "recordings"
    options: RunOptions | None = None
    status: Status = "queued"
    submitted: float = field(default_factory=time.time)
    started: float | None = None
    finished: float | None = None
    error: str | None = None
    gate_state: State | None = None
    passed: bool | None = None

    @property
    def out(self) -> Path:
        return self.dir / "out"

    @property
    def upload(self) -> Path:
        return self.dir / "upload"


class Jobs:
    """The job table, the bounded queue and its workers."""

    def __init__(self, settings: ServeSettings, root: Path) -> None:
        self.settings, self.root = settings, root
        self._queue: queue.Queue[Job] = queue.Queue(maxsize=settings.queue_size)
        self._jobs: dict[str, Job] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self.running = 0
        self._reserved = 0

    def start(self) -> None:
        for i in range(self.settings.workers):
            thread = threading.Thread(target=self._work, name=f"fairness-serve-worker-{i}", daemon=True)
            thread.start()
            self._threads.append(thread)

    def stop(self) -> None:
        """Stop taking jobs (a running audit finishes in its daemon thread or dies with the process)."""
        self._stop.set()

    @property
    def queued(self) -> int:
        return self._queue.qsize()

    def _full(self) -> Refused:
        return Refused(429, f"the queue is full (room for {self.settings.queue_size} audits waiting or "
                                f"being uploaded); retry later",
                       headers={"Retry-After": "10"})

    @contextlib.contextmanager
    def place(self) -> Iterator[Job]:
        """A place in the queue for one upload, taken before its body is read (429 when none is left) and
        held while it is received and checked: uploads in progress count against `queue_size` too, so
        neither the queue nor the uploads being unpacked grow without bound. The job's folder is removed
        unless the block `submit`s it."""
        with self._lock:
            if self._reserved + self._queue.qsize() >= self.settings.queue_size:
                raise self._full()
            self._reserved += 1
        job_id = secrets.token_hex(16)
        job = Job(id=job_id, dir=self.root / job_id)
        try:
            job.dir.mkdir(mode=0o700)
            yield job
        except BaseException:
            self.discard(job)
            raise
        finally:
            with self._lock:
                self._reserved -= 1

    def discard(self, job: Job) -> None:
        shutil.rmtree(job.dir, ignore_errors=True)

    def submit(self, job: Job) -> None:
        """Queue `job`, which holds a place (`place`), so the queue has room for it."""
        self.prune()
        with self._lock:
            self._queue.put_nowait(job)
            self._jobs[job.id] = job

    def get(self, job_id: str) -> Job:
        self.prune()
        with self._lock:
            job = self._jobs.get(job_id)
        if job is None:
            raise Refused(404, f"no audit `{job_id[:64]}` (unknown, or removed after its retention)")
        return job

    def prune(self, now: float | None = None) -> None:
        """Remove finished audits older than the retention, then the oldest beyond `keep_jobs`."""
        now = time.time() if now is None else now
        with self._lock:
            done = sorted((j for j in self._jobs.values() if j.finished is not None), key=lambda j: j.finished or 0)
            extra = max(0, len(done) - self.settings.keep_jobs)
            gone = [j for i, j in enumerate(done) if i < extra or now - (j.finished or now) > self.settings.retention_seconds]
            for job in gone:
                del self._jobs[job.id]
        for job in gone:
            self.discard(job)
        if gone:
            log.info("removed %d finished audit(s) past their retention", len(gone))

    def _work(self) -> None:
        while not self._stop.is_set():
            try:
                job = self._queue.get(timeout=0.5)
            except queue.Empty:
                self.prune()
                continue
            with self._lock:
                self.running += 1
            try:
                self._run(job)
            finally:
                with self._lock:
                    self.running -= 1
                self._queue.task_done()

    def _run(self, job: Job) -> None:
        from fairness.pipeline._run import run_audit

        job.started, job.status = time.time(), "running"
        log.info("audit %s running (%d waiting)", job.id, self.queued)
        try:
            assert job.options is not None
            result = run_audit(job.options)
        except FairnessError as exc:
            self._end(job, "failed", error=client_line(str(exc), job.dir))
        except MemoryError:
            self._end(job, "failed", error="the server ran out of memory auditing this upload")
        except Exception as exc:  # noqa: BLE001 - a bug must not kill the worker; the client gets one line
            log.error("audit %s: internal error %s", job.id, type(exc).__name__)
            self._end(job, "failed", error=f"internal error while auditing ({type(exc).__name__})")
        else:
            gate = result.run.gate
            job.gate_state, job.passed = gate.state, gate.passed
            self._end(job, "done", rows=result.run.n_rows)
        finally:
            with contextlib.suppress(OSError):
                shutil.rmtree(job.upload, ignore_errors=True)

    def _end(self, job: Job, status: Status, *, error: str | None = None, rows: int | None = None) -> None:
        job.error, job.finished, job.status = error, time.time(), status
        took = job.finished - (job.started or job.finished)
        if status == "done":
            log.info("audit %s done: %s (passed=%s), %d rows, %.2fs", job.id, job.gate_state, job.passed, rows or 0, took)
        else:
            log.info("audit %s failed after %.2fs", job.id, took)
