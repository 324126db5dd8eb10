"""CLI commands of the audit side: `run` (and `diff`)."""

from __future__ import annotations

import re
import sys
from pathlib import Path

from fairness._util.errors import FairnessError


def register(sub, add_suite) -> None:
    r = sub.add_parser("run", help="replay recordings, audit them, print the verdict and write all outputs")
    add_suite(r)
    r.add_argument("--recordings", required=True, help="recording directory (manifest.json + records)")
    r.add_argument("--out", required=True, help="output directory")
    r.add_argument("--scorer-mode", choices=["paper", "strict"], help="override the suite's scorer mode")
    r.add_argument("--threshold", type=float, help="override the threshold of every decision rule")
    r.add_argument("--gate-on", choices=["point", "interval"], default="interval")
    r.add_argument("--fail-on", choices=["fail", "illustrative"], help="which states fail the process (default: each state its own exit code)")
    r.add_argument("--min-group-size", type=int, help="rows per slice below which a metric is NaN (default: the suite's)")
    r.add_argument("--allow-small-samples", action="store_true", help="compute underpowered metrics anyway (results stay illustrative)")
    r.add_argument("--bootstrap", type=int, default=2000, help="bootstrap resamples (B)")
    r.add_argument("--permutations", type=int, default=2000, help="permutations per test (0 to skip)")
    r.add_argument("--seed", type=int, default=20260325)
    r.add_argument("--evaluators", default="none",
                   help="comma-separated peer-parity evaluators (counterfactual, refusal, sentiment, toxicity), "
                        "`all`, or `none` (default: none, which keeps the gate fast)")
    r.add_argument("--bbq-recordings", help="recorded BBQ answers to score (e.g. recordings/bbq-sample/<model>)")
    r.add_argument("--bbq-items", help="BBQ items JSONL the recordings answer (default: the shipped sample)")
    r.add_argument("--allow-incomplete", action="store_true",
                   help="audit the recorded rows of a set whose manifest declares it incomplete (a pass stays illustrative)")
    r.add_argument("--quiet", action="store_true", help="print only the verdict line")
    r.add_argument("--junit", help="also write a JUnit XML report (one testcase per rule check) to this file")
    r.set_defaults(handler=cmd_run)
    register_diff(sub, add_suite)


def _options(args):
    from fairness.audit._audit import AuditOptions
    from fairness.audit._validate import MAX_GROUP_SIZE, MAX_RESAMPLES, MAX_SEED, check_count, check_threshold

    check_count("--bootstrap", args.bootstrap, 1, MAX_RESAMPLES)
    check_count("--permutations", args.permutations, 0, MAX_RESAMPLES)
    check_count("--seed", args.seed, 0, MAX_SEED)
    if args.min_group_size is not None:
        check_count("--min-group-size", args.min_group_size, 1, MAX_GROUP_SIZE)
    if args.threshold is not None:
        check_threshold("--threshold", args.threshold)
    return AuditOptions(
        bootstrap=args.bootstrap,
        permutations=args.permutations,
        seed=args.seed,
        min_group_size=args.min_group_size,
        allow_small_samples=args.allow_small_samples,
        gate_on=args.gate_on,
        fail_on=args.fail_on,
        scorer_mode=args.scorer_mode,
        threshold=args.threshold,
    )


def cmd_run(args) -> int:
    from fairness._util.files import check_output_file
    from fairness.pipeline._run import compact_table, run_audit

    options = _options(args)
    if args.junit:
        from fairness.pipeline._run import check_apart

        check_output_file(args.junit, "--junit")
        check_apart(args.junit, Path(args.recordings), "--junit")
    from fairness.evaluators._adapter import EVALUATORS

    names = tuple(x.strip() for x in args.evaluators.split(",") if x.strip() and x.strip() != "none")
    if names == ("all",):
        names = EVALUATORS
    unknown = [x for x in names if x not in EVALUATORS]
    if unknown:
        raise FairnessError(f"`--evaluators`: unknown evaluator `{unknown[0]}` (choose from {', '.join(EVALUATORS)} or none)")
    result = run_audit(args.suite, args.recordings, args.out, options, evaluators=names,
                       bbq_dir=args.bbq_recordings, bbq_items=args.bbq_items, allow_incomplete=args.allow_incomplete)
    run = result.run
    if getattr(args, "junit", None):
        _write_junit(run, args.junit)
    from fairness.report._render import verdict_line

    line = re.sub(r"[*✅❌⚠️❔]+", "", verdict_line(run)).strip()
    if not args.quiet:
        print(compact_table(run))
        for s in run.stability:
            print(s.summary)
        for c in run.caveats:
            if c.code in ("test-model", "stale-recordings", "incomplete-recordings", "empty-outputs"):
                print(f"caveat: {' '.join(c.message.split())}", file=sys.stderr)
        print(f"wrote {', '.join(str(p) for p in result.files.values())}")
    print(line)
    return run.gate.exit_code


def _write_junit(run, path: str) -> None:
    """JUnit XML for CI test reporters; written after the audit's own outputs."""
    from pathlib import Path

    from fairness.recordings._store import write_atomic
    from fairness.report._junit import junit_xml

    try:
        write_atomic(Path(path), junit_xml(run.model_dump(mode="json")))
    except OSError as exc:
        raise FairnessError(f"cannot write --junit `{path}`: {exc.strerror or exc}") from None


def register_diff(sub, add_suite) -> None:
    d = sub.add_parser("diff", help="compare a base run with a head run: change per metric and family, with intervals")
    d.add_argument("base", help="base run: an output directory of `run` (or its results.json)")
    d.add_argument("head", help="head run: an output directory of `run` (or its results.json)")
    add_suite(d)
    d.add_argument("--out", help="directory for diff.json and diff.md")
    d.add_argument("--bootstrap", type=int, default=2000)
    d.add_argument("--seed", type=int, default=20260325)
    d.set_defaults(handler=cmd_diff)


def cmd_diff(args) -> int:
    from pathlib import Path

    from fairness._util.files import check_output_dir
    from fairness.audit._diff import diff_md, diff_runs
    from fairness.audit._validate import MAX_RESAMPLES, MAX_SEED, check_count
    from fairness.recordings._store import write_atomic
    from fairness.suite._suite import load_suite

    check_count("--bootstrap", args.bootstrap, 1, MAX_RESAMPLES)
    check_count("--seed", args.seed, 0, MAX_SEED)
    if args.out:
        check_output_dir(args.out)
    rules = list(load_suite(args.suite).rules)
    d = diff_runs(args.base, args.head, rules=rules, B=args.bootstrap, seed=args.seed)
    md = diff_md(d)
    if args.out:
        from fairness._util.files import staged_outputs

        with staged_outputs(Path(args.out)) as staging:
            write_atomic(staging / "diff.json", d.model_dump_json(indent=1) + "\n")
            write_atomic(staging / "diff.md", md)
    print(md)
    return d.exit_code
