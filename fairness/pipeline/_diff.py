"""The diff job: compare a base run with a head run and write diff.json and diff.md."""

from __future__ import annotations

from pathlib import Path

from fairness._util.files import check_output_dir, staged_outputs, write_atomic
from fairness.audit._diff import DiffResult, diff_md, diff_runs
from fairness.audit._options import AuditOptions
from fairness.suite._suite import load_suite


def run_diff(base: str | Path, head: str | Path, *, suite: str, out: str | Path | None = None,
             options: AuditOptions | None = None) -> tuple[DiffResult, str]:
    """Diff two runs under `suite`'s regression rules; returns the result and its Markdown.

    `options` supplies the bootstrap size and seed (validated like any audit's).
    """
    options = options or AuditOptions()
    if out is not None:
        check_output_dir(out)
    the_suite = load_suite(suite)
    rules = [r for r in options.effective_rules(the_suite.rules, the_suite.compiled_rubric.metrics) if r.kind == "regression"]
    d = diff_runs(base, head, rules=rules, B=options.bootstrap, seed=options.seed, alpha=options.alpha)
    md = diff_md(d)
    if out is not None:
        with staged_outputs(Path(out)) as staging:
            write_atomic(staging / "diff.json", d.model_dump_json(indent=1) + "\n")
            write_atomic(staging / "diff.md", md)
    return d, md
