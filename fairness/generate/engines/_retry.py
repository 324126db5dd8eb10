"""Retries with exponential backoff for hosted APIs.

The SDKs' own retries are switched off so that this policy is the only one that counts:
its attempts are bounded, its sleeps are injectable (tests run without waiting) and a
server's `Retry-After` wins over our own backoff.
"""

from __future__ import annotations

import email.utils
import random
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TypeVar

T = TypeVar("T")


@dataclass(frozen=True)
class Transient:
    """A failure worth retrying, with the wait the server asked for (seconds), if any."""

    retry_after: float | None = None


class RetriesExhausted(Exception):
    """Every attempt failed with a transient error; `last` is the final one."""

    def __init__(self, attempts: int, last: BaseException):
        super().__init__(f"{attempts} attempts failed")
        self.attempts = attempts
        self.last = last


class Aborted(Exception):
    """Another request of the same batch failed for good; stop retrying this one."""


@dataclass
class RetryPolicy:
    max_retries: int = 5
    base_delay: float = 1.0
    max_delay: float = 60.0
    max_retry_after: float = 300.0
    """Upper bound on a server's Retry-After, so a bogus header cannot stall a run for hours."""
    sleep: Callable[[float], object] = time.sleep
    rng: random.Random = field(default_factory=random.Random)

    def delay(self, attempt: int, retry_after: float | None) -> float:
        """Seconds before retry number `attempt + 1`: Retry-After, else capped 2^n backoff with jitter."""
        if retry_after is not None:
            return min(max(retry_after, 0.0), self.max_retry_after)
        ceiling = min(self.max_delay, self.base_delay * 2**attempt)
        return ceiling * (0.5 + 0.5 * self.rng.random())  # jitter spreads concurrent retries apart


def call_with_retries(
    fn: Callable[[], T],
    transient: Callable[[BaseException], Transient | None],
    policy: RetryPolicy,
    aborted: Callable[[], bool] = lambda: False,
) -> T:
    """Call `fn`; retry the failures `transient` recognises, re-raise all others at once."""
    for attempt in range(policy.max_retries + 1):
        if aborted():
            raise Aborted()
        try:
            return fn()
        except Exception as exc:
            verdict = transient(exc)
            if verdict is None:
                raise
            if attempt == policy.max_retries:
                raise RetriesExhausted(attempt + 1, exc) from exc
            policy.sleep(policy.delay(attempt, verdict.retry_after))
    raise AssertionError("unreachable")  # pragma: no cover


def parse_retry_after(headers: Mapping[str, str] | None) -> float | None:
    """Seconds from `retry-after-ms`, or `Retry-After` as seconds or an HTTP date."""
    if not headers:
        return None
    ms = headers.get("retry-after-ms")
    if ms:
        try:
            return float(ms) / 1000.0
        except ValueError:
            pass
    value = headers.get("retry-after")
    if not value:
        return None
    try:
        return float(value)
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())
