"""CLI commands of the regeneration job: `regenerate`, `pr-body` and `open-pr`.

The nightly workflow (and the one `init` scaffolds) is a thin sequence of these, so the
same code runs on a GPU runner and in the test that plays a runner on the CPU.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from fairness._util.errors import FairnessError


def add_regenerate_arguments(rg, add_generate_options) -> None:
    """The options of `regenerate`."""
    add_generate_options(rg, "the model's recordings directory, rewritten in place (e.g. recordings/<suite>/<model>)")
    rg.add_argument("--merge", nargs="+", metavar="SHARD_DIR", help="merge these shard sets instead of generating")
    rg.add_argument("--work", default="fairness-regen", help="directory for the base and head runs, diff.md and pr-body.md")
    rg.add_argument("--bootstrap", type=int, default=2000, help="bootstrap resamples of the audits (B)")
    rg.add_argument("--permutations", type=int, default=2000, help="permutations per test of the audits")
    rg.set_defaults(handler=cmd_regenerate)


def add_pr_body_arguments(pb) -> None:
    """The options of `pr-body`."""
    pb.add_argument("--run", required=True, help="`run` output directory of the new recordings")
    pb.add_argument("--diff", help="diff.md of `diff` against the committed recordings (omit for a first set)")
    pb.add_argument("--recordings", help="the new recordings directory (adds provenance from its manifest)")
    pb.add_argument("--out", help="file to write (default: stdout)")
    pb.set_defaults(handler=cmd_pr_body)


def add_open_pr_arguments(op) -> None:
    """The options of `open-pr`."""
    op.add_argument("--path", required=True, help="the recordings directory to commit")
    op.add_argument("--branch", required=True)
    op.add_argument("--title", required=True)
    op.add_argument("--body-file", required=True)
    op.add_argument("--base", help="branch to merge into (default: $GITHUB_REF_NAME, else main)")
    op.add_argument("--remote", default="origin")
    op.set_defaults(handler=cmd_open_pr)


def cmd_regenerate(args) -> int:
    from fairness.action._commands import append_summary, write_outputs
    from fairness.audit._audit import AuditOptions
    from fairness.cli._main import generate_and_report
    from fairness.generate._loop import require_live_opt_in
    from fairness.pipeline._regenerate import regenerate

    hub_id = re.fullmatch(r"[A-Za-z0-9][\w.-]*/[\w.-]+", args.model) is not None  # a path is not a hub id
    if args.engine == "transformers" and not args.revision and not Path(args.model).exists() and hub_id:
        raise FairnessError(f"regenerating hub model `{args.model}` needs --revision <commit>: an unpinned hub id "
                            "names a moving branch, so two nights could load different weights")
    produce = None
    if args.merge is None:
        require_live_opt_in(args.live)

        def produce(staging: Path) -> None:
            generate_and_report(args, staging, None)

    options = AuditOptions(bootstrap=args.bootstrap, permutations=args.permutations)
    res = regenerate(args.suite, Path(args.out), Path(args.work), produce,
                     shards=[Path(s) for s in args.merge] if args.merge else None, options=options)
    env = os.environ
    if env.get("GITHUB_OUTPUT"):
        write_outputs(env["GITHUB_OUTPUT"], {
            "complete": str(res.complete).lower(),
            "exit-code": str(res.exit_code),
            "body-path": str(res.body_path or ""),
        })
    if env.get("GITHUB_STEP_SUMMARY"):
        text = res.body_path.read_text(encoding="utf-8") if res.body_path else "The new recordings are incomplete."
        append_summary(env["GITHUB_STEP_SUMMARY"], f"Environment: {res.environment}\n\n{text}")
    return 0


def cmd_pr_body(args) -> int:
    from fairness._util.files import check_output_file, read_text_capped
    from fairness.cli._main import _emit
    from fairness.recordings._store import read_manifest
    from fairness.report._pr_body import load_run, pr_body

    if args.out:
        check_output_file(args.out, "--out")
        if args.recordings:
            from fairness.pipeline._run import check_apart

            check_apart(args.out, Path(args.recordings), "--out")
    diff = read_text_capped(args.diff, what="--diff") if args.diff else None
    manifest = read_manifest(Path(args.recordings)) if args.recordings else None
    _emit(pr_body(load_run(args.run), diff, manifest), args.out)
    return 0


def cmd_open_pr(args) -> int:
    from fairness.action._commands import append_summary
    from fairness.github._pull import NO_TOKEN, TOKEN_ENV, open_pr

    env = os.environ
    token = env.get(TOKEN_ENV, "").strip()
    if not token:
        print(NO_TOKEN)
        if env.get("GITHUB_STEP_SUMMARY"):
            append_summary(env["GITHUB_STEP_SUMMARY"], f"> [!WARNING]\n> {NO_TOKEN}\n")
        return 0
    from fairness._util.files import read_text_capped
    from fairness.github._pull import check_request, pr_client
    from fairness.report._pr_body import BODY_LIMIT

    body = read_text_capped(args.body_file, what="--body-file")
    if len(body) > BODY_LIMIT:
        raise FairnessError(f"--body-file `{args.body_file}` holds {len(body):,} characters; GitHub takes at most "
                            f"{BODY_LIMIT:,} in a pull-request body")
    base = args.base or env.get("GITHUB_REF_NAME") or "main"
    check_request(Path.cwd(), args.path, branch=args.branch, title=args.title, base=base, remote=args.remote)
    pr_client(env, token)  # GITHUB_REPOSITORY and GITHUB_API_URL, before git commits or pushes anything
    pr = open_pr(Path.cwd(), args.path, branch=args.branch, title=args.title, body=body, base=base,
                 remote=args.remote, token=token, env=env)
    if pr is None:
        print(f"`{args.path}` is unchanged: no pull request")
        return 0
    print(f"{'opened' if pr.created else 'updated'} {pr.url} (branch {pr.branch}, commit {pr.commit[:12]})")
    if env.get("GITHUB_STEP_SUMMARY"):
        append_summary(env["GITHUB_STEP_SUMMARY"], f"Pull request: {pr.url}\n")
    return 0
