# llm-fairness-check: the audit CLI and the Action's entrypoint in a container.
#
#   docker build -t llm-fairness-check .                  # replay only (default, small)
#   docker build --target live -t llm-fairness-check:live .   # + CUDA torch for live generation
#
#   docker run --rm -v "$PWD:/work" -w /work \
#     -e FAIRNESS_RECORDINGS=recordings/... -e FAIRNESS_OUT_DIR=fairness-out llm-fairness-check
#
# Inputs are the FAIRNESS_* variables of fairness/_action.py; the exit code is the gate's.

ARG PYTHON_IMAGE=python:3.11-slim

FROM ${PYTHON_IMAGE} AS base
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    FAIRNESS_ACTION_PATH=/opt/llm-fairness-check
RUN groupadd --gid 10001 fairness \
    && useradd --create-home --uid 10001 --gid 10001 --shell /usr/sbin/nologin fairness
WORKDIR /opt/llm-fairness-check
COPY pyproject.toml entrypoint.py ./
COPY fairness ./fairness
RUN pip install --no-cache-dir "/opt/llm-fairness-check[sentiment]"

# Live generation with local models: CUDA torch + transformers/llama.cpp extras.
FROM base AS live
ARG TORCH_VERSION=2.5.1
ARG TORCH_INDEX_URL=https://download.pytorch.org/whl/cu124
RUN pip install --no-cache-dir --index-url "${TORCH_INDEX_URL}" "torch==${TORCH_VERSION}" \
    && pip install --no-cache-dir "/opt/llm-fairness-check[sentiment,live]"
USER 10001:10001
WORKDIR /work
ENTRYPOINT ["python", "/opt/llm-fairness-check/entrypoint.py"]

# Default target (last stage): replay only, no model, no network.
FROM base AS replay
USER 10001:10001
WORKDIR /work
ENTRYPOINT ["python", "/opt/llm-fairness-check/entrypoint.py"]
