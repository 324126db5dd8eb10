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
token: 403/404) raise `CommentSkipped`, any other API trouble a `GitHubError`, and the
Action reports both after the verdict without changing it. Fork pull requests get their
comment from a `workflow_run` workflow instead, which reads the `pr-comment.json` the
check leaves in its artifact (`post_from_artifact`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from fairness._util.errors import FairnessError
from fairness.github._client import (
    DEFAULT_API,
    GitHub,
    GitHubRefused,
    check_api_url,
    need_field,
    need_item,
    need_object,
)
from fairness.github._names import check_login, check_pr_number, check_repository, check_sha, check_tag, default_tag

MARKER = "<!-- llm-fairness-check -->"
"""The untagged marker of earlier versions; never matched now (it named no author or tag)."""
DEFAULT_AUTHOR = "github-actions[bot]"
"""Who GITHUB_TOKEN's comments are by; `GET /user` refuses that token."""
PAYLOAD = "pr-comment.json"
"""What the check leaves in its out-dir for a `workflow_run` workflow to post."""
COMMENT_LIMIT = 65536
"""GitHub rejects a comment body longer than this many characters."""


class CommentSkipped(Exception):
    """Commenting is impossible here (no PR, no token, no permission): say why, go on."""


def _refused(exc: GitHubRefused) -> CommentSkipped:
    return CommentSkipped(
        f"the token may not write pull-request comments here (HTTP {exc.status}; forks get a read-only token)")


def marker(tag: str) -> str:
    return f"<!-- llm-fairness-check tag={check_tag(tag)} -->"


def token_login(gh: GitHub) -> str:
    """The login the token comments as: `GET /user`, or github-actions[bot] where that is refused."""
    url = gh.url("/user")
    try:
        user, _ = gh.request("GET", url)
    except GitHubRefused:  # 401/403/404: an installation token (GITHUB_TOKEN)
        return DEFAULT_AUTHOR
    return str(need_field(need_object(user, "GET /user"), "login", str, "GET /user"))


def _is_ours(comment: Mapping[str, Any], mark: str, author: str) -> bool:
    """Our marker on the first line (a quote starts with `>`) and written by `author`."""
    user = comment.get("user")
    login = user.get("login") if isinstance(user, dict) else None
    body = comment.get("body")
    first = body.lstrip("\ufeff").split("\n", 1)[0].strip() if isinstance(body, str) else ""
    return first == mark and isinstance(login, str) and login.casefold() == author.casefold()


def find_comment(gh: GitHub, number: int, tag: str, author: str) -> int | None:
    """The id of our comment with this tag on the PR, walking every page of comments."""
    mark = marker(tag)
    for where, page in gh.pages(f"{gh.repo_url(f'/issues/{number}/comments')}?per_page=100"):
        for i in range(len(page)):
            comment = need_item(page, i, where)
            cid = need_field(comment, "id", int, where, item=i)
            if _is_ours(comment, mark, author):
                return int(cid)
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
    except (OSError, ValueError, RecursionError) as exc:
        raise CommentSkipped(f"cannot read the event payload: {exc}") from None
    pr = event.get("pull_request") if isinstance(event, dict) else None
    if not isinstance(pr, dict) or not isinstance(pr.get("number"), int) or isinstance(pr.get("number"), bool):
        raise CommentSkipped("this run was not triggered by a pull request")
    return pr


def pr_number(event_path: str | None) -> int:
    """The pull request number of the triggering event (pull_request or pull_request_target)."""
    return int(_pull_request(event_path)["number"])


def client_from_env(env: Mapping[str, str], token: str | None) -> GitHub:
    """The client, or CommentSkipped where this run has no token or no repository to comment with."""
    repo = env.get("GITHUB_REPOSITORY")
    if not token:
        raise CommentSkipped("no github-token")
    if not repo:
        raise CommentSkipped("GITHUB_REPOSITORY is not set")
    check_repository(repo, "GITHUB_REPOSITORY")
    return GitHub(check_api_url(env.get("GITHUB_API_URL") or DEFAULT_API), token, repo)


def _upsert(gh: GitHub, number: int, markdown: str, tag: str, author: str) -> str:
    body = {"body": comment_body(markdown, tag)}
    try:
        existing = find_comment(gh, number, tag, author or token_login(gh))
        if existing is None:
            url, method, what = gh.repo_url(f"/issues/{number}/comments"), "POST", "created"
        else:
            url, method, what = gh.repo_url(f"/issues/comments/{existing}"), "PATCH", "updated"
        answer, _ = gh.request(method, url, body)
    except GitHubRefused as exc:
        raise _refused(exc) from None
    where = f"{method} {url[len(gh.api_url.rstrip('/')):]}"
    need_field(need_object(answer, where), "id", int, where)
    return what


def upsert_comment(markdown: str, env: Mapping[str, str], token: str | None, tag: str = "", author: str = "") -> str:
    """Create or update the sticky comment with this tag; returns `created` or `updated`.

    `author`: the login whose comment may be updated (empty: the token's own, see module doc).
    Raises CommentSkipped when commenting is not possible here, GitHubError when the API fails.
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

    head = pr.get("head")
    sha = head.get("sha") if isinstance(head, dict) else None
    payload = {
        "pr": pr["number"],
        "head_sha": str(sha or env.get("GITHUB_SHA") or ""),
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
    for key, want in (("pr", int), ("head_sha", str), ("tag", str), ("body", str)):
        if not isinstance(data.get(key), want) or isinstance(data.get(key), bool):
            raise FairnessError(f"{path}: `{key}` is missing or not a {want.__name__}")
    return data


def post_from_artifact(directory: Path, env: Mapping[str, str], token: str | None, *, pr: int | None = None,
                       head_sha: str = "", tag: str = "", author: str = "") -> tuple[str, int]:
    """Post or update the comment a pull-request run left in its artifact; returns (`created`|`updated`, PR).

    The artifact comes from an untrusted run, so the PR it names is only believed when it is
    the trusted `pr`, or when that PR's head commit is the trusted `head_sha` (the
    `workflow_run` event's; its `pull_requests` list is empty for forks). Raises FairnessError
    (a GitHubError for the API) when neither holds, CommentSkipped when the token cannot comment.
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
        where = f"GET /repos/{gh.repository}/pulls/{number}"
        try:
            pull, _ = gh.request("GET", gh.repo_url(f"/pulls/{number}"))
        except GitHubRefused as exc:
            raise _refused(exc) from None
        actual = need_field(need_object(pull, where), "head.sha", str, where)
        if actual != head_sha:
            raise FairnessError(
                f"pull request #{number} is at {actual[:12] or '(unknown)'}, not at the run's head {head_sha[:12]}: "
                "refusing to post an artifact's comment on it"
            )
    return _upsert(gh, number, data["body"], check_tag(tag or data["tag"]), author), number
