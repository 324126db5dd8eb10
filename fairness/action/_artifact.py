"""The name of the artifact the Action uploads: one per job, suite and tag, so matrix legs and
several invocations in one workflow run do not collide (upload-artifact v4 refuses a
second upload under one name).

The name is read by people in the run's artifact list, so it is kept short: the parts are
`fairness`, the job id, the suite and the tag, but a word already said is not said again
(job `fairness` with suite `fairness-check-suite.yaml` gave
`fairness-fairness-fairness-check-suite.yaml`), and a suite file is named by its path
without the `.yaml`/`.yml`/`.json` extension and without hidden directories (`.github/`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping

_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")
_EXTENSION = re.compile(r"\.(ya?ml|json)$", re.IGNORECASE)
MAX_LENGTH = 200


def _clean(part: str) -> str:
    return _UNSAFE.sub("-", part).strip("-.")


def _suite_part(suite: str, workspace: str) -> str:
    """A built-in name as is (`fairness-cards/qwen-v0.1`); a file by its path in the workspace,
    extension and hidden directories (`.github`, `.`, `..`) dropped: `.github/fairness/hiring.yml`
    → `fairness/hiring`. Directories are kept so two `hiring.yml` in different folders differ."""
    path = suite.strip()
    if workspace and path.startswith(workspace.rstrip("/\\") + "/"):
        path = path[len(workspace.rstrip("/\\")) + 1:]
    path = _EXTENSION.sub("", path)
    parts = [p for p in re.split(r"[/\\]+", path) if p and not p.startswith(".")]
    return "-".join(parts)


def artifact_name(env: Mapping[str, str], suite: str, tag: str = "") -> str:
    """`fairness-<job>-<suite>[-<tag>]`, reduced to letters, digits, `.`, `_` and `-`, each
    hyphen-separated word once (the first time it appears, compared without case).

    Artifact names may not hold `/`, `\\`, `:`, `"`, `<`, `>`, `|`, `*`, `?` or line breaks;
    a suite is often a path (`suites/ours.yaml`). The tag is appended only when it is not
    the job id, which it defaults to.
    """
    job = env.get("GITHUB_JOB", "").strip()
    parts = ["fairness", job or "job", _suite_part(suite, env.get("GITHUB_WORKSPACE", ""))]
    if tag and tag not in (job, "default"):
        parts.append(tag)
    seen: set[str] = set()
    words: list[str] = []
    for raw in "-".join(map(_clean, parts)).split("-"):
        word = raw.strip(".")
        if word and word.casefold() not in seen:
            seen.add(word.casefold())
            words.append(word)
    return "-".join(words)[:MAX_LENGTH].rstrip("-.")
