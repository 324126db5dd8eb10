"""Anthropic messages API.

Anthropic has no seed parameter: the suite's seeds label independent samples, and a rerun
does not reproduce them. The API version the current SDK sends (2026-10-21) rejects
temperature and top_p, so when the suite's sampling is sent the request pins the version
that still accepts it.
"""

from __future__ import annotations

from typing import Any

from fairness._util.errors import FairnessError
from fairness.generate.engines import Completion
from fairness.generate.engines.hosted import HostedEngine, MalformedResponse, MissingContent
from fairness.suite._case import Case

SAMPLING_API_VERSION = "2023-06-01"
LENGTH_REASONS = ("max_tokens", "model_context_window_exceeded")


class AnthropicEngine(HostedEngine):
    name = "anthropic"
    sdk = "anthropic"
    default_base_url = "https://api.anthropic.com"

    def _make_client(self, api_key: str) -> Any:
        try:
            import anthropic
        except ImportError:
            raise FairnessError(
                "the anthropic engine needs `anthropic`: pip install 'llm-fairness-check[hosted]'"
            ) from None
        self._error_types = (anthropic.APIStatusError, anthropic.APIConnectionError)
        return anthropic.Anthropic(
            api_key=api_key, base_url=self.base_url, max_retries=0, timeout=self.config.timeout_s
        )

    @property
    def api_version(self) -> str | None:
        """The pinned `anthropic-version`, or None for the SDK's default."""
        return SAMPLING_API_VERSION if self.config.sampling else None

    def backend_info(self) -> dict[str, Any]:
        info = super().backend_info()
        info["details"]["anthropic_version"] = self.api_version or "SDK default"
        return info

    def _sampling_details(self) -> dict[str, Any]:
        return {"seed": None, "seed_note": "Anthropic has no seed parameter: seeds label independent samples only"}

    def _request(self, case: Case, system_prompt: str) -> Completion:
        kwargs: dict[str, Any] = {
            "model": self.model,
            "max_tokens": case.params.max_new_tokens,
            "messages": [{"role": "user", "content": case.prompt}],
        }
        if system_prompt:
            kwargs["system"] = system_prompt
        if self.config.sampling:
            kwargs["extra_body"] = {name: getattr(case.params, name) for name in self.config.sampling}
            kwargs["extra_headers"] = {"anthropic-version": SAMPLING_API_VERSION}
        return parse_message(self._client.messages.create(**kwargs))


def parse_message(res: Any) -> Completion:
    """The text blocks joined, usage and stop reason (`max_tokens` → `length`)."""
    try:
        blocks = list(res.content or [])
        texts = [b.text for b in blocks if getattr(b, "type", None) == "text"]
        text = "".join(texts) if all(isinstance(t, str) for t in texts) else None
        usage = res.usage
        prompt_tokens, completion_tokens = int(usage.input_tokens), int(usage.output_tokens)
        reason = res.stop_reason
    except (AttributeError, KeyError, TypeError, ValueError) as exc:
        raise MalformedResponse(f"not a message with content blocks and usage ({type(exc).__name__})") from None
    if text is None:
        raise MalformedResponse("a text block's `text` is not a string")
    if not texts:
        raise MissingContent("the message has no text content block")
    return Completion(
        text=text.strip(),
        prompt_tokens=prompt_tokens,
        completion_tokens=completion_tokens,
        finish_reason="length" if reason in LENGTH_REASONS else "stop",
    )
