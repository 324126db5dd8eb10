"""`ServeSettings`: the service's limits and bindings, from the environment.

Every limit follows `fairness._util.files.env_limit`: an environment variable overrides a
documented default, and anything but a positive whole number is one line and exit 2. The token
is read from FAIRNESS_SERVE_TOKEN only, never from argv (other users of the machine can read a
process's arguments).
"""

from __future__ import annotations

import os

from pydantic import SecretStr

from fairness._util.errors import FairnessError
from fairness._util.files import MiB, env_limit
from fairness._util.models import Frozen

TOKEN_ENV = "FAIRNESS_SERVE_TOKEN"
MIN_TOKEN_CHARS = 16
LOOPBACK = ("127.0.0.1", "::1", "localhost")
"""Hosts that only this machine can reach: the one place the service may run without a token."""

LIMITS: dict[str, tuple[str, int, str]] = {
    "max_upload_bytes": ("FAIRNESS_SERVE_MAX_UPLOAD_BYTES", 64 * MiB, "a positive whole number of bytes"),
    "max_unpacked_bytes": ("FAIRNESS_SERVE_MAX_UNPACKED_BYTES", 512 * MiB, "a positive whole number of bytes"),
    "max_entries": ("FAIRNESS_SERVE_MAX_ENTRIES", 1000, "a positive whole number of archive entries"),
    "upload_seconds": ("FAIRNESS_SERVE_UPLOAD_TIMEOUT_S", 120, "a positive whole number of seconds"),
    "queue_size": ("FAIRNESS_SERVE_QUEUE", 8, "a positive whole number of queued audits"),
    "workers": ("FAIRNESS_SERVE_WORKERS", 1, "a positive whole number of worker threads"),
    "retention_seconds": ("FAIRNESS_SERVE_RETENTION_S", 3600, "a positive whole number of seconds"),
    "keep_jobs": ("FAIRNESS_SERVE_KEEP_JOBS", 64, "a positive whole number of finished audits"),
}
"""field → (environment variable, default, what it must be)."""


class ServeSettings(Frozen):
    """How the service listens, who may call it and how much one upload and the queue may hold."""

    host: str = "127.0.0.1"
    """Address to listen on; anything but 127.0.0.1, ::1 or localhost needs a token."""
    port: int = 8000
    """TCP port (0: any free port, printed at start)."""
    token: SecretStr | None = None
    """Bearer token every request but `GET /v1/health` must send (`Authorization: Bearer …`); None: no auth."""
    max_upload_bytes: int = LIMITS["max_upload_bytes"][1]
    """Largest request body (the gzip'd archive) accepted, in bytes."""
    max_unpacked_bytes: int = LIMITS["max_unpacked_bytes"][1]
    """Largest decompressed tar stream (headers and contents) accepted, in bytes: a gzip bomb stops here."""
    max_entries: int = LIMITS["max_entries"][1]
    """Most entries (files and folders) one archive may hold."""
    upload_seconds: int = LIMITS["upload_seconds"][1]
    """Longest time the body may take to arrive: a slow upload cannot hold a place in the queue for long."""
    queue_size: int = LIMITS["queue_size"][1]
    """Most audits waiting for a worker or being uploaded; one more is 429."""
    workers: int = LIMITS["workers"][1]
    """Worker threads running audits."""
    retention_seconds: int = LIMITS["retention_seconds"][1]
    """How long a finished audit's results and files are kept."""
    keep_jobs: int = LIMITS["keep_jobs"][1]
    """Most finished audits kept at once (the oldest go first)."""

    @property
    def loopback(self) -> bool:
        return self.host in LOOPBACK

    @classmethod
    def from_env(cls, host: str = "127.0.0.1", port: int = 8000) -> ServeSettings:
        """The settings for `host:port`, every limit and the token from the environment; one line on a bad value."""
        limits = {field: env_limit(name, default, what) for field, (name, default, what) in LIMITS.items()}
        token = os.environ.get(TOKEN_ENV, "")
        if token and (len(token) < MIN_TOKEN_CHARS or any(c.isspace() for c in token)):
            raise FairnessError(f"{TOKEN_ENV} must be at least {MIN_TOKEN_CHARS} characters without spaces")
        settings = cls(host=host, port=port, token=SecretStr(token) if token else None, **limits)
        if settings.token is None and not settings.loopback:
            raise FairnessError(f"refusing to listen on `{host}` without a token: set {TOKEN_ENV} (clients send it as "
                                f"`Authorization: Bearer …`) or bind to 127.0.0.1")
        return settings
