"""Hosted chat APIs (OpenAI and OpenAI-compatible endpoints, Anthropic): what they share.

A hosted engine sends one request per grid row, `concurrency` at a time, retrying rate
limits, server errors and dropped connections with backoff. Credentials come from the
environment only, never from a file, and never appear in an error message. The SDKs are
imported lazily, so replay needs neither.
"""

from __future__ import annotations

import json
import os
import platform
import random
import re
import threading
from collections.abc import Callable
from concurrent.futures import FIRST_EXCEPTION, Future, ThreadPoolExecutor, wait
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal
from urllib.parse import urlparse

from pydantic import Field, ValidationError

from fairness._util.errors import FairnessError, validation_message
from fairness._util.models import Frozen
from fairness._util.yaml_io import read_yaml
from fairness.generate.engines import Completion
from fairness.generate.engines._retry import (
    Aborted,
    RetriesExhausted,
    RetryPolicy,
    Transient,
    call_with_retries,
    parse_retry_after,
)
from fairness.recordings._store import ModelInfo
from fairness.suite._case import Case, SamplingParams

if TYPE_CHECKING:
    from fairness.generate._options import EngineOptions

HOSTED_ENGINES = ("openai", "anthropic")
KEY_ENV = {"openai": "OPENAI_API_KEY", "anthropic": "ANTHROPIC_API_KEY"}
SamplingName = Literal["temperature", "top_p"]
_SAMPLING_DEFAULT: tuple[SamplingName, ...] = ("temperature", "top_p")


class ProviderError(FairnessError):
    """A hosted request failed for good; rows already written stay on disk and a rerun resumes."""


class MalformedResponse(Exception):
    """The endpoint answered 2xx with a body that is not the expected wire format."""


class MissingContent(MalformedResponse):
    """A well-formed answer without text (`content: null`, no text block): retried, then an
    error. Never recorded as an empty output, which would read as the model saying nothing."""


# -- provider config ----------------------------------------------------------------------


class Price(Frozen):
    """USD per million tokens."""

    input: float = Field(ge=0)
    output: float = Field(ge=0)


class ProviderConfig(Frozen):
    """Settings of a hosted run (`--provider-config FILE`); CLI flags override them."""

    provider: Literal["openai", "anthropic"] | None = None
    model: str | None = None
    base_url: str | None = None
    """Any OpenAI-compatible server (vLLM, TGI, Ollama …) or an Anthropic-compatible proxy."""
    api_key_env: str | None = Field(default=None, pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")
    """Name of the environment variable holding the key (default OPENAI_API_KEY / ANTHROPIC_API_KEY)."""
    concurrency: int = Field(default=4, ge=1, le=64)
    max_requests_per_run: int | None = Field(default=None, ge=1)
    max_retries: int = Field(default=5, ge=0, le=20)
    backoff_base_s: float = Field(default=1.0, gt=0, le=60)
    backoff_max_s: float = Field(default=60.0, gt=0, le=600)
    timeout_s: float = Field(default=120.0, gt=0, le=3600)
    sampling: list[SamplingName] = Field(default_factory=lambda: list(_SAMPLING_DEFAULT))
    """Which of the suite's sampling parameters to send; some models reject one or both."""
    max_tokens_field: Literal["max_tokens", "max_completion_tokens"] | None = None
    """OpenAI only; default `max_completion_tokens` for api.openai.com, `max_tokens` for a base_url."""
    prices: dict[str, Price] = Field(default_factory=dict)
    """Overrides of fairness/generate/prices.yaml for `dry-run`, by model name."""


_CREDENTIAL_NAME = re.compile(r"key|token|secret|passw|credential|auth|bearer|cookie|session", re.I)
_CREDENTIAL_VALUE = re.compile(r"\bsk-[A-Za-z0-9_-]{8,}|\bBearer\s+\S+", re.I)
_CREDENTIALS_ONLY_ENV = "credentials come from the environment only"


def load_provider_config(path: str | Path | None) -> ProviderConfig:
    """Read and validate a provider YAML, refusing anything that looks like a credential."""
    if path is None:
        return ProviderConfig()
    data = read_yaml(Path(path), "provider config")
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise FairnessError(f"`{path}`: a provider config must be a YAML mapping")
    _refuse_credentials(data, str(path))
    try:
        return ProviderConfig.model_validate(data)
    except ValidationError as err:
        raise FairnessError(validation_message(err, f"provider config `{path}`", ProviderConfig)) from None


def _refuse_credentials(data: dict, source: str) -> None:
    """Keys are refused by name and values by shape; the offending value is never echoed."""
    known = set(ProviderConfig.model_fields) | set(Price.model_fields)
    for path, key, value in _walk(data):
        if key is not None and key not in known and _CREDENTIAL_NAME.search(key):
            raise FairnessError(f"`{source}`: key `{path}` looks like a credential; {_CREDENTIALS_ONLY_ENV}")
        if isinstance(value, str) and _CREDENTIAL_VALUE.search(value):
            raise FairnessError(f"`{source}`: `{path}` holds what looks like an API key; {_CREDENTIALS_ONLY_ENV}")
    refuse_url_credentials(data.get("base_url"), f"`{source}`: `base_url`")


def refuse_url_credentials(url: object, where: str) -> None:
    """A URL with a user, password or key in it is refused: credentials come from the environment only."""
    if isinstance(url, str):
        parsed = urlparse(url)
        if parsed.username or parsed.password or re.search(r"(key|token|secret)=", parsed.query, re.I):
            raise FairnessError(f"{where} embeds credentials; {_CREDENTIALS_ONLY_ENV}")


def refuse_secret_values(data: dict, source: str) -> None:
    """Any string value that looks like an API key or bearer token is refused (never echoed)."""
    for path, _key, value in _walk(data):
        if isinstance(value, str) and _CREDENTIAL_VALUE.search(value):
            raise FairnessError(f"{source}: `{path}` holds what looks like an API key; {_CREDENTIALS_ONLY_ENV}")


def _walk(node: Any, prefix: str = "", in_prices: bool = False):
    """(dotted path, key or None, value) for every entry; model names under `prices` are not keys to vet."""
    if isinstance(node, dict):
        for k, v in node.items():
            key = str(k)
            path = f"{prefix}.{key}" if prefix else key
            yield path, None if in_prices else key, v
            yield from _walk(v, path, in_prices=(path == "prices"))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield f"{prefix}[{i}]", None, v
            yield from _walk(v, f"{prefix}[{i}]")


def effective_config(args: EngineOptions) -> ProviderConfig:
    """The provider config with CLI flags applied; a config naming another provider or model is refused."""
    cfg = load_provider_config(args.provider_config)
    for field, flag, given in (("provider", "--engine", args.engine), ("model", "--model", args.model)):
        configured = getattr(cfg, field)
        if configured is not None and configured != given:
            raise FairnessError(f"--provider-config says {field} `{configured}` but {flag} is `{given}`")
    overrides = {
        "base_url": args.base_url,
        "concurrency": args.concurrency,
        "max_requests_per_run": args.max_requests,
    }
    overrides = {k: v for k, v in overrides.items() if v is not None}
    refuse_url_credentials(overrides.get("base_url"), "--base-url")
    try:
        return ProviderConfig.model_validate({**cfg.model_dump(), **overrides})
    except ValidationError as err:
        raise FairnessError(validation_message(err, "provider settings", ProviderConfig)) from None


def resolve_api_key(provider: str, cfg: ProviderConfig) -> str | None:
    """The key from the environment; a self-hosted `base_url` may go without one."""
    env = cfg.api_key_env or KEY_ENV[provider]
    key = os.environ.get(env, "").strip()
    if key:
        return key
    if cfg.base_url:
        return None
    raise FairnessError(f"set {env} in the environment for the {provider} engine ({_CREDENTIALS_ONLY_ENV})")


# -- the engine -----------------------------------------------------------------------------


def chat_messages(system_prompt: str, prompt: str) -> list[dict[str, str]]:
    return ([{"role": "system", "content": system_prompt}] if system_prompt else []) + [
        {"role": "user", "content": prompt}
    ]


class HostedEngine:
    """Bounded-concurrency, retrying, capped requests; subclasses speak one provider's wire format."""

    name = "hosted"
    sdk = ""
    default_base_url = ""
    independent_rows = True
    """Each row is its own request: outputs do not depend on batch composition, so a driver
    may send only a batch's pending rows."""

    def __init__(
        self,
        model: str,
        config: ProviderConfig,
        api_key: str | None,
        *,
        sleep: Callable[[float], object] | None = None,
        rng: random.Random | None = None,
    ):
        self.model = model
        self.config = config
        self._secret = api_key
        self._stop = threading.Event()
        self.retry = RetryPolicy(
            max_retries=config.max_retries,
            base_delay=config.backoff_base_s,
            max_delay=config.backoff_max_s,
            sleep=sleep or self._stop.wait,  # waiting on the event lets a failed batch cut sleeps short
            rng=rng or random.Random(),
        )
        self.requests = 0
        self.cap_reached = False
        self._error_types: tuple[type[BaseException], type[BaseException]] = (OSError, OSError)
        self._client = self._make_client(api_key or "not-needed")
        self._pool = ThreadPoolExecutor(max_workers=config.concurrency, thread_name_prefix=f"{self.name}-request")

    # -- provider hooks ------------------------------------------------------------------
    def _make_client(self, api_key: str) -> Any:
        """Build the SDK client (SDK retries off) and set `_error_types`."""
        raise NotImplementedError

    def _request(self, case: Case, system_prompt: str) -> Completion:
        """One request, no retries; raises SDK errors or `MalformedResponse`."""
        raise NotImplementedError

    def _sampling_details(self) -> dict[str, Any]:
        return {}

    # -- Engine protocol -----------------------------------------------------------------
    @property
    def base_url(self) -> str:
        return self.config.base_url or self.default_base_url

    def backend_info(self) -> dict[str, Any]:
        return {
            "engine": self.name,
            "versions": {self.sdk: _version(self.sdk), "python": platform.python_version()},
            "dtype": "unknown (hosted)",
            "device": f"hosted: {urlparse(self.base_url).netloc or self.base_url}",
            "details": {
                "base_url": self.base_url,
                "api_model": self.model,
                "concurrency": self.config.concurrency,
                "max_retries": self.config.max_retries,
                "max_requests_per_run": self.config.max_requests_per_run,
                "authenticated": self._secret is not None,
            },
        }

    def effective_sampling(self, params: SamplingParams) -> dict[str, Any]:
        sent = set(self.config.sampling)
        return {
            "temperature": params.temperature if "temperature" in sent else None,
            "top_p": params.top_p if "top_p" in sent else None,
            "max_new_tokens": params.max_new_tokens,
            "sent": sorted(sent),
            "note": "parameters not sent (None) take the provider's defaults",
            **self._sampling_details(),
        }

    def batch_plan(self) -> dict[str, Any]:
        return {
            "kind": "concurrent requests",
            "batch_size": self.config.concurrency,
            "order": "grid",
            "note": "one request per row; batches only bound concurrency and do not change outputs",
        }

    def plan(self, cases: list[Case]) -> list[list[Case]]:
        n = self.config.concurrency
        return [cases[i : i + n] for i in range(0, len(cases), n)]

    def generate(self, batch: list[Case], system_prompt: str) -> list[Completion]:
        """Completions in batch order. Past `max_requests_per_run` only a prefix (possibly none)
        is requested and returned; the driver records that prefix and the run ends incomplete."""
        todo = self._admit(batch)
        if not todo:
            return []
        self._stop.clear()
        futures = [self._pool.submit(self._call, case, system_prompt) for case in todo]
        wait(futures, return_when=FIRST_EXCEPTION)
        if any(f.done() and f.exception() is not None for f in futures):
            self._stop.set()  # siblings stop retrying and cut their sleeps short
            for f in futures:
                f.cancel()
            wait(futures)
            raise self._failure(todo, futures)
        return [f.result() for f in futures]

    def close(self) -> None:
        self._stop.set()
        self._pool.shutdown(wait=True, cancel_futures=True)
        close = getattr(self._client, "close", None)
        if close is not None:
            close()

    # -- internals -----------------------------------------------------------------------
    def _admit(self, batch: list[Case]) -> list[Case]:
        cap = self.config.max_requests_per_run
        todo = batch if cap is None else batch[: max(0, cap - self.requests)]
        if len(todo) < len(batch):
            self.cap_reached = True
        self.requests += len(todo)
        return todo

    def _call(self, case: Case, system_prompt: str) -> Completion:
        return call_with_retries(
            lambda: self._request_once(case, system_prompt), self._transient, self.retry, aborted=self._stop.is_set
        )

    def _request_once(self, case: Case, system_prompt: str) -> Completion:
        try:
            return self._request(case, system_prompt)
        except json.JSONDecodeError:  # the SDKs let a 2xx body that is not JSON escape as this
            raise MalformedResponse("the body is not valid JSON") from None

    def _transient(self, exc: BaseException) -> Transient | None:
        """429, 408, 409 and 5xx answers and connection failures are worth another try."""
        status_error, connection_error = self._error_types
        if isinstance(exc, (connection_error, MissingContent)):
            return Transient()
        status = getattr(exc, "status_code", None)
        if isinstance(exc, status_error) and isinstance(status, int) and (status in (408, 409, 429) or status >= 500):
            response = getattr(exc, "response", None)
            return Transient(parse_retry_after(getattr(response, "headers", None)))
        return None

    def _failure(self, todo: list[Case], futures: list[Future]) -> BaseException:
        """The first real failure in batch order, as a one-line, key-free error."""
        for case, f in zip(todo, futures, strict=True):
            exc = None if f.cancelled() else f.exception()
            if exc is None or isinstance(exc, Aborted):
                continue
            return self._explain(case, exc)
        return ProviderError(f"{self.name}: a request was aborted")  # pragma: no cover

    def _explain(self, case: Case, exc: BaseException) -> BaseException:
        resume = "rows already recorded stay on disk; rerun the same command to resume"
        where = f"{self.name} ({self.model}) row `{case.row_id}`"
        if isinstance(exc, RetriesExhausted):
            attempts = f"{exc.attempts} attempt{'s' if exc.attempts != 1 else ''}"
            text = f"{where} failed after {attempts} ({self._describe(exc.last)}); {resume}"
        elif isinstance(exc, MalformedResponse):
            text = f"{where}: malformed response from {self.base_url}: {exc}; {resume}"
        elif isinstance(exc, self._error_types) or _is_sdk_error(exc, self.sdk):
            text = f"{where}: {self._describe(exc)}{self._hint(exc)}; {resume}"
        else:
            return exc  # a bug, not a provider failure: keep the traceback
        return ProviderError(self._mask(text))

    def _describe(self, exc: BaseException) -> str:
        status = getattr(exc, "status_code", None)
        message = " ".join(str(getattr(exc, "message", None) or exc).split())
        if len(message) > 300:
            message = message[:300] + "…"
        if isinstance(exc, self._error_types[1]):
            return f"connection error: {message}"
        return f"HTTP {status}: {message}" if status else f"{type(exc).__name__}: {message}"

    def _hint(self, exc: BaseException) -> str:
        status = getattr(exc, "status_code", None)
        if status in (401, 403):
            return f" (check {self.config.api_key_env or KEY_ENV[self.name]})"
        if status in (400, 422):
            return (
                " (if the model rejects a sampling parameter, "
                "list the ones it accepts under `sampling:` in --provider-config)"
            )
        return ""

    def _mask(self, text: str) -> str:
        if self._secret:
            text = text.replace(self._secret, "***")
        return _CREDENTIAL_VALUE.sub("***", text)


def _is_sdk_error(exc: BaseException, sdk: str) -> bool:
    return type(exc).__module__.split(".")[0] == sdk


def _version(package: str) -> str:
    try:
        return version(package)
    except PackageNotFoundError:  # pragma: no cover
        return "unknown"


# -- construction ----------------------------------------------------------------------------


def hosted_model_id(args: EngineOptions) -> str:
    """The id in content keys: `--model-id`, else the provider's model name."""
    return args.model_id or args.model


def hosted_model_info(args: EngineOptions, base_url: str) -> ModelInfo:
    revision = args.revision
    served = f"; revision {revision} as the server was started with (e.g. `vllm serve --revision`)" if revision else ""
    return ModelInfo(
        id=hosted_model_id(args),
        source=f"{args.engine} API `{args.model}` at {base_url}{served}",
        revision=revision,
        note=(
            "Served by a hosted API: the provider may change the model behind this name (prefer a dated "
            "snapshot), and seeds are best-effort (OpenAI) or not supported (Anthropic)."
        ),
    )
