"""`llm-fairness-check comment`: post a pull-request run's comment from its artifact.

For fork pull requests, whose runs get a read-only token: a `workflow_run` workflow
downloads the artifact and runs this with a write token (docs/fork-pr-comments.md).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from fairness._util.errors import FairnessError


def add_arguments(c) -> None:
    """The options of `comment`."""
    c.add_argument("--from-artifact", required=True, metavar="DIR", help="the downloaded artifact (holds pr-comment.json)")
    c.add_argument("--pr", type=int, help="the pull request to comment on (must match the artifact)")
    c.add_argument("--head-sha", default="",
                   help="the run's head commit (github.event.workflow_run.head_sha): the PR named in the artifact "
                        "is believed only if its head is this commit")
    c.add_argument("--tag", default="", help="marker tag (default: the one in the artifact, i.e. the check's job id)")
    c.add_argument("--author", default="",
                   help="login whose comment may be updated (default: the token's, github-actions[bot] for GITHUB_TOKEN)")
    c.add_argument("--repository", default="", help="owner/name (default: GITHUB_REPOSITORY)")
    c.set_defaults(handler=cmd_comment)


def cmd_comment(args) -> int:
    """Exit 0 when posted, 1 when the token may not comment, 2 on a bad or unverifiable artifact
    or when the GitHub API fails or answers something unusable (a GitHubError, one line)."""
    from fairness.github._comment import CommentSkipped, post_from_artifact

    env = dict(os.environ)
    if args.repository:
        from fairness.github._names import check_repository

        env["GITHUB_REPOSITORY"] = check_repository(args.repository, "--repository")
    token = env.get("GITHUB_TOKEN") or env.get("GH_TOKEN")
    if not token:
        raise FairnessError("set GITHUB_TOKEN (a token that may write pull-request comments)")
    try:
        what, number = post_from_artifact(Path(args.from_artifact), env, token, pr=args.pr, head_sha=args.head_sha,
                                          tag=args.tag, author=args.author)
    except CommentSkipped as exc:
        print(f"error: cannot comment: {exc}", file=sys.stderr)
        return 1
    print(f"pull-request #{number}: comment {what}")
    return 0
