"""Live generation: run an engine over the grid (or a shard of it) into a recording set.

Resumable: records are appended one complete, fsynced line at a time; a rerun repairs a
torn last line, skips rows already recorded and continues in the same deterministic plan,
so an interrupted-then-resumed run writes the same bytes as an uninterrupted one.
"""

from __future__ import annotations

import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fairness._util.canonical import sha256_file
from fairness._util.errors import FairnessError, LiveGenerationRefused
from fairness._util.files import check_output_dir, write_atomic
from fairness.recordings._record import Recording
from fairness.recordings._store import (
    MANIFEST,
    RECORDS,
    BackendInfo,
    DataFile,
    Manifest,
    ModelInfo,
    RecordWriter,
    content_key,
    grid_hash,
    read_manifest,
    today,
    write_manifest,
)
from fairness.suite._case import Case
from fairness.suite._suite import Suite

LIVE_ENV = "FAIRNESS_ALLOW_LIVE"
CHECKPOINT_SECONDS = 0.0
"""Least time between manifest rewrites. 0: after every appended batch, so a run killed at
any point leaves a manifest matching the records on disk (auditable with --allow-incomplete);
the data file's sha256 is kept running by the writer, so a rewrite costs no reread."""


def require_live_opt_in(flag: bool) -> None:
    """Live generation costs compute or money; it runs only when asked for explicitly."""
    if flag or os.environ.get(LIVE_ENV) == "1":
        return
    raise LiveGenerationRefused(f"live generation is opt-in: pass --live or set {LIVE_ENV}=1")


def parse_shard(text: str | None) -> tuple[int, int] | None:
    if text is None:
        return None
    try:
        k, n = (int(x) for x in text.split("/"))
    except ValueError:
        raise FairnessError(f"`--shard` must look like K/N (e.g. 2/4), got `{text}`") from None
    if not (n >= 1 and 1 <= k <= n):
        raise FairnessError(f"`--shard` K/N needs 1 <= K <= N, got `{text}`")
    return k, n


def shard_cases(cases: list[Case], shard: tuple[int, int] | None) -> list[Case]:
    """Rows whose grid index ≡ K−1 (mod N): every shard sees every family, slice and regime."""
    if shard is None:
        return cases
    k, n = shard
    return [c for c in cases if c.index % n == k - 1]


@dataclass
class GenerateReport:
    written: int
    already: int
    expected: int
    seconds: float
    completion_tokens: int
    complete: bool

    @property
    def tokens_per_second(self) -> float:
        return self.completion_tokens / self.seconds if self.seconds > 0 else 0.0


class _Progress:
    def __init__(self, total: int, initial: int, enabled: bool):
        self.bar = None
        self.total, self.n = total, initial
        self.t0 = time.monotonic()
        self.start = initial
        self.enabled = enabled
        if enabled:
            try:
                from tqdm import tqdm

                self.bar = tqdm(total=total, initial=initial, unit="row", dynamic_ncols=True, file=sys.stderr)
            except ImportError:
                self.bar = None

    def update(self, k: int) -> None:
        self.n += k
        if self.bar is not None:
            self.bar.update(k)
        elif self.enabled:
            rate = (self.n - self.start) / max(time.monotonic() - self.t0, 1e-9)
            eta = (self.total - self.n) / rate if rate > 0 else float("inf")
            print(f"{self.n}/{self.total} rows  {rate:.2f} rows/s  ETA {eta:.0f}s", file=sys.stderr)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


def generate(
    suite: Suite,
    engine: Any,
    model: ModelInfo,
    out: Path,
    *,
    max_rows: int | None = None,
    shard: tuple[int, int] | None = None,
    progress: bool = True,
) -> GenerateReport:
    """Generate the (sharded) grid into `out`, resuming whatever is already there."""
    if max_rows is not None and max_rows < 0:
        raise FairnessError("`--max-rows` must be a non-negative integer")
    check_output_dir(out)
    all_cases = suite.expand()
    cases = shard_cases(all_cases, shard)
    keys = {c.row_id: content_key(model.id, suite.system_prompt, c.prompt, c.params, c.seed) for c in cases}
    shard_text = f"{shard[0]}/{shard[1]}" if shard else None
    backend = BackendInfo(**engine.backend_info())
    g_hash = grid_hash(all_cases, suite.system_prompt)

    created, history = today(), []
    if (out / MANIFEST).exists():
        old = read_manifest(out)
        history = old.history  # a resumed set keeps the record of its reseals
        for what, mine, theirs in [
            ("grid (prompts, params, seeds, system prompt)", g_hash, old.grid_hash),
            ("model id", model.id, old.model.id),
            ("engine", backend.engine, old.backend.engine),
            ("shard", shard_text, old.shard),
            ("batch plan", engine.batch_plan(), old.batch_plan),
        ]:
            if mine != theirs:
                raise FairnessError(f"`{out}` holds recordings with another {what} ({theirs}); use a fresh --out directory")
        created = old.created

    writer = RecordWriter(out / RECORDS, set(keys.values()))
    already = sum(1 for c in cases if keys[c.row_id] in writer.done)

    def checkpoint(reread: bool = False) -> Manifest:
        """Write the manifest for what is on disk now, so a partial set is always valid."""
        rows = len(writer.done)
        sha = sha256_file(out / RECORDS) if reread else writer.sha256()
        manifest = Manifest(
            suite=suite.name,
            suite_version=suite.version,
            suite_hash=suite.recording_hash,
            grid_hash=g_hash,
            model=model,
            backend=backend,
            system_prompt=suite.system_prompt,
            regimes=[r.model_dump(mode="json") for r in suite.regimes],
            effective_sampling={r.name: engine.effective_sampling(r.params) for r in suite.regimes},
            seeds=list(suite.seeds),
            batch_plan=engine.batch_plan(),
            shard=shard_text,
            created=created,
            updated=today(),
            expected_rows=len(cases),
            rows=rows,
            complete=rows == len(cases),
            files=[DataFile(path=RECORDS, sha256=sha, rows=rows)],
            history=history,
        )
        write_manifest(out, manifest)
        return manifest

    checkpoint(reread=True)  # at the start: records never exist without a manifest

    bar = _Progress(len(cases), already, progress)
    written = tokens = 0
    t0 = last_checkpoint = time.monotonic()
    try:
        for batch in engine.plan(cases):
            pending = [c for c in batch if keys[c.row_id] not in writer.done]
            if not pending:
                continue
            if max_rows is not None and written >= max_rows:
                break
            # Rows that do not affect each other are never re-requested once finished.
            asked = pending if getattr(engine, "independent_rows", False) else batch
            completions = engine.generate(asked, suite.system_prompt)
            recs = []
            # A capped hosted engine answers only a prefix of `asked`: record that prefix.
            for case, comp in zip(asked, completions, strict=False):
                if keys[case.row_id] in writer.done:
                    continue
                recs.append(_record(case, comp, keys[case.row_id]))
            if max_rows is not None:
                recs = recs[: max_rows - written]
            writer.append(recs)
            written += len(recs)
            tokens += sum(r.completion_tokens for r in recs)
            bar.update(len(recs))
            if recs and time.monotonic() - last_checkpoint >= CHECKPOINT_SECONDS:
                checkpoint()
                last_checkpoint = time.monotonic()
    finally:
        seconds = time.monotonic() - t0
        writer.close()
        bar.close()
        if len(writer.done) == len(cases):
            _canonical_order(out / RECORDS, [keys[c.row_id] for batch in engine.plan(cases) for c in batch])
        manifest = checkpoint(reread=True)
    return GenerateReport(written, already, len(cases), seconds, tokens, manifest.complete)


def _canonical_order(path: Path, plan_keys: list[str]) -> None:
    """Rewrite a complete data file in plan order, so its bytes never depend on how often the
    run was interrupted, sharded or resumed (a no-op for an uninterrupted run)."""
    lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
    by_key = {Recording.model_validate_json(line).key: line for line in lines}
    ordered = [by_key[k] for k in plan_keys]
    if ordered != lines:
        write_atomic(path, "".join(ordered))


def _record(case: Case, comp: Any, key: str) -> Recording:
    return Recording.from_case(
        case, key=key, output=comp.text, prompt_tokens=comp.prompt_tokens,
        completion_tokens=comp.completion_tokens, finish_reason=comp.finish_reason,
    )
