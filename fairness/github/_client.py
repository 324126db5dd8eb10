"""A minimal GitHub REST client that trusts nothing the server answers.

urllib only, so the Action needs no extra dependency. Every failure, whatever its kind
(unreachable host, HTTP error, an HTML error page where JSON was expected, a list where
an object was, a missing field, a pagination loop), becomes a `GitHubError`: one line
naming the endpoint and what is wrong, which the CLI prints and exits 2 on and the
Action turns into a warning where the call was only a courtesy (the PR comment).

Callers say what shape they need (`need_object`, `need_list`, `need_field`) rather than
indexing into the JSON, so an unexpected body can never raise a KeyError or
AttributeError past this boundary.

Pagination follows `Link: rel="next"` only on the API's own origin (the token goes with
each request), never to a page already read, and for at most `MAX_PAGES` pages; a
redirect to another origin is refused for the same reason.
"""

from __future__ import annotations

import http.client
import json
import re
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from fairness._util.errors import FairnessError

TIMEOUT = 30
MAX_PAGES = 100
"""At 100 items a page: 10,000 comments or pull requests, far beyond any real PR, and a
bound on a server whose `next` links never end."""
MAX_BODY = 16 << 20
"""Bytes read from one answer; GitHub's largest pages are well under a megabyte."""
DEFAULT_API = "https://api.github.com"


class GitHubError(FairnessError):
    """The GitHub API failed, refused, or answered something we cannot use."""

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


class GitHubRefused(GitHubError):
    """401/403/404: the token may not do this here (forks get a read-only token)."""


_KIND = {dict: "an object", list: "an array", str: "a string", int: "an integer", bool: "a boolean",
         float: "a number", type(None): "null"}


def kind(value: Any) -> str:
    """The JSON type of `value` with its article, for messages: `an object`, `a string`."""
    return _KIND.get(type(value), type(value).__name__)


def need_object(value: Any, where: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        got = "an empty answer" if value is None else kind(value)
        raise GitHubError(f"GitHub API {where}: expected a JSON object, got {got}")
    return value


def need_list(value: Any, where: str) -> list[Any]:
    if not isinstance(value, list):
        got = "an empty answer" if value is None else kind(value)
        raise GitHubError(f"GitHub API {where}: expected a JSON array, got {got}")
    return value


def need_item(items: list[Any], index: int, where: str) -> dict[str, Any]:
    """Item `index` of a list answer, which must be an object."""
    item = items[index]
    if not isinstance(item, dict):
        raise GitHubError(f"GitHub API {where}: item {index} is {kind(item)}, not an object")
    return item


def need_field(obj: dict[str, Any], path: str, want: type, where: str, *, item: int | None = None) -> Any:
    """`obj[a][b]…` for `path` = "a.b…", which must be of type `want` (a bool is not an int)."""
    value: Any = obj
    for key in path.split("."):
        value = value.get(key) if isinstance(value, dict) else None
    if not isinstance(value, want) or (want is int and isinstance(value, bool)):
        whose = "the answer" if item is None else f"item {item}"
        raise GitHubError(f"GitHub API {where}: {whose} has no `{path}` ({_KIND[want]})")
    return value


def _origin(url: str) -> tuple[str, str]:
    parts = urllib.parse.urlsplit(url)
    return parts.scheme.lower(), parts.netloc.lower()


def check_api_url(url: str, what: str = "GITHUB_API_URL") -> str:
    """An http(s) URL with a host and no credentials (the token is the only credential sent)."""
    try:
        parts = urllib.parse.urlsplit(url)
        ok = parts.scheme in ("http", "https") and bool(parts.hostname) and "@" not in parts.netloc
    except ValueError:
        ok = False
    if not ok:
        shown = re.sub(r"^([^/?#]*://)?[^/?#]*@", r"\1", url)
        raise FairnessError(f"{what} {shown!r} is not an http(s) URL")
    return url.rstrip("/")


class _SameOrigin(urllib.request.HTTPRedirectHandler):
    """Follow a redirect only on the origin we asked: the Authorization header goes with it."""

    def redirect_request(self, req, fp, code, msg, headers, newurl):
        if _origin(newurl) != _origin(req.full_url):
            return None  # urllib then raises the 3xx as an HTTPError
        return super().redirect_request(req, fp, code, msg, headers, newurl)


_OPENER = urllib.request.build_opener(_SameOrigin)


def _where(method: str, url: str) -> str:
    return f"{method} {urllib.parse.urlsplit(url).path}"


def _message(raw: bytes) -> str:
    """GitHub's own `message` from an error body, when it is JSON that has one."""
    try:
        data = json.loads(raw)
    except (ValueError, RecursionError):
        return ""
    text = data.get("message") if isinstance(data, dict) else None
    return " ".join(text.split())[:200] if isinstance(text, str) else ""


@dataclass(frozen=True)
class GitHub:
    """The API of one repository with one token; `request` and `pages` are the only ways out."""

    api_url: str
    token: str
    repository: str

    def url(self, path: str) -> str:
        """The API URL of `path` ("/repos/{repository}/…" is spelled out by the caller)."""
        return f"{self.api_url.rstrip('/')}{path}"

    def repo_url(self, path: str) -> str:
        return self.url(f"/repos/{self.repository}{path}")

    def request(self, method: str, url: str, body: dict[str, Any] | None = None) -> tuple[Any, Mapping[str, str]]:
        """The decoded JSON answer (None for an empty one) and the headers; GitHubError on anything else."""
        where = _where(method, url)
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(url, data=data, method=method, headers={
            "Accept": "application/vnd.github+json",
            "Authorization": f"Bearer {self.token}",
            "X-GitHub-Api-Version": "2022-11-28",
            "User-Agent": "llm-fairness-check",
            **({"Content-Type": "application/json"} if data else {}),
        })
        try:
            with _OPENER.open(req, timeout=TIMEOUT) as resp:
                raw = resp.read(MAX_BODY + 1)
                headers = resp.headers
        except urllib.error.HTTPError as exc:
            try:
                detail = _message(exc.read(1 << 16))
            except (OSError, http.client.HTTPException):
                detail = ""
            cls = GitHubRefused if exc.code in (401, 403, 404) else GitHubError
            raise cls(f"GitHub API {where} answered HTTP {exc.code}{': ' + detail if detail else ''}", exc.code) from None
        except urllib.error.URLError as exc:
            raise GitHubError(f"cannot reach the GitHub API at {self.api_url}: {exc.reason}") from None
        except (OSError, http.client.HTTPException) as exc:  # a timeout, a dropped connection
            raise GitHubError(f"GitHub API {where} failed: {exc or type(exc).__name__}") from None
        if len(raw) > MAX_BODY:
            raise GitHubError(f"GitHub API {where}: the answer is larger than {MAX_BODY >> 20} MiB")
        if not raw.strip():
            return None, headers
        try:
            return json.loads(raw), headers
        except (ValueError, RecursionError):
            ctype = headers.get("Content-Type") or "none"
            raise GitHubError(f"GitHub API {where}: the answer is not JSON (content-type {ctype})") from None

    def pages(self, url: str) -> Iterator[tuple[str, list[Any]]]:
        """(where, items) of each page of a list, following `Link: rel="next"` within bounds."""
        where = _where("GET", url)
        seen: set[str] = set()
        next_url: str | None = url
        while next_url is not None:
            if next_url in seen:
                parts = urllib.parse.urlsplit(next_url)
                raise GitHubError(f'GitHub API {where}: the `Link: rel="next"` header leads back to a page already '
                                  f"read ({parts.path}{'?' + parts.query if parts.query else ''})")
            if len(seen) == MAX_PAGES:
                raise GitHubError(f"GitHub API {where}: more than {MAX_PAGES} pages (100 items each); refusing to read on")
            seen.add(next_url)
            data, headers = self.request("GET", next_url)
            yield where, need_list(data, where)
            next_url = self._next_link(headers, where)

    def _next_link(self, headers: Mapping[str, str], where: str) -> str | None:
        for part in (headers.get("Link") or "").split(","):
            m = re.match(r'\s*<([^>]+)>\s*;\s*rel="next"', part)
            if m:
                nxt = m.group(1)
                if _origin(nxt) != _origin(self.api_url):
                    scheme, host = _origin(nxt)
                    raise GitHubError(f'GitHub API {where}: the `Link: rel="next"` header leads off the API host '
                                      f"({scheme}://{host.rpartition('@')[2]}); the token is not sent there")
                return nxt
        return None


def client_from_env(env: Mapping[str, str], token: str) -> GitHub:
    """The client for GITHUB_REPOSITORY at GITHUB_API_URL, each checked before any request."""
    from fairness.github._names import check_repository

    repository = env.get("GITHUB_REPOSITORY") or ""
    if not repository:
        raise FairnessError("GITHUB_REPOSITORY is not set")
    check_repository(repository, "GITHUB_REPOSITORY")
    return GitHub(check_api_url(env.get("GITHUB_API_URL") or DEFAULT_API), token, repository)
