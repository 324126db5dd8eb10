"""Where the Action is published and, in a released build, which commit `init` pins.

One place for the repository's owner/name: `init`'s scaffolds, the README and the cards' code
URL all name `ACTION_REPOSITORY` (tests/test_init.py checks that no other owner appears). A
source checkout leaves `ACTION_REF` and `ACTION_TAG` unset: a commit cannot hold its own sha,
so `scripts/stamp_release.py` writes them into this file in the release workflow, just before
the wheel that is attached to the GitHub release is built (the tagged commit itself keeps
`None`). Without a stamped ref `init` asks for `--action-ref OWNER/REPO@SHA` rather than
guessing one.
"""

from __future__ import annotations

ACTION_REPOSITORY = "fairness-cards/llm-fairness-check"
"""OWNER/NAME of the upstream repository on GitHub: the Action, the images' source, the code URL."""

ACTION_REF: str | None = None
"""The 40-hex commit of the release this build was made from (stamped at release), else None."""

ACTION_TAG: str | None = None
"""The release tag of `ACTION_REF`, e.g. v1.2.3 (stamped with it), else None."""

CODE_URL = f"https://github.com/{ACTION_REPOSITORY}"
