"""How `run` scales with the grid: wall time, CPU time and peak RSS at 3,200 … 3,200,000 rows.

Synthetic recording sets (a benchmark, not evidence about any model): the committed suite
with more paraphrases per family (each template repeated with a variant tag) and more seeds;
every row's output is drawn at random from the committed outputs of the same slice, so the
metrics look like the real ones. Records are written streaming to a temporary directory.
Each `run` is a subprocess measured by a wrapper process (its own
`getrusage(RUSAGE_CHILDREN)`), so peak RSS is that run's alone. Prints a Markdown table.

Run by hand:  python benchmarks/bench_scale.py [--sizes 3200,320000] [--repeat 3] [--keep DIR]
(`--repeat` applies to sizes up to 32,000 rows; larger sizes run once.)
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from fairness._util.canonical import sha256_file  # noqa: E402
from fairness.recordings._store import content_key  # noqa: E402
from fairness.suite._suite import iter_cases, load_suite  # noqa: E402

REC = ROOT / "recordings/fairness-cards/qwen-v0.1/SmolLM2-135M-Instruct-Q4_1"
SUITE = ROOT / "fairness/suite/builtin/qwen-v0.1.yaml"
BASE_ROWS = 3200
# rows → (paraphrase multiplier, seed multiplier): more templates and more seeds
SHAPES = {3_200: (1, 1), 32_000: (2, 5), 320_000: (4, 25), 3_200_000: (10, 100)}
FILE_ROWS = 500_000
"""Rows per data file (~0.6 GB): the reader caps one data file at 1 GiB, so a larger set is split, as shards are."""
# the largest grid is over the default limit of 1,000,000 rows; the runs inherit this
os.environ.setdefault("FAIRNESS_MAX_GRID_ROWS", str(max(SHAPES)))

WRAPPER = (
    "import json, resource, subprocess, sys, time\n"
    "t = time.perf_counter()\n"
    "p = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)\n"
    "wall = time.perf_counter() - t\n"
    "r = resource.getrusage(resource.RUSAGE_CHILDREN)\n"
    "print(json.dumps({'rc': p.returncode, 'wall': wall, 'cpu': r.ru_utime + r.ru_stime, 'maxrss_kib': r.ru_maxrss,"
    " 'stderr': p.stderr.decode()[-400:]}))\n"
)


def make_set(rows: int, where: Path) -> tuple[Path, Path]:
    """Write a suite with `rows` grid rows and a complete synthetic recording set for it."""
    fp, fs = SHAPES[rows]
    spec = yaml.safe_load(SUITE.read_text(encoding="utf-8"))
    for fam in spec["families"]:
        base = list(fam["paraphrases"])
        fam["paraphrases"] = [t if k == 0 else f"{t} (variant {k})" for k in range(fp) for t in base]
    spec["seeds"] = list(range(1, 5 * fs + 1))
    spec["name"] = f"bench-scale-{rows}"
    suite_path = where / f"suite-{rows}.yaml"
    suite_path.write_text(yaml.safe_dump(spec, sort_keys=False), encoding="utf-8")
    suite = load_suite(suite_path)

    manifest = json.loads((REC / "manifest.json").read_text(encoding="utf-8"))
    by_slice: dict[str, list[dict]] = {}
    with open(REC / "records.jsonl", encoding="utf-8") as fh:
        for line in fh:
            r = json.loads(line)
            by_slice.setdefault(r["slice_id"], []).append(
                {k: r[k] for k in ("output", "prompt_tokens", "completion_tokens", "finish_reason")}
            )
    rng = random.Random(rows)
    rec_dir = where / f"rec-{rows}"
    shutil.rmtree(rec_dir, ignore_errors=True)
    rec_dir.mkdir()
    model_id, system_prompt = manifest["model"]["id"], manifest["system_prompt"]
    n = 0
    files: list[dict] = []
    out = None
    for case in iter_cases(suite):
        if n % FILE_ROWS == 0:  # a new data file: each stays under the 1 GiB cap on one file
            if out is not None:
                out.close()
            name = "records.jsonl" if rows <= FILE_ROWS else f"records-{n // FILE_ROWS:02d}.jsonl"
            files.append({"path": name, "rows": min(FILE_ROWS, rows - n)})
            out = open(rec_dir / name, "w", encoding="utf-8")  # noqa: SIM115 - closed when the next file opens
        src = rng.choice(by_slice[case.slice_id])
        rec = {
            **src,
            "family": case.family, "key": content_key(model_id, system_prompt, case.prompt, case.params, case.seed),
            "params": case.params.model_dump(mode="json"), "paraphrase_id": case.paraphrase_id,
            "placeholders": case.placeholders, "prompt": case.prompt, "regime": case.regime,
            "row_id": case.row_id, "seed": case.seed, "slice": case.slice, "slice_id": case.slice_id, "status": "ok",
        }
        out.write(json.dumps(rec, sort_keys=True, ensure_ascii=False, separators=(",", ":")) + "\n")
        n += 1
    if out is not None:
        out.close()
    assert n == rows, (n, rows)
    manifest.update(
        suite=suite.name, suite_version=suite.version, suite_hash=suite.hash,
        grid_hash="synthetic benchmark set (not computed)", seeds=list(suite.seeds),
        expected_rows=rows, rows=rows, complete=True, shard=None,
        files=[{**f, "sha256": sha256_file(rec_dir / f["path"])} for f in files],
    )
    manifest["model"]["note"] = "Synthetic benchmark set: committed test-model outputs resampled over a larger grid."
    (rec_dir / "manifest.json").write_text(json.dumps(manifest, indent=2), encoding="utf-8")
    return suite_path, rec_dir


def measure(suite_path: Path, rec_dir: Path, out: Path, extra: list[str]) -> dict:
    cmd = [sys.executable, "-m", "fairness.cli", "run", "--suite", str(suite_path), "--recordings", str(rec_dir),
           "--out", str(out), "--quiet", *extra]
    res = subprocess.run([sys.executable, "-c", WRAPPER, *cmd], cwd=ROOT, capture_output=True, text=True, check=True)
    data = json.loads(res.stdout)
    if data["rc"] not in (0, 1, 3):  # gate outcomes (pass, fail, illustrative); 2 is an error
        raise SystemExit(f"run failed ({data['rc']}): {data['stderr']}")
    return data


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="3200,32000,320000")
    ap.add_argument("--repeat", type=int, default=1,
                    help="runs per size up to 32,000 rows (larger sizes run once); the best CPU time is kept")
    ap.add_argument("--keep", type=Path, help="keep the synthetic sets in this directory")
    ap.add_argument("--extra", default="", help="extra `run` arguments, e.g. '--permutations 0'")
    args = ap.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    with tempfile.TemporaryDirectory() as tmp:
        where = args.keep or Path(tmp)
        where.mkdir(parents=True, exist_ok=True)
        rows_out = []
        base_cpu = None
        for rows in sizes:
            suite_path, rec_dir = make_set(rows, where)
            best = None
            for _ in range(args.repeat if rows <= 32_000 else 1):
                m = measure(suite_path, rec_dir, where / f"out-{rows}", args.extra.split())
                best = m if best is None or m["cpu"] < best["cpu"] else best
            assert best is not None
            base_cpu = base_cpu or best["cpu"]
            rows_out.append((rows, best))
            print(f"{rows:>10,} rows  wall {best['wall']:8.2f} s  cpu {best['cpu']:8.2f} s  "
                  f"peak RSS {best['maxrss_kib'] / 1024:7.0f} MiB", file=sys.stderr, flush=True)
            if args.keep is None:
                shutil.rmtree(rec_dir)
                shutil.rmtree(where / f"out-{rows}", ignore_errors=True)
        print("| rows | wall (s) | CPU (s) | CPU ÷ smallest | peak RSS (MiB) |")
        print("|---:|---:|---:|---:|---:|")
        for rows, m in rows_out:
            print(f"| {rows:,} | {m['wall']:.2f} | {m['cpu']:.2f} | {m['cpu'] / base_cpu:.1f}× | {m['maxrss_kib'] / 1024:.0f} |")


if __name__ == "__main__":
    main()
