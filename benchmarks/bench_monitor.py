"""`monitor` at scale: rows/s and peak memory of the DuckDB and Spark engines on a generated Parquet log set.

The log set (a benchmark, not evidence about any model): `--rows` records in Parquet files of
1,000,000, each record's output drawn at random from the committed recordings' outputs of its
slice (4 slices: gender × religion, as the committed suite's), a user id (each user in one slice),
a timestamp uniform over 8 weeks (UTC) and an int64 request id. Generated once into `--data`
and reused when it is already there; each run's outputs are kept there too.

Each configuration (engine × sampling) is one `llm-fairness-check monitor` subprocess (day
windows, units = users). Peak memory is of the whole process tree: this script samples /proc
every 0.1 s for the command and every descendant (for Spark: the Python driver, the JVM, the
Python daemon and its workers) and keeps the largest sum of VmRSS (pages shared between
processes counted once per process: an upper bound) and of Pss (shared pages split: the tree's
actual share). The 1 GiB target is judged on PSS, the memory the tree takes from the machine (Spark's
workers are forked from a daemon that imported the scoring code first, so their RSS counts the
daemon's pages again); RSS is reported beside it. `getrusage(RUSAGE_CHILDREN)` is not used: its
ru_maxrss is the largest single process, not the tree. The DuckDB and Spark monitor.json of each sampling are compared byte for byte.

Run by hand:  python benchmarks/bench_monitor.py --data DIR [--rows 10000000]   (DIR: a scratch directory, ~3 GB)
              [--engines duckdb,spark] [--samples 10,1]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
REC = ROOT / "recordings/fairness-cards/qwen-v0.1/SmolLM2-135M-Instruct-Q4_1/records.jsonl"
FILE_ROWS = 1_000_000
USERS = 2_000
WEEKS = 8
START_US = 1_772_409_600_000_000  # 2026-03-02T00:00:00Z, a Monday, in microseconds
MAPPING = "text: output\ngroups: [gender, religion]\ntimestamp: ts\nunit: user\nid: request_id\n"
GIB = 1024**3


def make_logs(rows: int, data: Path) -> Path:
    """Write (once) `rows` log records into `data/logs-<rows>/part-NNN.parquet`; return that directory."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    where = data / f"logs-{rows}"
    done = where / "_complete"
    if done.exists():
        return where
    where.mkdir(parents=True, exist_ok=True)
    by_slice: dict[str, list[str]] = {}
    with REC.open(encoding="utf-8") as fh:
        for line in fh:
            r = json.loads(line)
            by_slice.setdefault(r["slice_id"], []).append(r["output"])
    slices = sorted(by_slice)
    assert len(slices) == 4, slices
    texts = pa.array([t for s in slices for t in by_slice[s]], pa.string())
    offsets = np.cumsum([0] + [len(by_slice[s]) for s in slices])[:-1]
    sizes = np.array([len(by_slice[s]) for s in slices])
    gender = pa.array([s.split("_")[0] for s in slices])
    religion = pa.array([s.split("_")[1] for s in slices])
    rng = np.random.default_rng(rows)
    user_slice = rng.integers(0, 4, USERS)
    span_us = WEEKS * 7 * 86_400 * 1_000_000
    for part, first in enumerate(range(0, rows, FILE_ROWS)):
        n = min(FILE_ROWS, rows - first)
        user = rng.integers(0, USERS, n)
        s = user_slice[user]
        text_idx = (offsets[s] + rng.integers(0, sizes[s])).astype(np.int32)
        idx = pa.array(s.astype(np.int32))
        table = pa.table({
            "request_id": pa.array(np.arange(first, first + n, dtype=np.int64)),
            "ts": pa.array(START_US + rng.integers(0, span_us, n), pa.timestamp("us", tz="UTC")),
            "output": pa.DictionaryArray.from_arrays(pa.array(text_idx), texts),
            "gender": pa.DictionaryArray.from_arrays(idx, gender),
            "religion": pa.DictionaryArray.from_arrays(idx, religion),
            "user": pa.array([f"user-{u:05d}" for u in user.tolist()], pa.string()),
        })
        pq.write_table(table, where / f"part-{part:03d}.parquet", row_group_size=131_072)
    (where / "mapping.yaml").write_text(MAPPING, encoding="utf-8")
    done.write_text(str(rows), encoding="utf-8")
    return where


def _tree(root: int) -> list[int]:
    """`root` and every process descending from it (from /proc/*/stat's parent ids)."""
    parent: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            parent[int(entry)] = int(stat.rsplit(")", 1)[1].split()[1])
    tree, frontier = [root], [root]
    while frontier:
        frontier = [p for p, pp in parent.items() if pp in frontier]
        tree += frontier
    return tree


def _kib(pid: int, path: str, key: str) -> int:
    try:
        for line in Path(f"/proc/{pid}/{path}").read_text().splitlines():
            if line.startswith(key):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def _name(pid: int) -> str:
    """A short name for a process: the program, or the Python module it runs."""
    try:
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace").split("\0")
    except OSError:
        return "?"
    if "-m" in argv:
        return argv[argv.index("-m") + 1]
    return Path(argv[0]).name


class TreeMemory:
    """Samples a process tree's summed RSS and PSS every `every` seconds; keeps the peaks (KiB) and the most processes."""

    def __init__(self, pid: int, every: float = 0.1):
        self.pid, self.every = pid, every
        self.rss = self.pss = self.procs = 0
        self.at_peak: list[tuple[str, int, int]] = []
        """(process, RSS MiB, PSS MiB) at the peak of the summed RSS."""
        self.at_pss_peak: list[tuple[str, int, int]] = []
        """(process, RSS MiB, PSS MiB) at the peak of the summed PSS."""
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            pids = _tree(self.pid)
            rss = {p: _kib(p, "status", "VmRSS:") for p in pids}
            pss = {p: _kib(p, "smaps_rollup", "Pss:") for p in pids}
            each = [(_name(p), rss[p] // 1024, pss[p] // 1024) for p in pids if rss[p]]
            if sum(rss.values()) > self.rss:
                self.rss, self.at_peak = sum(rss.values()), each
            if sum(pss.values()) > self.pss:
                self.pss, self.at_pss_peak = sum(pss.values()), each
            self.procs = max(self.procs, len(pids))
            self._stop.wait(self.every)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()


def measure(logs: Path, out: Path, engine: str, sample: int) -> dict:
    """One `monitor` run: wall seconds, exit code and the tree's peak memory."""
    cmd = [sys.executable, "-m", "fairness.cli", "monitor", str(logs), "--mapping", str(logs / "mapping.yaml"),
           "--out", str(out), "--engine", engine, "--sample", str(sample), "--quiet"]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    t = time.perf_counter()
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    mem = TreeMemory(proc.pid)
    _, err = proc.communicate()
    wall = time.perf_counter() - t
    mem.stop()
    if proc.returncode not in (0, 1, 3, 4):  # gate outcomes (pass, fail, inconclusive, undefined); 2 is an error
        raise SystemExit(f"monitor --engine {engine} --sample {sample} failed ({proc.returncode}): {err.decode()[-600:]}")
    return {"engine": engine, "sample": sample, "wall": wall, "rss_kib": mem.rss, "pss_kib": mem.pss,
            "procs": mem.procs, "at_peak": mem.at_peak, "at_pss_peak": mem.at_pss_peak, "stderr": err.decode()}


def _each(procs: list[tuple[str, int, int]]) -> str:
    """Each process at a peak as `name RSS/PSS` (MiB)."""
    return ", ".join(f"{name} {rss}/{pss}" for name, rss, pss in procs)


def table(results: list[dict], rows: int) -> str:
    head = ["| engine | sample | wall s | rows read/s | peak tree RSS | peak tree PSS | processes | PSS ≤ 1 GiB | RSS ≤ 1 GiB |",
            "|---|---|---|---|---|---|---|---|---|"]
    return "\n".join(head + [
        f"| {r['engine']} | 1/{r['sample']} | {r['wall']:.1f} | {rows / r['wall']:,.0f} | {r['rss_kib'] / 1024:,.0f} MiB | "
        f"{r['pss_kib'] / 1024:,.0f} MiB | {r['procs']} | {_yes(r['pss_kib'])} | {_yes(r['rss_kib'])} |"
        for r in results])


def _yes(kib: int) -> str:
    return "yes" if kib * 1024 <= GIB else "NO"


def main(argv: list[str] | None = None) -> list[dict]:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rows", type=int, default=10_000_000)
    ap.add_argument("--data", type=Path, help="where the log set is generated once and reused (default: a temp dir)")
    ap.add_argument("--engines", default="duckdb,spark")
    ap.add_argument("--samples", default="10,1", help="sampling rates N (1/N), in the order run")
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        data = args.data or Path(tmp)
        t = time.perf_counter()
        logs = make_logs(args.rows, data)
        print(f"log set: {args.rows:,} rows in {logs} ({time.perf_counter() - t:.0f} s to make or find)", flush=True)
        results = []
        for sample in [int(s) for s in args.samples.split(",")]:
            outs = {}
            for engine in args.engines.split(","):
                outs[engine] = data / f"out-{args.rows}-{engine}-{sample}"
                r = measure(logs, outs[engine], engine, sample)
                results.append(r)
                print(f"{engine} 1/{sample}: {r['wall']:.1f} s, {args.rows / r['wall']:,.0f} rows/s, peak tree RSS "
                      f"{r['rss_kib'] / 1024:,.0f} MiB ({_each(r['at_peak'])}), "
                      f"peak tree PSS {r['pss_kib'] / 1024:,.0f} MiB ({_each(r['at_pss_peak'])})"
                      + (f"; stderr: {r['stderr'].strip()}" if r["stderr"].strip() else ""), flush=True)
            outs.update({e: data / f"out-{args.rows}-{e}-{sample}" for e in ("duckdb", "spark")  # an earlier run's
                         if (data / f"out-{args.rows}-{e}-{sample}" / "monitor.json").exists()})
            if len(outs) > 1:
                first, *rest = outs.values()
                same = all((o / "monitor.json").read_bytes() == (first / "monitor.json").read_bytes() for o in rest)
                print(f"1/{sample}: monitor.json the same bytes across engines: {'yes' if same else 'NO'}", flush=True)
                for r in results[-len(outs):]:
                    r["same_bytes"] = same
        print(table(results, args.rows))
        walls = {(r["engine"], r["sample"]): r["wall"] for r in results}
        for sample in sorted({r["sample"] for r in results}, reverse=True):
            if ("duckdb", sample) in walls and ("spark", sample) in walls:
                ratio = (args.rows / walls["spark", sample]) / (args.rows / walls["duckdb", sample])
                print(f"1/{sample}: Spark ÷ DuckDB rows/s = {ratio:.2f}")
        return results


if __name__ == "__main__":
    main()
