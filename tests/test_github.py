"""The GitHub client against a hostile stand-in API on 127.0.0.1 (issue 19).

Every answer GitHub could give that the client cannot use — an HTML page, a list or a
string where an object is expected, a 201 without `html_url`, a `Link: rel="next"`
that points back at the same page or never ends — must end in one line on stderr and
exit 2 from the CLI (never a traceback or an endless loop), and in the Action it must
stay a warning after the verdict: a comment is a courtesy, never the verdict.

`open-pr` checks every precondition before it touches git, and gives git its token
through the environment (a credential helper reading a variable), never its argv.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from conftest import REPO
from local_server import JsonHandler, serve, stop

from fairness.github._git import git_env

TOKEN = "tok-secret-0123456789"
HTML = b"<!DOCTYPE html><html><body>Unicorn! This page is taking too long to load.</body></html>"

Answer = tuple[int, object, dict[str, str]]
"""(status, body: JSON-encoded unless bytes, extra headers)."""


class StandIn:
    """A GitHub API whose every route answers what the test says; records each request."""

    def __init__(self, routes: dict[tuple[str, str], Callable[[str], Answer]]):
        self.calls: list[tuple[str, str]] = []
        outer = self

        class Handler(JsonHandler):
            def _handle(self, method: str) -> None:
                outer.calls.append((method, self.path))
                self.read_json()
                route = routes.get((method, urlsplit(self.path).path))
                if route is None:
                    return self.send_json(404, {"message": "Not Found"})
                status, body, headers = route(self.path)
                if isinstance(body, bytes) and body.startswith(b"<!DOCTYPE"):
                    headers = {"content-type": "text/html; charset=utf-8", **headers}
                self.send_json(status, body, headers)

            def do_GET(self) -> None:
                self._handle("GET")

            def do_POST(self) -> None:
                self._handle("POST")

            def do_PATCH(self) -> None:
                self._handle("PATCH")

        self.server, self.url = serve(Handler)

    def close(self) -> None:
        stop(self.server)


def _fixed(status: int, body: object, headers: dict[str, str] | None = None) -> Callable[[str], Answer]:
    return lambda _path: (status, body, headers or {})


def _env(**more: str) -> dict[str, str]:
    base = {k: v for k, v in os.environ.items()
            if not k.startswith(("GITHUB_", "GH_", "FAIRNESS_", "GIT_")) and "proxy" not in k.lower()}
    return {**base, "PYTHONPATH": str(REPO), **more}


def _cli(*argv: str, env: dict[str, str], cwd: Path = REPO) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "fairness.cli", *argv], cwd=cwd, env=env, capture_output=True,
                          text=True, check=False, timeout=60)


# -- `comment`: the sticky comment from an artifact ----------------------------------------------


COMMENTS = "/repos/o/r/issues/7/comments"


@pytest.fixture
def artifact(tmp_path) -> Path:
    art = tmp_path / "art"
    art.mkdir()
    (art / "pr-comment.json").write_text(json.dumps({"pr": 7, "head_sha": "", "tag": "t", "body": "**PASS**"}))
    return art


def _comment(api: StandIn, artifact: Path, *extra: str) -> subprocess.CompletedProcess:
    return _cli("comment", "--from-artifact", str(artifact), "--pr", "7", "--author", "github-actions[bot]", *extra,
                env=_env(GITHUB_TOKEN=TOKEN, GITHUB_REPOSITORY="o/r", GITHUB_API_URL=api.url))


def _next(api_url: Callable[[], str], page: Callable[[int], int]) -> Callable[[str], Answer]:
    """A comments page whose `Link: rel="next"` names page `page(this page)`."""
    def answer(path: str) -> Answer:
        n = int(dict(p.split("=") for p in urlsplit(path).query.split("&")).get("page", "1"))
        return 200, [], {"Link": f'<{api_url()}{COMMENTS}?per_page=100&page={page(n)}>; rel="next"'}
    return answer


HOSTILE_LISTS = {
    "html-page": (_fixed(200, HTML),
                  f"GitHub API GET {COMMENTS}: the answer is not JSON (content-type text/html; charset=utf-8)"),
    "object-for-a-list": (_fixed(200, {"message": "hello"}), f"GitHub API GET {COMMENTS}: expected a JSON array, got an object"),
    "string-for-a-list": (_fixed(200, "hello"), f"GitHub API GET {COMMENTS}: expected a JSON array, got a string"),
    "item-a-string": (_fixed(200, ["x"]), f"GitHub API GET {COMMENTS}: item 0 is a string, not an object"),
    "item-id-a-string": (_fixed(200, [{"id": "1", "body": "<!-- llm-fairness-check tag=t -->\nx",
                                       "user": {"login": "github-actions[bot]"}}]),
                         f"GitHub API GET {COMMENTS}: item 0 has no `id` (an integer)"),
    "empty-200": (_fixed(200, b""), f"GitHub API GET {COMMENTS}: expected a JSON array, got an empty answer"),
}


@pytest.mark.parametrize("case", list(HOSTILE_LISTS))
def test_comment_refuses_an_unusable_comment_list(case, artifact):
    route, line = HOSTILE_LISTS[case]
    api = StandIn({("GET", COMMENTS): route})
    try:
        proc = _comment(api, artifact)
    finally:
        api.close()
    assert (proc.returncode, proc.stderr, proc.stdout) == (2, f"error: {line}\n", "")
    assert [m for m, _ in api.calls] == ["GET"]  # nothing posted on the strength of a bad answer


def test_comment_stops_on_a_next_link_back_to_the_same_page(artifact):
    api = StandIn({("GET", COMMENTS): _next(lambda: api.url, lambda n: n)})
    try:
        proc = _comment(api, artifact)
    finally:
        api.close()
    assert (proc.returncode, proc.stderr) == (2, f"error: GitHub API GET {COMMENTS}: the `Link: rel=\"next\"` header "
                                                 f"leads back to a page already read ({COMMENTS}?per_page=100&page=1)\n")
    assert len(api.calls) == 2  # the first page (no `page=`), then `page=1`, whose link names itself


def test_comment_stops_after_the_page_cap(artifact):
    from fairness.github._client import MAX_PAGES

    api = StandIn({("GET", COMMENTS): _next(lambda: api.url, lambda n: n + 1)})
    try:
        proc = _comment(api, artifact)
    finally:
        api.close()
    assert (proc.returncode, proc.stderr) == (2, f"error: GitHub API GET {COMMENTS}: more than {MAX_PAGES} pages "
                                                 f"(100 items each); refusing to read on\n")
    assert len(api.calls) == MAX_PAGES


def test_comment_refuses_a_next_link_off_the_api_host(artifact):
    api = StandIn({("GET", COMMENTS): _fixed(200, [], {"Link": f'<http://evil.example{COMMENTS}?page=2>; rel="next"'})})
    try:
        proc = _comment(api, artifact)
    finally:
        api.close()
    assert (proc.returncode, proc.stderr) == (2, f"error: GitHub API GET {COMMENTS}: the `Link: rel=\"next\"` header "
                                                 "leads off the API host (http://evil.example); the token is not sent there\n")


def test_comment_refuses_a_redirect_off_the_api_host(artifact):
    api = StandIn({("GET", COMMENTS): _fixed(302, b"", {"Location": f"http://evil.example{COMMENTS}"})})
    try:
        proc = _comment(api, artifact)
    finally:
        api.close()
    assert (proc.returncode, proc.stderr) == (2, f"error: GitHub API GET {COMMENTS} answered HTTP 302\n")
    assert len(api.calls) == 1


@pytest.mark.parametrize(("body", "line"), [
    (["octocat"], "GitHub API GET /user: expected a JSON object, got an array"),
    ({"name": "Octo"}, "GitHub API GET /user: the answer has no `login` (a string)"),
])
def test_comment_refuses_an_unusable_user(artifact, body, line):
    api = StandIn({("GET", COMMENTS): _fixed(200, []), ("GET", "/user"): _fixed(200, body)})
    try:
        proc = _cli("comment", "--from-artifact", str(artifact), "--pr", "7",
                    env=_env(GITHUB_TOKEN=TOKEN, GITHUB_REPOSITORY="o/r", GITHUB_API_URL=api.url))
    finally:
        api.close()
    assert (proc.returncode, proc.stderr) == (2, f"error: {line}\n")
    assert "POST" not in [m for m, _ in api.calls]


def test_comment_refuses_a_pull_without_a_head_sha(artifact):
    api = StandIn({("GET", "/repos/o/r/pulls/7"): _fixed(200, {"number": 7, "head": "abc"})})
    try:
        proc = _cli("comment", "--from-artifact", str(artifact), "--head-sha", "a" * 40,
                    env=_env(GITHUB_TOKEN=TOKEN, GITHUB_REPOSITORY="o/r", GITHUB_API_URL=api.url))
    finally:
        api.close()
    assert (proc.returncode, proc.stderr) == (2, "error: GitHub API GET /repos/o/r/pulls/7: the answer has no "
                                                 "`head.sha` (a string)\n")


def test_comment_reports_a_server_error_in_one_line(artifact):
    api = StandIn({("GET", COMMENTS): _fixed(502, HTML)})
    try:
        proc = _comment(api, artifact)
    finally:
        api.close()
    assert (proc.returncode, proc.stderr) == (2, f"error: GitHub API GET {COMMENTS} answered HTTP 502\n")


def test_comment_created_answer_must_be_an_object(artifact):
    api = StandIn({("GET", COMMENTS): _fixed(200, []), ("POST", COMMENTS): _fixed(201, "created")})
    try:
        proc = _comment(api, artifact)
    finally:
        api.close()
    assert (proc.returncode, proc.stderr) == (2, f"error: GitHub API POST {COMMENTS}: expected a JSON object, got a string\n")


# -- `open-pr` ---------------------------------------------------------------------------------


def _sh(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True).stdout.strip()


@pytest.fixture
def repo(tmp_path) -> tuple[Path, Path]:
    """A clone with a committed recordings dir, its bare origin, and a changed file to commit."""
    remote, repo = tmp_path / "remote.git", tmp_path / "repo"
    _sh(tmp_path, "init", "--quiet", "--bare", str(remote))
    repo.mkdir()
    _sh(repo, "init", "--quiet", "--initial-branch=main")
    (repo / "rec").mkdir()
    (repo / "rec" / "records.jsonl").write_text("old\n")
    _sh(repo, "add", "-A")
    _sh(repo, "-c", "user.name=t", "-c", "user.email=t@e", "commit", "--quiet", "-m", "base")
    _sh(repo, "remote", "add", "origin", str(remote))
    _sh(repo, "push", "--quiet", "origin", "main")
    (repo / "rec" / "records.jsonl").write_text("new\n")
    (tmp_path / "body.md").write_text("body")
    return repo, remote


def _recording_git(tmp_path: Path) -> tuple[Path, Path]:
    """A `git` on PATH that appends its argv (NUL-separated) to a log, then runs the real git."""
    import shutil

    real = shutil.which("git")
    assert real
    bindir, log = tmp_path / "bin", tmp_path / "git-argv.log"
    bindir.mkdir()
    (bindir / "git").write_text(f'#!/bin/sh\nprintf "%s\\0" "$@" >> "{log}"\nprintf "\\n" >> "{log}"\nexec "{real}" "$@"\n')
    (bindir / "git").chmod(0o755)
    return bindir, log


def _open_pr(repo: Path, env: dict[str, str]) -> subprocess.CompletedProcess:
    return _cli("open-pr", "--path", "rec", "--branch", "nightly/x", "--title", "Nightly", "--body-file",
                str(repo.parent / "body.md"), "--base", "main", env=env, cwd=repo)


def test_open_pr_checks_github_repository_before_any_git_change(repo):
    repo_dir, remote = repo
    head = _sh(repo_dir, "rev-parse", "HEAD")
    proc = _open_pr(repo_dir, _env(FAIRNESS_PR_TOKEN=TOKEN, GITHUB_API_URL="http://127.0.0.1:9"))
    assert (proc.returncode, proc.stderr) == (2, "error: GITHUB_REPOSITORY is not set: cannot open the pull request\n")
    assert _sh(remote, "branch", "--list").split() == ["main"]
    assert (_sh(repo_dir, "rev-parse", "HEAD"), _sh(repo_dir, "branch", "--show-current")) == (head, "main")
    proc = _open_pr(repo_dir, _env(FAIRNESS_PR_TOKEN=TOKEN, GITHUB_REPOSITORY="../x", GITHUB_API_URL="http://127.0.0.1:9"))
    assert (proc.returncode, proc.stderr) == (2, "error: GITHUB_REPOSITORY '../x' is not OWNER/NAME\n")
    proc = _open_pr(repo_dir, _env(FAIRNESS_PR_TOKEN=TOKEN, GITHUB_REPOSITORY="o/r", GITHUB_API_URL="ftp://h"))
    assert (proc.returncode, proc.stderr) == (2, "error: GITHUB_API_URL 'ftp://h' is not an http(s) URL\n")
    assert _sh(remote, "branch", "--list").split() == ["main"] and _sh(repo_dir, "rev-parse", "HEAD") == head


def test_open_pr_a_201_without_html_url_is_one_line(repo):
    repo_dir, remote = repo
    api = StandIn({("POST", "/repos/o/r/pulls"): _fixed(201, {"number": 3})})
    try:
        proc = _open_pr(repo_dir, _env(FAIRNESS_PR_TOKEN=TOKEN, GITHUB_REPOSITORY="o/r", GITHUB_API_URL=api.url))
    finally:
        api.close()
    assert (proc.returncode, proc.stderr) == (2, "error: GitHub API POST /repos/o/r/pulls: the answer has no `html_url` "
                                                 "(a string)\n")
    assert _sh(remote, "show", "nightly/x:rec/records.jsonl") == "new"  # pushed; a rerun updates the PR


@pytest.mark.parametrize(("found", "line"), [
    ("hello", "expected a JSON array, got a string"),
    ([{"html_url": "x"}], "item 0 has no `number` (an integer)"),
])
def test_open_pr_an_unusable_list_of_open_prs_is_one_line(repo, found, line):
    repo_dir, _ = repo
    api = StandIn({("POST", "/repos/o/r/pulls"): _fixed(422, {"message": "Validation Failed"}),
                   ("GET", "/repos/o/r/pulls"): _fixed(200, found)})
    try:
        proc = _open_pr(repo_dir, _env(FAIRNESS_PR_TOKEN=TOKEN, GITHUB_REPOSITORY="o/r", GITHUB_API_URL=api.url))
    finally:
        api.close()
    assert (proc.returncode, proc.stderr) == (2, f"error: GitHub API GET /repos/o/r/pulls: {line}\n")


def test_open_pr_keeps_the_token_out_of_every_git_argv(repo, tmp_path):
    repo_dir, remote = repo
    bindir, log = _recording_git(tmp_path)
    api = StandIn({("POST", "/repos/o/r/pulls"): _fixed(201, {"number": 3, "html_url": "https://github.example/o/r/pull/3"})})
    env = _env(FAIRNESS_PR_TOKEN=TOKEN, GITHUB_REPOSITORY="o/r", GITHUB_API_URL=api.url)
    env["PATH"] = f"{bindir}{os.pathsep}{env['PATH']}"
    try:
        proc = _open_pr(repo_dir, env)
    finally:
        api.close()
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("opened https://github.example/o/r/pull/3 (branch nightly/x, commit ")
    argvs = [line.split("\0") for line in log.read_text().split("\n") if line]
    assert any("push" in a for a in argvs)  # the wrapper saw the push itself
    assert not [a for a in argvs if any(TOKEN in part for part in a)]
    assert _sh(remote, "show", "nightly/x:rec/records.jsonl") == "new"


def test_the_git_credential_helper_answers_the_token_from_the_environment(tmp_path):
    env = {**_env(HOME=str(tmp_path), GIT_CONFIG_NOSYSTEM="1"), **git_env(TOKEN)}
    assert TOKEN not in [v for k, v in env.items() if k.startswith("GIT_CONFIG_")]
    proc = subprocess.run(["git", "credential", "fill"], input="protocol=https\nhost=github.com\n\n", env=env,
                          capture_output=True, text=True, check=True, timeout=30)
    assert proc.stdout.splitlines() == ["protocol=https", "host=github.com", "username=x-access-token",
                                        f"password={TOKEN}"]
