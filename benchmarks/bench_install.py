"""Time the Action's install step the way a runner sees it (goals on 2 cores: warm step < 10 s,
cold < 40 s).

- cold, uv: empty uv and pip caches, fresh venv, no uv on PATH, so scripts/install-env.sh
  fetches the pinned uv from the registry first (a fresh hosted runner);
- cold, pip: the same with FAIRNESS_INSTALLER=pip (the fallback);
- warm restore: the prepared venv packed as actions/cache packs it (tar + zstd) and
  unpacked into place;
- warm step: restore + the install script on a cache hit + the audit of the committed
  recordings through entrypoint.py with the default inputs (B = 2000), in a fresh workspace.

Needs the package registry (PyPI). Run by hand:  python benchmarks/bench_install.py [--python PATH]
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
REC = ROOT / "recordings/fairness-cards/qwen-v0.1/SmolLM2-135M-Instruct-Q4_1"
SCRIPT = ROOT / "scripts/install-env.sh"


def _env(tmp: Path, **more: str) -> dict[str, str]:
    """A runner-like environment: no venv, no uv on PATH, caches in empty folders."""
    path = os.pathsep.join(p for p in os.environ["PATH"].split(os.pathsep)
                           if not (Path(p) / "uv").exists() and not (Path(p) / "activate").exists())
    keep = {k: v for k, v in os.environ.items() if k in ("HOME", "LANG", "PIP_CERT", "SSL_CERT_FILE", "TMPDIR")}
    return {**keep, "PATH": path, "RUNNER_TEMP": str(tmp), "RUNNER_OS": "Linux", "GITHUB_OUTPUT": str(tmp / "out"),
            "UV_CACHE_DIR": str(tmp / "uv-cache"), "PIP_CACHE_DIR": str(tmp / "pip-cache"),
            "PIP_DISABLE_PIP_VERSION_CHECK": "1", "FAIRNESS_ACTION_PATH": str(ROOT), **more}


CPU: list[float] = []
"""CPU seconds (user + system) of each timed command, in order: less sensitive than wall time
to other jobs on a shared machine."""


def _children_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def timed(cmd: list[str], env: dict[str, str], cwd: Path | None = None, ok: tuple[int, ...] = (0,)) -> float:
    c0, t0 = _children_cpu(), time.perf_counter()
    proc = subprocess.run(cmd, env=env, cwd=cwd, capture_output=True, text=True, check=False)
    elapsed = time.perf_counter() - t0
    CPU.append(_children_cpu() - c0)
    if proc.returncode not in ok:
        sys.exit(f"{cmd[:3]} exited {proc.returncode}:\n{proc.stdout[-2000:]}\n{proc.stderr[-2000:]}")
    return elapsed


def cold(python: str, installer: str) -> tuple[float, Path]:
    tmp = Path(tempfile.mkdtemp(prefix=f"bench-install-{installer}-"))
    env = _env(tmp, FAIRNESS_PYTHON=python, FAIRNESS_INSTALLER=installer)
    return timed(["bash", str(SCRIPT)], env), tmp


def audit(python: Path, env: dict[str, str], tmp: Path) -> float:
    work = tmp / "workspace"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir()
    (tmp / "summary").write_text("")
    env = {**env, "GITHUB_STEP_SUMMARY": str(tmp / "summary"), "FAIRNESS_RECORDINGS": str(REC),
           "FAIRNESS_UPLOAD_ARTIFACT": "true", "GITHUB_JOB": "fairness"}
    return timed([str(python), str(ROOT / "entrypoint.py")], env, cwd=work, ok=(0, 1))  # SmolLM2 fails the gate


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--python", default=os.path.realpath(getattr(sys, "_base_executable", sys.executable)),
                    help="base interpreter, as actions/setup-python provides (default: this one's base)")
    args = ap.parse_args()
    load = os.getloadavg()[0]
    print(f"{os.cpu_count()} CPUs, load average {load:.1f}; base Python {args.python}")

    t_pip, tmp_pip = cold(args.python, "pip")
    print(f"{t_pip:6.1f} s  ({CPU[-1]:4.1f} s CPU)  cold install, pip (fallback): empty pip cache, fresh venv")
    shutil.rmtree(tmp_pip, ignore_errors=True)

    t_uv, tmp = cold(args.python, "auto")
    venv = tmp / "llm-fairness-check-venv"
    print(f"{t_uv:6.1f} s  ({CPU[-1]:4.1f} s CPU)  cold install, uv: empty caches, pinned uv fetched from the registry, fresh venv")

    size = sum(f.stat().st_size for f in venv.rglob("*") if f.is_file() and not f.is_symlink()) / 2**20
    archive = tmp / "cache.tzst"  # what actions/cache stores: tar with zstd
    env = _env(tmp, FAIRNESS_PYTHON=args.python)
    subprocess.run(["tar", "--zstd", "-cf", str(archive), "-C", str(tmp), venv.name], check=True, env=env)
    print(f"         venv {size:.0f} MiB, cache archive {archive.stat().st_size / 2**20:.0f} MiB")

    shutil.rmtree(venv)
    t_restore = timed(["tar", "--zstd", "-xf", str(archive), "-C", str(tmp)], env)
    print(f"{t_restore:6.1f} s  ({CPU[-1]:4.1f} s CPU)  warm restore: unpack the cached venv")
    t_hit = timed(["bash", str(SCRIPT)], {**env, "FAIRNESS_CACHE_HIT": "true"})
    print(f"{t_hit:6.1f} s  ({CPU[-1]:4.1f} s CPU)  install script on the cache hit (probe imports)")
    t_audit = audit(venv / "bin" / "python", env, tmp)
    print(f"{t_audit:6.1f} s  ({CPU[-1]:4.1f} s CPU)  audit of the committed recordings (entrypoint.py, default inputs)")
    print(f"load average now {os.getloadavg()[0]:.1f}")
    print(f"{t_restore + t_hit + t_audit:6.1f} s  ({sum(CPU[-3:]):4.1f} s CPU)  warm step: restore + cache-hit install + audit (goal < 10 s)")
    print(f"{t_uv + t_audit:6.1f} s  ({CPU[1] + CPU[-1]:4.1f} s CPU)  cold step: uv install + audit (install goal < 40 s)")
    shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
