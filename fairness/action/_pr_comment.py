"""One sticky pull-request comment, updated in place on every run.

The comment is found by a hidden marker, so reruns edit it instead of piling up new
ones. A comment is a courtesy, never the verdict: missing permissions (forks get a
read-only token: 403/404) or any other API trouble is reported and skipped, and never
fails the check.
"""

from __future__ import annotations

import json
import re
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

MARKER = "<!-- llm-fairness-check -->"
COMMENT_LIMIT = 65536
"""GitHub rejects a comment body longer than this many characters."""
_TIMEOUT = 30


class CommentSkipped(Exception):
    """Commenting is impossible here (no PR, no token, no permission): say why, go on."""


@dataclass(frozen=True)
class GitHub:
    """A minimal REST client: urllib only, so the Action needs no extra dependency."""

    api_url: str
    token: str
    repository: str

    def request(self, method: str, url: str, body: dict[str, Any] | None = None) -> tuple[Any, Mapping[str, str]]:
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(url, data=data, method=method, headers={
            "Accept": "application/vnd.github+json",
            "Authorization": f"Bearer {self.token}",
            "X-GitHub-Api-Version": "2022-11-28",
            "User-Agent": "llm-fairness-check",
            **({"Content-Type": "application/json"} if data else {}),
        })
        try:
            with urllib.request.urlopen(req, timeout=_TIMEOUT) as resp:
                raw = resp.read()
                return (json.loads(raw) if raw else None), resp.headers
        except urllib.error.HTTPError as exc:
            if exc.code in (403, 404):
                raise CommentSkipped(
                    f"the token may not write pull-request comments here (HTTP {exc.code}; forks get a read-only token)"
                ) from None
            raise

    def comments_url(self, number: int) -> str:
        return f"{self.api_url.rstrip('/')}/repos/{self.repository}/issues/{number}/comments"


def _next_link(headers: Mapping[str, str], api_url: str) -> str | None:
    """The rel="next" URL of a paginated response, only if on the API host (the token goes with it)."""
    for part in (headers.get("Link") or "").split(","):
        m = re.match(r'\s*<([^>]+)>\s*;\s*rel="next"', part)
        if m:
            nxt = m.group(1)
            return nxt if urllib.parse.urlsplit(nxt)[:2] == urllib.parse.urlsplit(api_url)[:2] else None
    return None


def find_comment(gh: GitHub, number: int) -> int | None:
    """The id of our marked comment on the PR, walking every page of comments."""
    url: str | None = f"{gh.comments_url(number)}?per_page=100"
    while url:
        page, headers = gh.request("GET", url)
        for c in page or []:
            if MARKER in (c.get("body") or ""):
                return int(c["id"])
        url = _next_link(headers, gh.api_url)
    return None


def comment_body(markdown: str) -> str:
    """The marker plus the markdown, cut to GitHub's comment limit at a line boundary."""
    body = f"{MARKER}\n{markdown.strip()}\n"
    if len(body) <= COMMENT_LIMIT:
        return body
    note = "\n\n_… truncated; the job summary and results.json have everything._\n"
    cut = body[: COMMENT_LIMIT - len(note)]
    return cut[: cut.rfind("\n") + 1 or len(cut)] + note


def pr_number(event_path: str | None) -> int:
    """The pull request number of the triggering event (pull_request or pull_request_target)."""
    if not event_path:
        raise CommentSkipped("GITHUB_EVENT_PATH is not set")
    try:
        event = json.loads(Path(event_path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise CommentSkipped(f"cannot read the event payload: {exc}") from None
    number = (event.get("pull_request") or {}).get("number")
    if not isinstance(number, int):
        raise CommentSkipped("this run was not triggered by a pull request")
    return number


def client_from_env(env: Mapping[str, str], token: str | None) -> GitHub:
    repo = env.get("GITHUB_REPOSITORY")
    if not token:
        raise CommentSkipped("no github-token")
    if not repo:
        raise CommentSkipped("GITHUB_REPOSITORY is not set")
    return GitHub(env.get("GITHUB_API_URL") or "https://api.github.com", token, repo)


def upsert_comment(markdown: str, env: Mapping[str, str], token: str | None) -> str:
    """Create or update the sticky comment; returns `created` or `updated`.

    Raises CommentSkipped when commenting is not possible here.
    """
    number = pr_number(env.get("GITHUB_EVENT_PATH"))
    gh = client_from_env(env, token)
    body = {"body": comment_body(markdown)}
    existing = find_comment(gh, number)
    if existing is None:
        gh.request("POST", gh.comments_url(number), body)
        return "created"
    gh.request("PATCH", f"{gh.api_url.rstrip('/')}/repos/{gh.repository}/issues/comments/{existing}", body)
    return "updated"
