"""One sticky pull-request comment per tag, updated in place on every run.

The comment is found by a hidden marker on its first line that carries a tag (default:
the job id), so reruns edit it instead of piling up new ones and two invocations on one
pull request keep separate comments. Only a comment written by the token's own identity
is ever updated: anyone can quote the marker, and editing their comment would fail (or,
with a maintainer's token, rewrite it).

Whose identity: `GET /user` names the owner of a personal access token, but refuses the
workflow's GITHUB_TOKEN (an installation token, 403), whose comments are authored by
`github-actions[bot]`; that is the fallback. A GitHub App token posts as `<slug>[bot]`,
which the `comment-author` input names.

A comment is a courtesy, never the verdict: missing permissions (forks get a read-only
token: 403/404) or any other API trouble is reported and skipped, and never fails the
check. Fork pull requests get their comment from a `workflow_run` workflow instead, which
reads the `pr-comment.json` the check leaves in its artifact (`post_from_artifact`).
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

from fairness._util.errors import FairnessError

MARKER = "<!-- llm-fairness-check -->"
"""The untagged marker of earlier versions; never matched now (it named no author or tag)."""
DEFAULT_AUTHOR = "github-actions[bot]"
"""Who GITHUB_TOKEN's comments are by; `GET /user` refuses that token."""
PAYLOAD = "pr-comment.json"
"""What the check leaves in its out-dir for a `workflow_run` workflow to post."""
_TAG = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$")
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


def check_tag(tag: str) -> str:
    """A tag goes into an HTML comment and an artifact name: letters, digits, `.`, `_`, `-`."""
    if not _TAG.match(tag):
        raise FairnessError(
            f"comment tag {tag!r} must be 1-100 letters, digits, `.`, `_` or `-`, starting with a letter or digit"
        )
    return tag


_LOGIN = re.compile(r"^[A-Za-z0-9](?:[A-Za-z0-9-]{0,38})(?:\[bot\])?$")
_REPOSITORY = re.compile(r"^[A-Za-z0-9][A-Za-z0-9-]{0,38}/[A-Za-z0-9._-]{1,100}$")
_SHA = re.compile(r"^(?:[0-9a-f]{40}|[0-9a-f]{64})$")
MAX_NUMBER = 2**31 - 1
"""GitHub issue and pull-request numbers are 32-bit."""


def check_login(login: str, what: str = "comment author") -> str:
    """A GitHub login (an App's is `<slug>[bot]`); empty means the token's own."""
    if login and not _LOGIN.match(login):
        raise FairnessError(f"{what} {login!r} is not a GitHub login (1-39 letters, digits or `-`, an App's ending in `[bot]`)")
    return login


def check_repository(repository: str, what: str = "repository") -> str:
    if not _REPOSITORY.match(repository):
        raise FairnessError(f"{what} {repository!r} is not OWNER/NAME")
    return repository


def check_pr_number(number: object, what: str = "pull request number") -> int:
    if not isinstance(number, int) or isinstance(number, bool) or not 1 <= number <= MAX_NUMBER:
        raise FairnessError(f"{what} {number!r} is not a pull request number (1 to {MAX_NUMBER:,})")
    return number


def check_sha(sha: str, what: str = "head sha") -> str:
    if sha and not _SHA.match(sha):
        raise FairnessError(f"{what} {sha!r} is not a full commit sha (40 or 64 lowercase hex digits)")
    return sha


def default_tag(env: Mapping[str, str], tag: str = "") -> str:
    """The given tag, else the job id (GITHUB_JOB), else `default`."""
    return check_tag(tag.strip() or env.get("GITHUB_JOB", "").strip() or "default")


def marker(tag: str) -> str:
    return f"<!-- llm-fairness-check tag={check_tag(tag)} -->"


def token_login(gh: GitHub) -> str:
    """The login the token comments as: `GET /user`, or github-actions[bot] where that is refused."""
    try:
        user, _ = gh.request("GET", f"{gh.api_url.rstrip('/')}/user")
    except CommentSkipped:  # 403/404: an installation token (GITHUB_TOKEN)
        return DEFAULT_AUTHOR
    except urllib.error.HTTPError as exc:
        if exc.code == 401:
            return DEFAULT_AUTHOR
        raise
    login = (user or {}).get("login") if isinstance(user, dict) else None
    return str(login) if login else DEFAULT_AUTHOR


def _is_ours(comment: Mapping[str, Any], mark: str, author: str) -> bool:
    """Our marker on the first line (a quote starts with `>`) and written by `author`."""
    login = str((comment.get("user") or {}).get("login") or "")
    first = (comment.get("body") or "").lstrip("\ufeff").split("\n", 1)[0].strip()
    return first == mark and login.casefold() == author.casefold()


def find_comment(gh: GitHub, number: int, tag: str, author: str) -> int | None:
    """The id of our comment with this tag on the PR, walking every page of comments."""
    mark = marker(tag)
    url: str | None = f"{gh.comments_url(number)}?per_page=100"
    while url:
        page, headers = gh.request("GET", url)
        for c in page or []:
            if _is_ours(c, mark, author):
                return int(c["id"])
        url = _next_link(headers, gh.api_url)
    return None


def comment_body(markdown: str, tag: str = "default") -> str:
    """The marker plus the markdown, cut to GitHub's comment limit at a line boundary."""
    body = f"{marker(tag)}\n{markdown.strip()}\n"
    if len(body) <= COMMENT_LIMIT:
        return body
    note = "\n\n_… truncated; the job summary and results.json have everything._\n"
    cut = body[: COMMENT_LIMIT - len(note)]
    return cut[: cut.rfind("\n") + 1 or len(cut)] + note


def _pull_request(event_path: str | None) -> dict[str, Any]:
    if not event_path:
        raise CommentSkipped("GITHUB_EVENT_PATH is not set")
    try:
        event = json.loads(Path(event_path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise CommentSkipped(f"cannot read the event payload: {exc}") from None
    pr = event.get("pull_request") if isinstance(event, dict) else None
    if not isinstance(pr, dict) or not isinstance(pr.get("number"), int):
        raise CommentSkipped("this run was not triggered by a pull request")
    return pr


def pr_number(event_path: str | None) -> int:
    """The pull request number of the triggering event (pull_request or pull_request_target)."""
    return int(_pull_request(event_path)["number"])


def client_from_env(env: Mapping[str, str], token: str | None) -> GitHub:
    repo = env.get("GITHUB_REPOSITORY")
    if not token:
        raise CommentSkipped("no github-token")
    if not repo:
        raise CommentSkipped("GITHUB_REPOSITORY is not set")
    return GitHub(env.get("GITHUB_API_URL") or "https://api.github.com", token, repo)


def _upsert(gh: GitHub, number: int, markdown: str, tag: str, author: str) -> str:
    body = {"body": comment_body(markdown, tag)}
    existing = find_comment(gh, number, tag, author or token_login(gh))
    if existing is None:
        gh.request("POST", gh.comments_url(number), body)
        return "created"
    gh.request("PATCH", f"{gh.api_url.rstrip('/')}/repos/{gh.repository}/issues/comments/{existing}", body)
    return "updated"


def upsert_comment(markdown: str, env: Mapping[str, str], token: str | None, tag: str = "", author: str = "") -> str:
    """Create or update the sticky comment with this tag; returns `created` or `updated`.

    `author`: the login whose comment may be updated (empty: the token's own, see module doc).
    Raises CommentSkipped when commenting is not possible here.
    """
    number = pr_number(env.get("GITHUB_EVENT_PATH"))
    gh = client_from_env(env, token)
    return _upsert(gh, number, markdown, default_tag(env, tag), author)


# -- fork pull requests: the workflow_run recipe ------------------------------------------


def write_payload(out_dir: Path, markdown: str, env: Mapping[str, str], tag: str) -> Path | None:
    """Leave the comment in the out-dir (and so in the artifact) when a pull request triggered the run.

    A fork's run cannot comment; a `workflow_run` workflow with a write token posts this later.
    """
    try:
        pr = _pull_request(env.get("GITHUB_EVENT_PATH"))
    except CommentSkipped:
        return None
    from fairness._util.files import write_atomic

    payload = {
        "pr": pr["number"],
        "head_sha": str((pr.get("head") or {}).get("sha") or env.get("GITHUB_SHA") or ""),
        "repository": env.get("GITHUB_REPOSITORY", ""),
        "tag": default_tag(env, tag),
        "body": markdown,
    }
    path = out_dir / PAYLOAD
    write_atomic(path, json.dumps(payload, ensure_ascii=False, indent=1) + "\n")
    return path


def read_payload(directory: Path) -> dict[str, Any]:
    """The `pr-comment.json` of a downloaded artifact, checked field by field (its content is untrusted)."""
    from fairness._util.io import load_json

    if directory.exists() and not directory.is_dir():
        raise FairnessError(f"--from-artifact `{directory}` is a file; pass the downloaded artifact's directory")
    path = directory / PAYLOAD
    data = load_json(path, what="artifact payload", missing=(
        f"{path} not found: was the check triggered by a pull request, and is this its downloaded artifact?"))
    if not isinstance(data, dict):
        raise FairnessError(f"{path}: expected a JSON object")
    for key, kind in (("pr", int), ("head_sha", str), ("tag", str), ("body", str)):
        if not isinstance(data.get(key), kind) or isinstance(data.get(key), bool):
            raise FairnessError(f"{path}: `{key}` is missing or not a {kind.__name__}")
    return data


def post_from_artifact(directory: Path, env: Mapping[str, str], token: str | None, *, pr: int | None = None,
                       head_sha: str = "", tag: str = "", author: str = "") -> tuple[str, int]:
    """Post or update the comment a pull-request run left in its artifact; returns (`created`|`updated`, PR).

    The artifact comes from an untrusted run, so the PR it names is only believed when it is
    the trusted `pr`, or when that PR's head commit is the trusted `head_sha` (the
    `workflow_run` event's; its `pull_requests` list is empty for forks). Raises FairnessError
    when neither holds, CommentSkipped when the token cannot comment.
    """
    if pr is not None:
        check_pr_number(pr, "--pr")
    check_sha(head_sha, "--head-sha")
    check_login(author, "--author")
    if tag:
        check_tag(tag)
    data = read_payload(directory)
    check_pr_number(data["pr"], "the artifact's `pr`")
    if data["tag"] and not tag:
        check_tag(data["tag"])
    if env.get("GITHUB_REPOSITORY"):
        check_repository(env["GITHUB_REPOSITORY"])
    if pr is not None and data["pr"] != pr:
        raise FairnessError(f"the artifact is for pull request #{data['pr']}, not #{pr}")
    if pr is None and not head_sha:
        raise FairnessError("name the pull request (--pr) or the run's head commit (--head-sha) to verify the artifact")
    gh = client_from_env(env, token)
    number = pr if pr is not None else data["pr"]
    if head_sha:
        pull, _ = gh.request("GET", f"{gh.api_url.rstrip('/')}/repos/{gh.repository}/pulls/{number}")
        actual = str(((pull or {}).get("head") or {}).get("sha") or "")
        if actual != head_sha:
            raise FairnessError(
                f"pull request #{number} is at {actual[:12] or '(unknown)'}, not at the run's head {head_sha[:12]}: "
                "refusing to post an artifact's comment on it"
            )
    return _upsert(gh, number, data["body"], check_tag(tag or data["tag"]), author), number
