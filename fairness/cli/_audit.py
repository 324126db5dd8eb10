"""CLI commands of the audit side: `run` (and `diff`)."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from fairness.audit._gate import DEFAULT_FAIL_ON, FAIL_ON_CHOICES, FAIL_ON_HELP, GATE_ON_CHOICES
from fairness.audit._options import AuditOptions

if TYPE_CHECKING:
    from fairness.pipeline._options import RunOptions


def add_run_arguments(r: argparse.ArgumentParser, add_suite) -> None:
    """The options of `run`."""
    add_suite(r)
    r.add_argument("--recordings", required=True, help="recording directory (manifest.json + records)")
    r.add_argument("--out", required=True, help="output directory")
    r.add_argument("--scorer-mode", choices=["paper", "strict"], help="override the suite's scorer mode")
    r.add_argument("--threshold", type=float,
                   help="override the threshold of every absolute decision rule (in [0, 1] for a rate metric); "
                        "regression rules keep theirs (see --regression-threshold)")
    r.add_argument("--regression-threshold", type=float,
                   help="override the threshold of every regression rule: the change from base to head, in [-1, 1]")
    r.add_argument("--gate-on", choices=GATE_ON_CHOICES, default=AuditOptions.model_fields["gate_on"].default)
    r.add_argument("--fail-on", choices=FAIL_ON_CHOICES, default=DEFAULT_FAIL_ON,
                   help="; ".join(f"`{k}`: {v}" for k, v in FAIL_ON_HELP.items()) + f" (default: {DEFAULT_FAIL_ON})")
    r.add_argument("--min-group-size", type=int, help="rows and template cells per slice below which a metric is NaN (default: the suite's)")
    r.add_argument("--allow-small-samples", action="store_true", help="compute underpowered metrics anyway (shown, not judged: inconclusive)")
    r.add_argument("--bootstrap", type=int, default=AuditOptions.model_fields["bootstrap"].default,
                   help="bootstrap resamples (B) of the peer evaluators; the gate's intervals are exact")
    r.add_argument("--permutations", type=int, default=AuditOptions.model_fields["permutations"].default,
                   help="permutations per test (0 to skip); reported, not gated")
    r.add_argument("--seed", type=int, default=AuditOptions.model_fields["seed"].default)
    r.add_argument("--evaluators", default="none",
                   help="comma-separated peer-parity evaluators (counterfactual, refusal, sentiment, toxicity), "
                        "`all`, or `none` (default: none, which keeps the gate fast)")
    r.add_argument("--bbq-recordings", help="recorded BBQ answers to score (e.g. recordings/bbq-sample/<model>)")
    r.add_argument("--bbq-items", help="BBQ items JSONL the recordings answer (default: the shipped sample)")
    r.add_argument("--allow-incomplete", action="store_true",
                   help="audit the recorded rows of a set whose manifest declares it incomplete (a pass becomes inconclusive)")
    r.add_argument("--quiet", action="store_true", help="print only the verdict line")
    r.add_argument("--junit", help="also write a JUnit XML report (one testcase per rule check) to this file")
    r.add_argument("--baseline-ref",
                   help="git revision to compare with (e.g. the pull request's base sha): its suite file and recordings "
                        "are read from the repository's history, audited the same way into OUT/base and diffed into "
                        "OUT/diff; a confident regression fails the run")
    r.add_argument("--baseline", help="a base run to compare with instead (an output directory of `run` or its results.json)")
    r.add_argument("--workspace", help="git work tree to read --baseline-ref from (default: the one holding --recordings)")
    add_mlflow(r)
    r.set_defaults(handler=cmd_run)


def run_options(args: argparse.Namespace) -> RunOptions:
    """The typed options of `run`; the library validates every value."""
    from fairness.audit._options import AuditOptions
    from fairness.pipeline._options import RunOptions, parse_evaluators

    audit = AuditOptions(
        bootstrap=args.bootstrap,
        permutations=args.permutations,
        seed=args.seed,
        min_group_size=args.min_group_size,
        allow_small_samples=args.allow_small_samples,
        gate_on=args.gate_on,
        fail_on=args.fail_on,
        scorer_mode=args.scorer_mode,
        threshold=args.threshold,
        regression_threshold=args.regression_threshold,
    )
    return RunOptions(
        suite=args.suite, recordings=args.recordings, out=args.out, evaluators=parse_evaluators(args.evaluators),
        bbq_recordings=args.bbq_recordings, bbq_items=args.bbq_items, allow_incomplete=args.allow_incomplete,
        junit=args.junit, audit=audit, baseline_ref=args.baseline_ref, baseline=args.baseline, workspace=args.workspace,
    )


def add_mlflow(p: argparse.ArgumentParser) -> None:
    p.add_argument("--mlflow", metavar="TRACKING_URI",
                   help="also log this audit as an MLflow run (params, metrics, verdict tags, the outputs as artifacts) "
                        "once its outputs are written; the token comes from MLFLOW_TRACKING_TOKEN, the experiment from "
                        "MLFLOW_EXPERIMENT_NAME (default llm-fairness-check); a server that fails is a warning. "
                        "Needs: pip install 'llm-fairness-check[mlflow]'")


def cmd_run(args: argparse.Namespace) -> int:
    from fairness.pipeline._run import print_outcome, run_audit

    if args.mlflow is not None:
        from fairness.tracking import require_mlflow

        require_mlflow(args.mlflow)
    result = run_audit(run_options(args))
    print_outcome(result, quiet=args.quiet)
    if args.mlflow is not None:
        from fairness.tracking import log_run

        log_run(args.mlflow, result.run, result.out)
    return result.run.gate.exit_code


def add_diff_arguments(d: argparse.ArgumentParser, add_suite) -> None:
    """The options of `diff`."""
    d.add_argument("base", help="base run: an output directory of `run` (or its results.json)")
    d.add_argument("head", help="head run: an output directory of `run` (or its results.json)")
    add_suite(d)
    d.add_argument("--out", help="directory for diff.json and diff.md")
    d.add_argument("--regression-threshold", type=float,
                   help="override the threshold of every regression rule: the change from base to head, in [-1, 1]")
    d.add_argument("--bootstrap", type=int, default=AuditOptions.model_fields["bootstrap"].default)
    d.add_argument("--seed", type=int, default=AuditOptions.model_fields["seed"].default)
    add_mlflow(d)
    d.set_defaults(handler=cmd_diff)


def cmd_diff(args: argparse.Namespace) -> int:
    from fairness.audit._options import AuditOptions
    from fairness.pipeline._diff import run_diff

    if args.mlflow is not None:
        from fairness.tracking import require_mlflow

        require_mlflow(args.mlflow)
    d, md = run_diff(args.base, args.head, suite=args.suite, out=args.out,
                     options=AuditOptions(bootstrap=args.bootstrap, seed=args.seed,
                                          regression_threshold=args.regression_threshold))
    print(md)
    if args.mlflow is not None:
        from fairness.tracking import log_diff

        log_diff(args.mlflow, d, md)
    return d.exit_code
