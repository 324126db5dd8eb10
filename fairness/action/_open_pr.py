"""Commit regenerated recordings to a branch, push it and open (or update) a pull request.

Events caused by the workflow's own `GITHUB_TOKEN` start no workflows, so a PR opened with
it would land with no fairness check. The push and the API call therefore use a separate
token: a GitHub App installation token or a fine-grained PAT with `contents: write` and
`pull-requests: write` on this repository only. The token goes to git as an HTTP header
(`http.extraheader`, as actions/checkout does), never into a remote URL, a file or a log.
"""

from __future__ import annotations

import base64
import subprocess
import urllib.error
import urllib.parse
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from fairness._util.errors import FairnessError

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


def _git(repo: Path, *args: str, token: str | None = None) -> str:
    auth = []
    if token:
        basic = base64.b64encode(f"x-access-token:{token}".encode()).decode()
        auth = ["-c", f"http.extraheader=AUTHORIZATION: basic {basic}"]
    proc = subprocess.run(["git", *auth, *args], cwd=repo, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        message = " ".join((proc.stderr or proc.stdout).split())
        if token:
            message = message.replace(token, "***")
        raise FairnessError(f"git {args[0]} failed: {message[:500]}")
    return proc.stdout.strip()


def commit_branch(repo: Path, path: str, branch: str, message: str, env: Mapping[str, str]) -> str | None:
    """One commit of `path` on `branch` (reset to HEAD); None when `path` has no change."""
    if not _git(repo, "status", "--porcelain", "--untracked-files=all", "--", path):
        return None
    name = env.get("GIT_AUTHOR_NAME") or "llm-fairness-check"
    email = env.get("GIT_AUTHOR_EMAIL") or "llm-fairness-check@users.noreply.github.com"
    _git(repo, "checkout", "-B", branch)
    _git(repo, "add", "-A", "--", path)
    _git(repo, "-c", f"user.name={name}", "-c", f"user.email={email}", "commit", "--quiet", "-m", message)
    return _git(repo, "rev-parse", "HEAD")


def open_pr(
    repo: Path, path: str, *, branch: str, title: str, body: str, base: str, remote: str,
    token: str, env: Mapping[str, str],
) -> PullRequest | None:
    """Commit, force-push the branch and open its PR (or update the open one). None: nothing changed."""
    from fairness.action._pr_comment import CommentSkipped, GitHub

    commit = commit_branch(repo, path, branch, title, env)
    if commit is None:
        return None
    _git(repo, "push", "--force", "--quiet", remote, f"HEAD:refs/heads/{branch}", token=token)
    repository = env.get("GITHUB_REPOSITORY")
    if not repository:
        raise FairnessError("GITHUB_REPOSITORY is not set: cannot open the pull request")
    gh = GitHub(env.get("GITHUB_API_URL") or "https://api.github.com", token, repository)
    pulls = f"{gh.api_url.rstrip('/')}/repos/{repository}/pulls"
    try:
        try:
            pr, _ = gh.request("POST", pulls, {"title": title, "head": branch, "base": base, "body": body})
            return PullRequest(branch, commit, pr["html_url"], True)
        except urllib.error.HTTPError as exc:
            if exc.code != 422:  # 422: a PR from this branch is already open
                raise
        owner = repository.split("/")[0]
        query = urllib.parse.urlencode({"head": f"{owner}:{branch}", "base": base, "state": "open"})
        found, _ = gh.request("GET", f"{pulls}?{query}")
        if not found:
            raise FairnessError(f"GitHub refused to open a pull request from `{branch}` into `{base}` (HTTP 422)")
        pr, _ = gh.request("PATCH", f"{pulls}/{found[0]['number']}", {"title": title, "body": body})
        return PullRequest(branch, commit, pr["html_url"], False)
    except CommentSkipped:
        raise FairnessError(
            f"the token in {TOKEN_ENV} may not open pull requests here: it needs pull-requests: write on {repository}"
        ) from None
    except urllib.error.URLError as exc:
        raise FairnessError(f"cannot reach the GitHub API at {gh.api_url}: {exc.reason}") from None
