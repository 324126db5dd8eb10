"""The name of the artifact the Action uploads: one per job and suite, so matrix legs and
several invocations in one workflow run do not collide (upload-artifact v4 refuses a
second upload under one name)."""

from __future__ import annotations

import re
from collections.abc import Mapping

_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")
MAX_LENGTH = 200


def _clean(part: str) -> str:
    return _UNSAFE.sub("-", part).strip("-.")


def artifact_name(env: Mapping[str, str], suite: str, tag: str = "") -> str:
    """`fairness-<job>-<suite>[-<tag>]`, reduced to letters, digits, `.`, `_` and `-`.

    Artifact names may not hold `/`, `\\`, `:`, `"`, `<`, `>`, `|`, `*`, `?` or line breaks;
    a suite is often a path (`suites/ours.yaml`). The tag is appended only when it is not
    the job id, which it defaults to.
    """
    job = env.get("GITHUB_JOB", "").strip()
    parts = ["fairness", job or "job", suite]
    if tag and tag not in (job, "default"):
        parts.append(tag)
    name = "-".join(p for p in map(_clean, parts) if p)
    return name[:MAX_LENGTH].rstrip("-.")
