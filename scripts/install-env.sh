#!/usr/bin/env bash
# Prepare the Python environment the Action runs in; writes `python=PATH` and `installed=true|false`
# to $GITHUB_OUTPUT.
#
# Every install is from a lock with hashes (--require-hashes, wheels only, so no unhashed build
# backend is fetched either): live mode runs beside the user's API keys, and a package swapped on
# the registry must fail the install rather than run. Replay installs requirements/replay.lock;
# live mode installs hosted.lock or live.lock instead (each the replay pins plus its extras); a replay
# that logs to MLflow (FAIRNESS_MLFLOW_TRACKING_URI set) installs tracking.lock (the replay pins plus
# mlflow-skinny, the tracking client). action.yml's runner check picks the same lock for the cache key.
# The package itself runs from the Action's checkout (entrypoint.py puts it first on sys.path),
# so a cached venv stays valid across Action releases that keep the lock.
# uv when it can be had (faster than pip on a cold runner: benchmarks/bench_install.py times
# both), itself installed from requirements/installer.lock; pip otherwise.
#
# Environment (the contract; action.yml sets the first four):
#   FAIRNESS_PYTHON       base interpreter (actions/setup-python's python-path)
#   FAIRNESS_ACTION_PATH  the Action's checkout (holds requirements/*.lock)
#   FAIRNESS_VENV         venv directory to create, or to reuse when FAIRNESS_CACHE_HIT=true
#   FAIRNESS_CACHE_HIT    `true` when actions/cache restored FAIRNESS_VENV
#   FAIRNESS_MODE, FAIRNESS_PROVIDER   live mode installs the hosted or live lock instead
#   FAIRNESS_MLFLOW_TRACKING_URI  non-empty in replay mode: install tracking.lock (MLflow's client too)
#   FAIRNESS_PREINSTALLED_PYTHON  an interpreter that already has the replay dependencies
#                         (a container job, a self-hosted runner, a test stand-in): used as is
#   FAIRNESS_INSTALLER    auto (default: uv, else pip), uv or pip
set -euo pipefail

die() { echo "::error title=llm-fairness-check: install::$1"; exit 2; }
emit() {  # PYTHON [installed]: `installed=true` tells action.yml to save the new venv to the cache
  if [ -n "${GITHUB_OUTPUT:-}" ]; then
    echo "python=$1" >> "$GITHUB_OUTPUT"
    echo "installed=${2:-false}" >> "$GITHUB_OUTPUT"
  fi
  echo "Python for the check: $1"
}
# the replay path's imports (and MLflow's client when the run logs to it); a venv that cannot is rebuilt
imports="numpy, scipy, pydantic, yaml"
if [ "${FAIRNESS_MODE:-replay}" != "live" ] && [ -n "${FAIRNESS_MLFLOW_TRACKING_URI:-}" ]; then
  imports="$imports, mlflow"
fi
probe() { "$1" -c "import $imports" >/dev/null 2>&1; }

if [ "${RUNNER_OS:-}" = "Windows" ]; then
  die "Windows runners are not supported; run the check on ubuntu-latest or macos-latest"
fi

if [ -n "${FAIRNESS_PREINSTALLED_PYTHON:-}" ]; then
  probe "$FAIRNESS_PREINSTALLED_PYTHON" \
    || die "FAIRNESS_PREINSTALLED_PYTHON=$FAIRNESS_PREINSTALLED_PYTHON cannot import what the check needs ($imports)"
  emit "$FAIRNESS_PREINSTALLED_PYTHON"
  exit 0
fi

: "${FAIRNESS_PYTHON:?FAIRNESS_PYTHON (the base interpreter) is not set}"
: "${FAIRNESS_ACTION_PATH:?FAIRNESS_ACTION_PATH is not set}"
venv="${FAIRNESS_VENV:-${RUNNER_TEMP:-/tmp}/llm-fairness-check-venv}"
mode="${FAIRNESS_MODE:-replay}"
lock="$FAIRNESS_ACTION_PATH/requirements/replay.lock"
if [ "$mode" = "live" ]; then
  case "${FAIRNESS_PROVIDER:-}" in
    openai|anthropic) lock="$FAIRNESS_ACTION_PATH/requirements/hosted.lock" ;;
    *) lock="$FAIRNESS_ACTION_PATH/requirements/live.lock" ;;
  esac
elif [ -n "${FAIRNESS_MLFLOW_TRACKING_URI:-}" ]; then
  lock="$FAIRNESS_ACTION_PATH/requirements/tracking.lock"
fi
[ -f "$lock" ] || die "the dependency lock $lock is missing from the Action's checkout"

if [ "${FAIRNESS_CACHE_HIT:-}" = "true" ] && [ "$mode" != "live" ]; then
  if probe "$venv/bin/python"; then
    echo "Reusing the cached environment $venv"
    emit "$venv/bin/python"
    exit 0
  fi
  echo "::warning title=llm-fairness-check::the cached environment is unusable; installing afresh"
fi

installer="${FAIRNESS_INSTALLER:-auto}"
uv=""
if [ "$installer" != "pip" ]; then
  if command -v uv >/dev/null 2>&1; then
    uv="$(command -v uv)"
  else
    target="${RUNNER_TEMP:-/tmp}/llm-fairness-check-uv"
    if "$FAIRNESS_PYTHON" -m pip install --disable-pip-version-check --quiet --target "$target" \
        --require-hashes --only-binary :all: --no-deps -r "$FAIRNESS_ACTION_PATH/requirements/installer.lock" \
        && [ -x "$target/bin/uv" ]; then
      uv="$target/bin/uv"
    elif [ "$installer" = "uv" ]; then
      die "could not install uv from the package registry"
    else
      echo "::notice title=llm-fairness-check::uv is not available here; installing with pip (slower)"
    fi
  fi
fi

rm -rf "$venv"
if [ -n "$uv" ]; then
  "$uv" --version
  "$uv" venv --quiet --python "$FAIRNESS_PYTHON" "$venv"
  "$uv" pip install --quiet --python "$venv/bin/python" --require-hashes --only-binary :all: -r "$lock"
else
  "$FAIRNESS_PYTHON" -m venv "$venv"
  "$venv/bin/python" -m pip install --disable-pip-version-check --quiet --require-hashes --only-binary :all: -r "$lock"
fi
# Import what an audit imports once, so the bytecode it compiles is saved in the cache with the
# venv (uv writes none; compiling all of scipy up front would cost ~6 s of CPU instead of ~1.5 s).
env -u PYTHONDONTWRITEBYTECODE "$venv/bin/python" -c 'import numpy, scipy.stats, pydantic, yaml' \
  || die "the new environment $venv cannot import the replay dependencies"
# numpy's and scipy's own test suites (~25 MB) are never imported: a smaller cache restores faster
if [ "$mode" != "live" ] && [ -d "$venv/lib" ]; then
  find "$venv/lib" -type d -name tests \( -path '*/site-packages/numpy/*' -o -path '*/site-packages/scipy/*' \) \
    -prune -exec rm -rf {} +
fi
emit "$venv/bin/python" true
