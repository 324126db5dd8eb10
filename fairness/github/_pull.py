"""Commit regenerated recordings to a branch, push it and open (or update) a pull request.

Events caused by the workflow's own `GITHUB_TOKEN` start no workflows, so a PR opened with
it would land with no fairness check. The push and the API call therefore use a separate
token: a GitHub App installation token or a fine-grained PAT with `contents: write` and
`pull-requests: write` on this repository only. git gets it through its environment
(`_git`), never its command line, a remote URL, a file or a log.

Everything that can be checked is checked before git changes anything: the flags, the
token, GITHUB_REPOSITORY and GITHUB_API_URL. A branch is force-pushed, so a refusal after
the push would leave a branch with no pull request.
"""

from __future__ import annotations

import subprocess
import urllib.parse
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from fairness._util.errors import FairnessError
from fairness.github._client import (
    GitHub,
    GitHubError,
    GitHubRefused,
    client_from_env,
    need_field,
    need_item,
    need_list,
    need_object,
)
from fairness.github._git import git

TOKEN_ENV = "FAIRNESS_PR_TOKEN"
NO_TOKEN = (
    f"No pull-request token ({TOKEN_ENV}): the new recordings were not pushed and no pull request was opened. "
    "They are in this run's artifact. A PR opened with GITHUB_TOKEN would trigger no fairness check, so configure "
    "a GitHub App (vars.FAIRNESS_APP_ID + secrets.FAIRNESS_APP_PRIVATE_KEY) or a fine-grained PAT "
    "(secrets.FAIRNESS_PR_TOKEN) with contents: write and pull-requests: write on this repository."
)


@dataclass(frozen=True)
class PullRequest:
    branch: str
    commit: str
    url: str
    created: bool
    """False when an open PR from the branch already existed and was updated."""


def check_request(repo: Path, path: str, *, branch: str, title: str, base: str, remote: str) -> None:
    """Every argument of `open-pr` checked before git runs: each reaches git's command line, and
    the branch is force-pushed, so it must be a branch name and never the base it merges into."""
    for flag, value in (("--branch", branch), ("--base", base), ("--remote", remote)):
        if not value or value.startswith("-") or any(ch.isspace() or ord(ch) < 32 for ch in value):
            raise FairnessError(f"{flag} {value!r} must be a name without spaces that does not start with `-`")
    if not title.strip() or any(ord(ch) < 32 for ch in title):
        raise FairnessError(f"--title {title!r} must be one non-empty line")
    for flag, value in (("--branch", branch), ("--base", base)):
        proc = subprocess.run(["git", "check-ref-format", "--branch", value], capture_output=True, text=True, check=False)
        if proc.returncode != 0 or value.startswith("refs/"):
            raise FairnessError(f"{flag} {value!r} is not a valid branch name")
    if branch == base:
        raise FairnessError(f"--branch `{branch}` is the base branch: it would be force-pushed over; name a branch of its own")
    target = Path(path)
    if not (repo / target).exists():
        raise FairnessError(f"--path `{path}` does not exist")
    root = git(repo, "rev-parse", "--show-toplevel")
    try:
        (repo / target).resolve().relative_to(Path(root).resolve())
    except ValueError:
        raise FairnessError(f"--path `{path}` is outside the git repository `{root}`") from None


def pr_client(env: Mapping[str, str], token: str) -> GitHub:
    """The API client for the pull request, refused (one line) before any git command when it cannot be made."""
    if not token:
        raise FairnessError(f"{TOKEN_ENV} is empty: cannot push or open the pull request")
    if not env.get("GITHUB_REPOSITORY"):
        raise FairnessError("GITHUB_REPOSITORY is not set: cannot open the pull request")
    return client_from_env(env, token)


def commit_branch(repo: Path, path: str, branch: str, message: str, env: Mapping[str, str]) -> str | None:
    """One commit of `path` on `branch` (reset to HEAD); None when `path` has no change."""
    if not git(repo, "status", "--porcelain", "--untracked-files=all", "--", path):
        return None
    name = env.get("GIT_AUTHOR_NAME") or "llm-fairness-check"
    email = env.get("GIT_AUTHOR_EMAIL") or "llm-fairness-check@users.noreply.github.com"
    git(repo, "checkout", "-B", branch)
    git(repo, "add", "-A", "--", path)
    git(repo, "-c", f"user.name={name}", "-c", f"user.email={email}", "commit", "--quiet", "-m", message)
    return git(repo, "rev-parse", "HEAD")


def _open_or_update(gh: GitHub, branch: str, title: str, body: str, base: str) -> tuple[str, bool]:
    """(html_url, created) of the PR from `branch`: a new one, or the open one updated (POST answers 422)."""
    pulls = gh.repo_url("/pulls")
    where = f"/repos/{gh.repository}/pulls"
    try:
        pr, _ = gh.request("POST", pulls, {"title": title, "head": branch, "base": base, "body": body})
        return need_field(need_object(pr, f"POST {where}"), "html_url", str, f"POST {where}"), True
    except GitHubError as exc:
        if exc.status != 422:  # 422: a PR from this branch is already open
            raise
    owner = gh.repository.split("/")[0]
    query = urllib.parse.urlencode({"head": f"{owner}:{branch}", "base": base, "state": "open"})
    found, _ = gh.request("GET", f"{pulls}?{query}")
    found = need_list(found, f"GET {where}")
    if not found:
        raise FairnessError(f"GitHub refused to open a pull request from `{branch}` into `{base}` (HTTP 422)")
    number = need_field(need_item(found, 0, f"GET {where}"), "number", int, f"GET {where}", item=0)
    pr, _ = gh.request("PATCH", f"{pulls}/{number}", {"title": title, "body": body})
    return need_field(need_object(pr, f"PATCH {where}/{number}"), "html_url", str, f"PATCH {where}/{number}"), False


def open_pr(
    repo: Path, path: str, *, branch: str, title: str, body: str, base: str, remote: str,
    token: str, env: Mapping[str, str],
) -> PullRequest | None:
    """Commit, force-push the branch and open its PR (or update the open one). None: nothing changed."""
    gh = pr_client(env, token)
    commit = commit_branch(repo, path, branch, title, env)
    if commit is None:
        return None
    git(repo, "push", "--force", "--quiet", remote, f"HEAD:refs/heads/{branch}", token=token)
    try:
        url, created = _open_or_update(gh, branch, title, body, base)
    except GitHubRefused:
        raise FairnessError(
            f"the token in {TOKEN_ENV} may not open pull requests here: it needs pull-requests: write on {gh.repository}"
        ) from None
    return PullRequest(branch, commit, url, created)
