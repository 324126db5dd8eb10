"""scripts/check-runner.sh: each failure is one line on stderr and exit 1, checked with stand-ins for
`nvidia-smi`, `docker`, `nvidia-ctk` and `llm-fairness-check` on PATH (this machine has no GPU)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
import yaml
from conftest import REPO

SCRIPT = REPO / "scripts" / "check-runner.sh"
SYSTEM = "/usr/bin:/bin"
GPU = "GPU 0: NVIDIA H200 (UUID: GPU-00000000-0000-0000-0000-000000000000)"
TOOLKIT_URL = "https://docs.nvidia.com/datacenter/cloud-native/container-toolkit/latest/install-guide.html"


def stand_in(bindir: Path, name: str, body: str) -> None:
    bindir.mkdir(exist_ok=True)
    path = bindir / name
    path.write_text(f"#!/bin/sh\n{body}\n")
    path.chmod(0o755)


@pytest.fixture
def bindir(tmp_path) -> Path:
    for tool in ("nvidia-smi", "docker", "nvidia-ctk", "llm-fairness-check"):
        if shutil.which(tool, path=SYSTEM):
            pytest.skip(f"{tool} is installed in {SYSTEM}; the stand-ins could not replace it")
    return tmp_path / "bin"


def healthy(bindir: Path, tmp_path: Path) -> None:
    """A runner that passes: a GPU, docker with the nvidia runtime, a CLI that generates a row."""
    stand_in(bindir, "nvidia-smi", f'[ "$1" = -L ] && echo "{GPU}"')
    stand_in(bindir, "docker", f'echo "$@" >> "{tmp_path}/docker.log"\n'
                               '[ "$1" = info ] && echo \'{"nvidia":{"path":"nvidia-container-runtime"},"runc":{}}\'\nexit 0')
    stand_in(bindir, "llm-fairness-check", f'echo "$@" >> "{tmp_path}/cli.log"')


def check(bindir: Path, *args: str, env: dict[str, str] | None = None, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", str(SCRIPT), *args], env={"PATH": f"{bindir}:{SYSTEM}", **(env or {})},
                          cwd=cwd or REPO, capture_output=True, text=True, check=False, timeout=60)


def test_without_nvidia_smi(bindir):
    proc = check(bindir)
    assert (proc.returncode, proc.stderr, proc.stdout) == (
        1, "check-runner: nvidia-smi not found: install the NVIDIA driver on this runner "
           "(https://docs.nvidia.com/datacenter/tesla/driver-installation-guide/)\n", "")


def test_on_this_machine_as_it_is():
    """No stand-ins: whatever this machine lacks first, one line and exit 1 (here: no nvidia-smi)."""
    proc = subprocess.run(["bash", str(SCRIPT)], cwd=REPO, capture_output=True, text=True, check=False, timeout=120)
    assert proc.returncode == 1 and len(proc.stderr.splitlines()) == 1 and proc.stderr.startswith("check-runner: ")
    if shutil.which("nvidia-smi") is None:
        assert proc.stderr.startswith("check-runner: nvidia-smi not found: ")


def test_no_gpu_visible(bindir):
    stand_in(bindir, "nvidia-smi", 'echo "No devices were found"; exit 6')
    proc = check(bindir)
    assert (proc.returncode, proc.stderr) == (
        1, "check-runner: nvidia-smi sees no GPU (nvidia-smi -L lists none): check the driver and that the GPU is "
           "given to this runner\n")


def test_no_docker(bindir):
    stand_in(bindir, "nvidia-smi", f'echo "{GPU}"')
    proc = check(bindir)
    assert (proc.returncode, proc.stderr) == (
        1, "check-runner: docker not found: the nightly's GPU job runs in a container; install Docker Engine and the "
           "NVIDIA Container Toolkit\n")


def test_no_container_toolkit(bindir):
    stand_in(bindir, "nvidia-smi", f'echo "{GPU}"')
    stand_in(bindir, "docker", """echo '{"io.containerd.runc.v2":{},"runc":{}}'""")
    proc = check(bindir)
    assert (proc.returncode, proc.stderr) == (
        1, "check-runner: the NVIDIA Container Toolkit is missing (docker info lists no nvidia runtime, no nvidia-ctk): "
           f"install it and run 'sudo nvidia-ctk runtime configure --runtime=docker' ({TOOLKIT_URL})\n")
    stand_in(bindir, "nvidia-ctk", 'echo "NVIDIA Container Toolkit CLI version 1.17.8"')
    stand_in(bindir, "llm-fairness-check", "exit 0")
    proc = check(bindir, "--min-free-gib", "0")  # the disk check has its own test; this machine's free space is not this one's
    assert proc.returncode == 0 and "check-runner: NVIDIA Container Toolkit CLI version 1.17.8\n" in proc.stdout


def test_too_little_disk(bindir, tmp_path):
    healthy(bindir, tmp_path)
    free = shutil.disk_usage(tmp_path).free // 2**30
    proc = check(bindir, "--min-free-gib", str(free + 1000), "--path", str(tmp_path))
    assert (proc.returncode, proc.stderr) == (
        1, f"check-runner: only {free} GiB free under '{tmp_path}'; the nightly needs at least {free + 1000} GiB "
           "(the live image, the model's weights, the vLLM venv)\n")
    proc = check(bindir, env={"FAIRNESS_MIN_FREE_GIB": str(free + 1000)}, cwd=tmp_path)
    assert proc.returncode == 1 and f"the nightly needs at least {free + 1000} GiB" in proc.stderr


def test_the_smoke_generation_fails(bindir, tmp_path):
    healthy(bindir, tmp_path)
    stand_in(bindir, "llm-fairness-check", '[ "$1" = models ] && exit 0\necho "error: CUDA is not available" >&2; exit 2')
    proc = check(bindir, "--min-free-gib", "0")
    line = proc.stderr
    assert proc.returncode == 1 and len(line.splitlines()) == 1
    assert line.startswith("check-runner: the smoke generation (one row, transformers on cuda) failed with exit 2: "
                           "error: CUDA is not available (all of it: ")


def test_the_smoke_generation_is_too_slow(bindir, tmp_path):
    healthy(bindir, tmp_path)
    stand_in(bindir, "llm-fairness-check", '[ "$1" = models ] && exit 0\nsleep 5')
    proc = check(bindir, "--min-free-gib", "0", env={"FAIRNESS_SMOKE_SECONDS": "1"})
    assert proc.returncode == 1
    assert proc.stderr.startswith("check-runner: the smoke generation (one row, transformers on cuda) took over 1 s (its output: ")


def test_no_cli_for_the_smoke(bindir, tmp_path):
    healthy(bindir, tmp_path)
    (bindir / "llm-fairness-check").unlink()
    proc = check(bindir, "--min-free-gib", "0")
    assert (proc.returncode, proc.stderr) == (
        1, "check-runner: llm-fairness-check not found for the smoke generation: run this inside the live image, or "
           "pass --image <the live image>\n")


def test_a_ready_runner_passes_and_generates_one_row_on_cuda(bindir, tmp_path):
    healthy(bindir, tmp_path)
    proc = check(bindir, "--min-free-gib", "0")
    assert (proc.returncode, proc.stderr) == (0, "")
    assert proc.stdout.splitlines()[0] == f"check-runner: 1 GPU(s): {GPU}"
    assert proc.stdout.splitlines()[-1] == "check-runner: one row generated on cuda within 30 s; the runner is ready"
    fetch, generate = (tmp_path / "cli.log").read_text().splitlines()
    assert fetch == "models fetch smollm2"
    assert generate.startswith("generate --live --no-progress --engine transformers --model smollm2 --device cuda "
                               "--max-rows 1 --out ")


def test_in_the_container_docker_is_not_asked(bindir, tmp_path):
    healthy(bindir, tmp_path)
    (bindir / "docker").unlink()
    proc = check(bindir, "--in-container", "--min-free-gib", "0")
    assert (proc.returncode, proc.stderr) == (0, "")


def test_with_an_image_the_smoke_runs_in_it_with_the_gpus(bindir, tmp_path):
    healthy(bindir, tmp_path)
    (bindir / "llm-fairness-check").unlink()
    image = "ghcr.io/fairness-cards/llm-fairness-check@sha256:" + "0" * 64
    proc = check(bindir, "--image", image, "--min-free-gib", "0")
    assert (proc.returncode, proc.stderr) == (0, "")
    run = (tmp_path / "docker.log").read_text().splitlines()[-1]
    assert run.startswith(f"run --rm --gpus all -e SMOKE_SECONDS=30 --entrypoint bash {image} -c llm-fairness-check models fetch")


@pytest.mark.parametrize(("args", "message"), [
    (["--min-free-gib", "lots"], "check-runner: the free-disk minimum must be a whole number of GiB, got 'lots'\n"),
    (["--image", "ghcr.io/o/r:v1-live"], "check-runner: --image must be pinned by digest (image@sha256:<64 hex>), "
                                         "got 'ghcr.io/o/r:v1-live'\n"),
    (["--frobnicate"], "check-runner: unknown argument '--frobnicate' (see the top of scripts/check-runner.sh)\n"),
])
def test_bad_arguments_are_exit_2(bindir, args, message):
    proc = check(bindir, *args)
    assert (proc.returncode, proc.stderr) == (2, message)


def test_the_nightly_checks_the_runner_first_in_the_gpu_job():
    job = yaml.safe_load((REPO / ".github" / "workflows" / "nightly-regenerate.yml").read_text())["jobs"]["generate"]
    checkout, first = job["steps"][:2]
    assert checkout["uses"].startswith("actions/checkout@")
    assert first["run"] == "bash scripts/check-runner.sh --in-container"
    assert job["permissions"] == {"contents": "read", "packages": "read"}
    assert job["container"]["credentials"] == {"username": "${{ github.actor }}", "password": "${{ secrets.GITHUB_TOKEN }}"}


def test_the_script_is_shellcheck_clean():
    shellcheck = shutil.which("shellcheck")
    if not shellcheck:
        pytest.skip("`shellcheck` is not installed (pip install '.[test]')")
    proc = subprocess.run([shellcheck, str(SCRIPT)], capture_output=True, text=True, check=False)
    assert (proc.returncode, proc.stdout) == (0, "")
