"""OpenAI chat completions, and any OpenAI-compatible server (vLLM, TGI, Ollama) via `base_url`."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Any
from urllib.parse import urlparse

from fairness._util.errors import FairnessError
from fairness.generate.engines import Completion
from fairness.generate.engines.hosted import HostedEngine, MalformedResponse, MissingContent, chat_messages
from fairness.suite._case import Case


class OpenAIEngine(HostedEngine):
    name = "openai"
    sdk = "openai"
    default_base_url = "https://api.openai.com/v1"

    def _make_client(self, api_key: str) -> Any:
        try:
            import openai
        except ImportError:
            raise FairnessError("the openai engine needs `openai`: pip install 'llm-fairness-check[hosted]'") from None
        self._error_types = (openai.APIStatusError, openai.APIConnectionError)
        # base_url is always explicit, so OPENAI_BASE_URL cannot silently redirect a run.
        return openai.OpenAI(api_key=api_key, base_url=self.base_url, max_retries=0, timeout=self.config.timeout_s)

    @property
    def max_tokens_field(self) -> str:
        """Current OpenAI models want `max_completion_tokens`; most compatible servers know `max_tokens`."""
        if self.config.max_tokens_field:
            return self.config.max_tokens_field
        official = urlparse(self.base_url).hostname == "api.openai.com"
        return "max_completion_tokens" if official else "max_tokens"

    def backend_info(self) -> dict[str, Any]:
        info = super().backend_info()
        server = self.server_info()
        return {**info, "server": server} if server else info

    def server_info(self) -> dict[str, str] | None:
        """The serving engine and its version, where an OpenAI-compatible server reports them (asked once)."""
        if not hasattr(self, "_server_info"):
            official = urlparse(self.base_url).hostname == "api.openai.com"
            self._server_info = None if official else probe_server(self.base_url)
        return self._server_info

    def _sampling_details(self) -> dict[str, Any]:
        return {
            "max_tokens_field": self.max_tokens_field,
            "seed": "per request (OpenAI documents seeded sampling as best-effort)",
        }

    def _request(self, case: Case, system_prompt: str) -> Completion:
        body: dict[str, Any] = {
            "model": self.model,
            "messages": chat_messages(system_prompt, case.prompt),
            self.max_tokens_field: case.params.max_new_tokens,
            "seed": case.seed,
        }
        for name in self.config.sampling:
            body[name] = getattr(case.params, name)
        return parse_chat_completion(self._client.chat.completions.create(**body))


def parse_chat_completion(res: Any) -> Completion:
    """Text, usage and finish reason; anything else in the body is ignored."""
    try:
        choice = res.choices[0]
        message = choice.message
        text = message.content if message.content is not None else getattr(message, "refusal", None)
        usage = res.usage
        prompt_tokens, completion_tokens = int(usage.prompt_tokens), int(usage.completion_tokens)
        reason = choice.finish_reason
    except (AttributeError, IndexError, KeyError, TypeError, ValueError) as exc:
        raise MalformedResponse(
            f"not a chat completion with choices[0].message and usage ({type(exc).__name__})"
        ) from None
    if text is None:
        raise MissingContent("choices[0].message.content is null or missing (and no refusal text)")
    if not isinstance(text, str):
        raise MalformedResponse("choices[0].message.content is not a string")
    return Completion(
        text=text.strip(),
        prompt_tokens=prompt_tokens,
        completion_tokens=completion_tokens,
        finish_reason="length" if reason == "length" else "stop",
    )


SERVER_PROBES = (("vllm", "/version"), ("text-generation-inference", "/info"), ("ollama", "/api/version"))
"""Version routes of common OpenAI-compatible servers, at the server root (beside `/v1`)."""


def probe_server(base_url: str, timeout: float = 5.0) -> dict[str, str] | None:
    """{name, version} of the server behind `base_url`, or None when no known route answers."""
    root = base_url.rstrip("/").removesuffix("/v1")
    for name, route in SERVER_PROBES:
        try:
            with urllib.request.urlopen(root + route, timeout=timeout) as resp:
                body = json.loads(resp.read())
        except (OSError, ValueError, urllib.error.URLError):
            continue
        if isinstance(body, dict) and isinstance(body.get("version"), str):
            return {"name": name, "version": body["version"]}
    return None
