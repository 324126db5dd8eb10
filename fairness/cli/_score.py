"""`llm-fairness-check score`: record what scorer plug-ins say about a recording set's outputs.

The scorers come from the suite's rubric (`--suite`, its `scorers:`), or from `--scorers FILE`
(a YAML mapping of scorer name to its settings, or a rubric file with a `scorers:` key). A
judge's key comes from the environment only. `--replay` records nothing and needs no network:
it checks that every output has a verified score.
"""

from __future__ import annotations

from pathlib import Path

from fairness._util.errors import FairnessError


def add_arguments(s) -> None:
    """The options of `score`."""
    s.add_argument("--recordings", required=True, metavar="DIR", help="the recording set (scores go under DIR/scores/)")
    s.add_argument("--suite", help="the suite whose rubric declares the scorers (built-in name or YAML path)")
    s.add_argument("--scorers", metavar="FILE",
                   help="instead of --suite: YAML of scorer name -> settings, or a rubric file with a `scorers:` key")
    s.add_argument("--scorer", action="append", metavar="NAME", help="only this scorer (repeatable; default: all)")
    s.add_argument("--replay", action="store_true", help="record nothing: check every output has a recorded score")
    s.set_defaults(handler=cmd_score)


def load_scorer_configs(path: str | Path) -> dict:
    """The scorers `path` declares (a plain `scorers` mapping or a rubric's `scorers:`)."""
    from fairness._util.yaml_io import read_yaml
    from fairness.scorers._config import parse_scorers

    data = read_yaml(Path(path), "scorers file")
    if isinstance(data, dict) and isinstance(data.get("scorers"), dict):
        data = data["scorers"]
    configs = parse_scorers(data, f"`{path}`")
    if not configs:
        raise FairnessError(f"`{path}` declares no scorers")
    return configs


def cmd_score(args) -> int:
    from fairness.recordings._store import RecordingSet
    from fairness.scorers._store import replay_scores

    if (args.suite is None) == (args.scorers is None):
        raise FairnessError("llm-fairness-check score: give --suite (its rubric's scorers) or --scorers FILE")
    if args.scorers is not None:
        configs, where = load_scorer_configs(args.scorers), f"`{args.scorers}`"
    else:
        from fairness.scorers._config import parse_scorers
        from fairness.suite._suite import load_suite

        configs = parse_scorers(load_suite(args.suite).compiled_rubric.spec.scorers, f"suite `{args.suite}` rubric `scorers`")
        where = f"suite `{args.suite}`'s rubric"
        if not configs:
            raise FairnessError(f"{where} declares no scorers")
    names = args.scorer or list(configs)
    for name in names:
        if name not in configs:
            raise FairnessError(f"--scorer `{name}` is not declared in {where} (declared: {', '.join(configs)})")
    if args.replay:
        rs = RecordingSet(args.recordings)
        texts = [r.output for r in rs.by_key.values()]
        for name in names:
            col = replay_scores(args.recordings, name, configs[name], texts, command=command(args, name))
            print(f"scorer `{name}` ({col.version}): {len(texts)} outputs scored, {col.invalid} without a valid score")
        return 0
    for name in names:
        _record(args.recordings, name, configs[name])
    return 0


def _record(recordings: str | Path, name: str, config) -> None:
    from fairness.scorers._store import record_scores, scores_dir

    m = record_scores(recordings, name, config)
    state = "complete" if m.complete else f"incomplete, {m.texts - m.scored} to go"
    print(f"scorer `{name}` ({m.version}): {m.scored}/{m.texts} distinct outputs scored "
          f"({m.invalid} without a valid score), {state}; in `{scores_dir(recordings, name)}`")


def score_suite(suite_ref: str, recordings: Path) -> None:
    """Record every scorer of the suite's rubric into `recordings` (`generate --score`); none declared: nothing."""
    from fairness.scorers._config import parse_scorers
    from fairness.suite._suite import load_suite

    configs = parse_scorers(load_suite(suite_ref).compiled_rubric.spec.scorers, f"suite `{suite_ref}` rubric `scorers`")
    for name, config in configs.items():
        _record(recordings, name, config)


def command(args, name: str) -> str:
    source = f"--suite {args.suite}" if args.suite is not None else f"--scorers {args.scorers}"
    return f"llm-fairness-check score {source} --recordings {args.recordings} --scorer {name}"
