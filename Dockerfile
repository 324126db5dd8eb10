# llm-fairness-check in a container, for `docker run`: other CI systems, local use, and the live
# path on a GPU runner (a GitHub Actions job with `container:`). action.yml stays a composite
# action, so `uses:` never selects this image. Each `v1.x.y` tag pushes both targets to GHCR
# (.github/workflows/release.yml): ghcr.io/OWNER/llm-fairness-check:v1 and :v1-live.
#
#   docker build -t llm-fairness-check .                       # replay only (default target, small)
#   docker build --target live -t llm-fairness-check:live .    # + CUDA torch for live generation
#
#   docker run --rm --user "$(id -u):$(id -g)" -v "$PWD:/github/workspace" -w /github/workspace \
#     -e INPUT_RECORDINGS=recordings/my-suite/my-model -e INPUT_OUT-DIR=fairness-out llm-fairness-check
#
# Inputs are the Action's: INPUT_<NAME> (as GitHub passes them to a container; INPUT_OUT_DIR works
# too) or FAIRNESS_<NAME> (fairness/action/_env.py). The exit code is the gate's. No USER: GitHub
# runs job containers as root, and a USER would lose write access to the mounted workspace; run it
# locally with --user (above) so the outputs belong to you.
#
# Every dependency is installed from a lock with hashes, wheels only (requirements/*.lock): the
# live image is where the nightly job runs with its Hugging Face token. The package itself is
# built from the copied source, offline, with the locked setuptools.
#
# The base image is pinned by digest: python:3.12-slim as used in public Dockerfiles and build logs
# on 2026-11-30 (it could not be pulled where this was written). Dependabot (package-ecosystem:
# docker) proposes newer digests; to refresh by hand, take the index digest from
#   docker buildx imagetools inspect python:3.12-slim
FROM python:3.12-slim@sha256:401f6e1a67dad31a1bd78e9ad22d0ee0a3b52154e6bd30e90be696bb6a3d7461 AS base
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    FAIRNESS_ACTION_PATH=/opt/llm-fairness-check
WORKDIR /opt/llm-fairness-check
COPY requirements/replay.lock requirements/build.lock ./requirements/
RUN pip install --no-cache-dir --require-hashes --only-binary :all: -r requirements/replay.lock -r requirements/build.lock
COPY pyproject.toml README.md LICENSE entrypoint.py ./
COPY fairness ./fairness
RUN pip install --no-cache-dir --no-deps --no-index --no-build-isolation /opt/llm-fairness-check
WORKDIR /github/workspace

# Live generation with local models: torch (PyPI's Linux wheels are the CUDA builds, with the
# nvidia-* libraries as locked dependencies) + the transformers/llama.cpp and hosted-API extras,
# all from requirements/live.lock (the replay pins, the extras, setuptools).
FROM base AS live
COPY requirements/live.lock /opt/llm-fairness-check/requirements/
# A torch that the locked transformers refuses (it disables PyTorch below its minimum) fails the
# build here, not the nightly: the engine classes load and transformers sees torch.
# tests/test_locks.py runs this same command in a venv built from live.lock on the CPU.
RUN pip install --no-cache-dir --require-hashes --only-binary :all: -r /opt/llm-fairness-check/requirements/live.lock \
 && python -c "import torch, transformers; from transformers.utils import is_torch_available; assert is_torch_available(), f'transformers {transformers.__version__} does not accept torch {torch.__version__}'; from fairness.generate.engines.transformers import TransformersEngine; from fairness.generate.engines.llamacpp import LlamaCppEngine; print('live engines load: torch', torch.__version__, 'transformers', transformers.__version__)"
ENTRYPOINT ["python", "/opt/llm-fairness-check/entrypoint.py"]

# Default target (last stage): replay only, no model, no network.
FROM base AS replay
ENTRYPOINT ["python", "/opt/llm-fairness-check/entrypoint.py"]
