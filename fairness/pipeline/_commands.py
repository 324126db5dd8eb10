"""The exact command that reproduces a run, written into its card (`reproducibility.replay_command`).

Every path is written as the run shows its recordings: relative to the directory the audit ran
in (the repository's root in CI), so the command is run from there. A suite that is a file is
named by that path, a built-in suite by its name; every option that changes results.json and
differs from its default is spelled out. `--out` is last, so a reader (or a test) can swap it.
"""

from __future__ import annotations

import os
import shlex
from pathlib import Path

from fairness.audit._options import AuditOptions
from fairness.pipeline._options import RunOptions
from fairness.suite._suite import BUILTIN_SUITES

OUT_PLACEHOLDER = "out"
"""The `--out` the card's command names (any empty directory will do)."""


def shown_path(path: Path | str, root: Path | None = None) -> str:
    """`path` relative to `root` (default: the working directory), as the run records its recordings."""
    try:
        return os.path.relpath(Path(path).resolve(), (root or Path.cwd()).resolve())
    except ValueError:
        return Path(path).name


def replay_command(options: RunOptions) -> str:
    """`llm-fairness-check run …` with the suite, recordings and every non-default option that affects results."""
    root = options.shown_root
    suite = options.suite if options.suite in BUILTIN_SUITES else shown_path(options.suite, root)
    argv = ["llm-fairness-check", "run", "--suite", suite, "--recordings", shown_path(options.recordings, root)]
    a, default = options.audit, AuditOptions()
    flags: list[tuple[str, object]] = [
        ("--scorer-mode", a.scorer_mode), ("--threshold", a.threshold), ("--regression-threshold", a.regression_threshold),
        ("--min-group-size", a.min_group_size),
    ]
    argv += [x for flag, value in flags if value is not None for x in (flag, str(value))]
    for flag, name in (("--gate-on", "gate_on"), ("--fail-on", "fail_on"), ("--bootstrap", "bootstrap"),
                       ("--permutations", "permutations"), ("--seed", "seed")):
        if getattr(a, name) != getattr(default, name):
            argv += [flag, str(getattr(a, name))]
    if a.allow_small_samples:
        argv.append("--allow-small-samples")
    if options.allow_incomplete:
        argv.append("--allow-incomplete")
    if options.evaluators:
        argv += ["--evaluators", ",".join(options.evaluators)]
    for flag, path in (("--bbq-recordings", options.bbq_recordings), ("--bbq-items", options.bbq_items),
                       ("--baseline", options.baseline), ("--workspace", options.workspace)):
        if path is not None:
            argv += [flag, shown_path(path, root)]
    if options.baseline_ref is not None:
        argv += ["--baseline-ref", options.baseline_ref]
    argv += ["--out", OUT_PLACEHOLDER]
    return shlex.join(argv)
