"""Checks of the names we put into API paths, HTML comments and artifact names.

Each comes from an input, an environment variable or an untrusted artifact, and each ends
up in a URL or a marker, so a malformed one is refused with one line before any request.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from fairness._util.errors import FairnessError

_TAG = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$")
_LOGIN = re.compile(r"^[A-Za-z0-9](?:[A-Za-z0-9-]{0,38})(?:\[bot\])?$")
_REPOSITORY = re.compile(r"^[A-Za-z0-9][A-Za-z0-9-]{0,38}/[A-Za-z0-9._-]{1,100}$")
_SHA = re.compile(r"^(?:[0-9a-f]{40}|[0-9a-f]{64})$")
MAX_NUMBER = 2**31 - 1
"""GitHub issue and pull-request numbers are 32-bit."""


def check_tag(tag: str) -> str:
    """A tag goes into an HTML comment and an artifact name: letters, digits, `.`, `_`, `-`."""
    if not _TAG.match(tag):
        raise FairnessError(
            f"comment tag {tag!r} must be 1-100 letters, digits, `.`, `_` or `-`, starting with a letter or digit"
        )
    return tag


def default_tag(env: Mapping[str, str], tag: str = "") -> str:
    """The given tag, else the job id (GITHUB_JOB), else `default`."""
    return check_tag(tag.strip() or env.get("GITHUB_JOB", "").strip() or "default")


def check_login(login: str, what: str = "comment author") -> str:
    """A GitHub login (an App's is `<slug>[bot]`); empty means the token's own."""
    if login and not _LOGIN.match(login):
        raise FairnessError(f"{what} {login!r} is not a GitHub login (1-39 letters, digits or `-`, an App's ending in `[bot]`)")
    return login


def check_repository(repository: str, what: str = "repository") -> str:
    """OWNER/NAME, which goes into every API path: no `..`, no slashes beyond the one."""
    if not _REPOSITORY.match(repository):
        raise FairnessError(f"{what} {repository!r} is not OWNER/NAME")
    return repository


def check_pr_number(number: object, what: str = "pull request number") -> int:
    if not isinstance(number, int) or isinstance(number, bool) or not 1 <= number <= MAX_NUMBER:
        raise FairnessError(f"{what} {number!r} is not a pull request number (1 to {MAX_NUMBER:,})")
    return number


def check_sha(sha: str, what: str = "head sha") -> str:
    """A full commit sha, or empty (not given)."""
    if sha and not _SHA.match(sha):
        raise FairnessError(f"{what} {sha!r} is not a full commit sha (40 or 64 lowercase hex digits)")
    return sha
