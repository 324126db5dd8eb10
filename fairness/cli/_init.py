"""`llm-fairness-check init`: scaffold the fairness check into a repository.

Writes the pull-request workflow (the Action pinned by full commit sha, read-only and
fork-safe, comparing with the base revision), a regeneration workflow for the chosen
provider and, optionally, an editable copy of the default suite; then prints the three
commands that finish the adoption (record, commit, push). Existing files are never
overwritten without `--force`, and the files go in together or not at all, never through a
symlink that leads out of the repository (`_scaffold`). The templates are package data
(`fairness/cli/templates`), so other tools can render them too.

Every value rendered into a YAML scalar is quoted (a `@Q_…@` token): unquoted, `--model null`
would read as null and `--model 1.10` as the float 1.1. A value never reaches a run script as
text, only through an environment variable, so only `${{` (which GitHub evaluates even inside
quotes) is refused in a model name. URLs are echoed without their credentials.
"""

from __future__ import annotations

import json
import re
import shlex
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from urllib.parse import urlparse

from fairness import _release
from fairness._util.errors import FairnessError
from fairness._version import __version__

DEFAULT_SUITE = "fairness-cards/qwen-v0.1"
ACTION_REPO = _release.ACTION_REPOSITORY
"""Where the Action is published (fairness/_release.py); `--action-ref` names another (a fork, a mirror)."""
PR_WORKFLOW = ".github/workflows/fairness-check.yml"
REGEN_WORKFLOW = ".github/workflows/fairness-regenerate.yml"
MONITOR_WORKFLOW = ".github/workflows/fairness-monitor.yml"
MONITOR_MAPPING = "fairness-check/monitor-mapping.yaml"
SUITE_COPY = "fairness-check/suite.yaml"
SUITE_DOCS = f"{_release.CODE_URL}/blob/{_release.ACTION_TAG or 'main'}/docs/suites.md"
"""The suite reference, as of the release this package was built from (a source install: main)."""
ACTIONLINT_CONFIG = ".github/actionlint.yaml"
ACTIONLINT_GPU = (
    "# actionlint configuration, written by `llm-fairness-check init`: the regeneration job runs on a\n"
    "# self-hosted runner labelled `gpu` (https://github.com/rhysd/actionlint/blob/main/docs/config.md)\n"
    "self-hosted-runner:\n  labels:\n    - gpu\n"
)
PROVIDERS = ("openai", "anthropic", "openai-compatible", "local")
RUNNERS: dict[str, str | list[str]] = {"ubuntu-latest": "ubuntu-latest", "self-hosted-gpu": ["self-hosted", "gpu"]}
DEFAULT_SECRET = {"openai": "OPENAI_API_KEY", "anthropic": "ANTHROPIC_API_KEY"}
ENGINE = {"openai": "openai", "anthropic": "anthropic", "openai-compatible": "openai", "local": "transformers"}
EXTRAS = {"openai": "hosted", "anthropic": "hosted", "openai-compatible": "hosted", "local": "live"}
_SHA = re.compile(r"[0-9a-f]{40}")
_REPO = re.compile(r"[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+")
_PLAIN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._/:+@-]*")
"""Values written verbatim into YAML and shell: no quotes, spaces, `$` or expressions."""
_SECRET = re.compile(r"[A-Z_][A-Z0-9_]*")
_USERINFO = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*://)?[^/?#]*@")
_CRON = re.compile(r"[0-9*/,\- ]+")
REGEN_SCHEDULE = "17 4 * * 1"
PROVIDER_FLAGS = ("base_url", "secret", "runner", "recordings", "schedule")
"""Flags of the model provider's scaffold: refused in a monitor-only scaffold (they would be silently unused)."""


def add_arguments(p) -> None:
    """The options of `init`."""
    p.add_argument("--dir", default=".", help="repository to scaffold into (default: the working directory)")
    p.add_argument("--provider", choices=PROVIDERS,
                   help="who answers the prompts when recordings are regenerated: a hosted API (openai, anthropic; "
                        "key from a repository secret), an OpenAI-compatible server (--base-url) or a local model "
                        "on a self-hosted GPU runner (with --model; omit both for a `--monitor` scaffold alone)")
    p.add_argument("--model", help="the model to audit (hosted model name, or hub id / path for local; with --provider)")
    p.add_argument("--base-url", help="openai-compatible only: the server's URL, e.g. https://llm.example.com/v1")
    p.add_argument("--secret", help="repository secret holding the API key (default OPENAI_API_KEY / ANTHROPIC_API_KEY; "
                                    "none for openai-compatible unless given)")
    p.add_argument("--runner", choices=sorted(RUNNERS),
                   help="runner of the regeneration job (default: self-hosted-gpu for local, else ubuntu-latest)")
    p.add_argument("--recordings", help="recording directory in the repository (default: fairness-check/recordings/<model>)")
    p.add_argument("--with-suite", action="store_true",
                   help=f"also write an editable copy of the default suite to {SUITE_COPY} and use it")
    p.add_argument("--suite", help=f"suite the workflows use (default: {SUITE_COPY} with --with-suite, else {DEFAULT_SUITE})")
    p.add_argument("--action-ref",
                   help="the Action to pin, OWNER/REPO@<40-hex commit> or a bare commit of "
                        f"{ACTION_REPO} (default: the release this package was built from; a source install "
                        "has none and needs this flag)")
    p.add_argument("--schedule", help=f"cron schedule of the regeneration workflow (default: weekly, {REGEN_SCHEDULE!r})")
    p.add_argument("--monitor", action="store_true",
                   help="also write a scheduled workflow that audits production logs (`llm-fairness-check monitor`) on "
                        "a self-hosted runner that can read them, and a mapping file to fill in")
    p.add_argument("--monitor-logs", help="--monitor: the logs on that runner, a file, directory or glob "
                                          "(e.g. /var/log/llm/*.jsonl.gz)")
    p.add_argument("--monitor-runner", default="fairness-logs",
                   help="--monitor: the label of the self-hosted runner that can read the logs (default fairness-logs)")
    p.add_argument("--monitor-mapping", default=MONITOR_MAPPING,
                   help=f"--monitor: the mapping file in the repository (default {MONITOR_MAPPING}; written if absent)")
    p.add_argument("--monitor-schedule", default="23 5 * * *", help="--monitor: cron schedule (default: daily)")
    p.add_argument("--monitor-window", default="day", help="--monitor: day, week or N records per window (default day)")
    p.add_argument("--monitor-sample", type=int, default=1, help="--monitor: keep 1 record in N (default 1: all)")
    p.add_argument("--force", action="store_true", help="overwrite existing files")
    p.set_defaults(handler=cmd_init)


@dataclass(frozen=True)
class Plan:
    files: dict[str, str]
    """Repository-relative path → content."""
    commands: list[tuple[str, str]]
    """The next three steps as (label, command): record (fill in the mapping, for a monitor alone), commit, push."""


def _plain(name: str, value: str) -> str:
    if not _PLAIN.fullmatch(value) or "${{" in value:
        raise FairnessError(f"`--{name}` {value!r} may hold only letters, digits and . _ / : + @ -")
    return value


def _model(value: str) -> str:
    """Any one-line model name: it is quoted in YAML and reaches scripts only as `$MODEL`."""
    if not value.strip() or value != value.strip() or "${{" in value or any(ord(ch) < 32 or ord(ch) == 127 for ch in value):
        raise FairnessError(f"`--model` {value!r} must be one line without `${{{{` (GitHub would evaluate it)")
    return value


def _yaml(value: object) -> str:
    """`value` as a YAML flow scalar or sequence that always reads back as written (JSON is YAML)."""
    return json.dumps(value)


def without_userinfo(url: str) -> str:
    """`url` with any `user:password@` removed, for echoing it."""
    return _USERINFO.sub(lambda m: m.group(1) or "", url, count=1)


def _repo_path(name: str, value: str) -> str:
    """A path inside the repository: plain, relative, and never climbing out with `..`."""
    _plain(name, value)
    if ".." in value.split("/"):
        raise FairnessError(f"`--{name}` {value!r} must stay inside the repository (no `..`)")
    return value


_CRON_RANGES = ((0, 59), (0, 23), (1, 31), (1, 12), (0, 6))
"""minute, hour, day of month, month, day of week: what GitHub's scheduler accepts."""


def _cron(value: str, flag: str = "schedule") -> str:
    """A five-field numeric cron expression whose every number is in its field's range
    (GitHub rejects the whole workflow file otherwise, silently disabling the schedule)."""
    fields = value.split()
    if not _CRON.fullmatch(value) or len(fields) != 5:
        raise FairnessError(f"`--{flag}` {value!r} must be a five-field cron expression")
    for field, (low, high) in zip(fields, _CRON_RANGES, strict=True):
        for part in field.split(","):
            span, _, step = part.partition("/")
            numbers = [] if span == "*" else span.split("-")
            if (step and not step.isdigit()) or len(numbers) > 2 or any(not n.isdigit() for n in numbers) \
                    or any(not low <= int(n) <= high for n in numbers) or (step and int(step) < 1):
                raise FairnessError(f"`--{flag}` {value!r}: field `{field}` must use numbers in {low}-{high}")
    return value


def _slug(model: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "-", model.rstrip("/").rsplit("/", 1)[-1]).strip("-.") or "model"


NO_REF = ("no Action commit to pin: this llm-fairness-check was not built by a release; pass --action-ref "
          f"{ACTION_REPO}@<40-hex sha> (the sha of `v1`: git ls-remote https://github.com/{ACTION_REPO} refs/tags/v1)")


def action_ref(value: str | None, stamped: tuple[str, str | None, str | None] | None = None) -> tuple[str, str, str]:
    """(OWNER/REPO, 40-hex sha, version comment) to pin: `--action-ref`, else the release stamped into
    fairness/_release.py (`stamped` stands in for it in tests); neither is bad input, never a guess."""
    if value:
        repo, _, sha = value.rpartition("@")
        repo = repo or ACTION_REPO
        if not _REPO.fullmatch(repo) or not _SHA.fullmatch(sha):
            raise FairnessError(f"`--action-ref` {value!r} must be OWNER/REPO@<40-hex commit sha> or a bare 40-hex sha "
                                "(a tag or branch can move; a full sha cannot)")
        return repo, sha, "pinned with --action-ref"
    repo, ref, tag = stamped or (_release.ACTION_REPOSITORY, _release.ACTION_REF, _release.ACTION_TAG)
    if ref is None:
        raise FairnessError(NO_REF)
    if not _REPO.fullmatch(repo) or not _SHA.fullmatch(ref):  # a bad stamp is a bug in the release, not input
        raise RuntimeError(f"fairness/_release.py holds an invalid pin {repo!r}@{ref!r}")
    return repo, ref, tag or "release"


def _base_url(value: str | None, provider: str) -> str | None:
    if provider != "openai-compatible":
        if value:
            raise FairnessError("`--base-url` is for `--provider openai-compatible` only")
        return None
    if not value:
        raise FairnessError("`--provider openai-compatible` needs `--base-url` (the server's URL, e.g. https://host/v1)")
    shown = without_userinfo(value)
    try:
        url = urlparse(value)
        ok = url.scheme in ("http", "https") and bool(url.hostname) and bool(_PLAIN.fullmatch(value))
    except ValueError:  # e.g. an unclosed IPv6 bracket
        ok = False
    if not ok:
        raise FairnessError(f"`--base-url` {shown!r} must be an http(s) URL without spaces")
    if "@" in url.netloc:
        raise FairnessError(f"`--base-url` {shown!r} must not carry credentials (user:password@): the key goes in a "
                            "repository secret (--secret)")
    return value


def _secret(value: str | None, provider: str) -> str | None:
    secret = value or DEFAULT_SECRET.get(provider)
    if provider == "local" and value:
        raise FairnessError("`--secret` is for the hosted providers; a local model needs no key")
    if secret is not None and not _SECRET.fullmatch(secret):
        raise FairnessError(f"`--secret` {secret!r} must be a secret name (A-Z, 0-9, _)")
    return secret


def _runner(value: str | None, provider: str) -> str:
    runner = value or ("self-hosted-gpu" if provider == "local" else "ubuntu-latest")
    if provider == "local" and runner != "self-hosted-gpu":
        raise FairnessError("`--provider local` runs the model on a GPU: use `--runner self-hosted-gpu`")
    return runner


def _template(name: str, tokens: dict[str, str]) -> str:
    text = resources.files("fairness.cli").joinpath(f"templates/{name}").read_text(encoding="utf-8")
    for key, value in tokens.items():
        text = text.replace(f"@{key}@", value)
    left = re.search(r"@[A-Z_]+@", text)
    if left:  # a template token nobody filled: a bug, not bad input
        raise RuntimeError(f"template {name}: unfilled token {left.group(0)}")
    return text


def _suite_copy(name: str) -> str:
    text = resources.files("fairness.suite").joinpath("builtin/qwen-v0.1.yaml").read_text(encoding="utf-8")
    head = (f"# An editable copy of the built-in suite `{DEFAULT_SUITE}` (llm-fairness-check {__version__}),\n"
            "# written by `llm-fairness-check init`. Edit the grid (families, placeholders, attributes, regimes,\n"
            "# seeds) and the rules; a changed grid needs new recordings (`llm-fairness-check generate`).\n"
            f"# Every key, its default and the checks it must pass: {SUITE_DOCS}\n"
            "# (the JSON Schema, for an editor: `llm-fairness-check schema suite > suite.schema.json`).\n"
            "# Say what the audit is for on its card (otherwise the card says the suite did not state it):\n"
            "#   card:\n"
            "#     intended_use: [\"What this audit's conclusions are for.\"]\n"
            "#     out_of_scope: [\"Uses they do not support.\"]\n"
            "#     model_description: \"The audited model or system, and how it is deployed.\"\n"
            "#     contact: \"who answers for this audit\"\n")
    body, n = re.subn(r"(?m)^name: .*$", f"name: {name}", text, count=1)
    assert n == 1
    return head + body


def plan(args) -> Plan:
    if args.provider is None and args.model is None:
        return monitor_plan(args)
    if args.provider is None or args.model is None:
        raise FairnessError("`--provider` and `--model` go together (the model whose recordings the pull-request "
                            "check replays)")
    provider = args.provider
    model = _model(args.model)
    base_url = _base_url(args.base_url, provider)
    secret = _secret(args.secret, provider)
    runner = _runner(args.runner, provider)
    repo, sha, pin_note = action_ref(args.action_ref)
    if args.suite and args.with_suite:
        raise FairnessError("`--with-suite` writes its own suite; drop `--suite`")
    suite = _repo_path("suite", args.suite or (SUITE_COPY if args.with_suite else DEFAULT_SUITE))
    recordings = _repo_path("recordings", args.recordings or f"fairness-check/recordings/{_slug(model)}")
    schedule = _cron(args.schedule or REGEN_SCHEDULE)
    engine = ENGINE[provider]
    gen_args = f'--base-url "{base_url}" ' if base_url else ""
    key = "OPENAI_API_KEY" if engine == "openai" else "ANTHROPIC_API_KEY"
    secret_env = f"          {key}: {_yaml(f'${{{{ secrets.{secret} }}}}')}\n" if secret else ""
    if engine == "transformers":  # a hub model is pinned to a commit (`regenerate` refuses a moving branch)
        gen_args += '--revision "$MODEL_REVISION" '
        secret_env += f"          MODEL_REVISION: {_yaml('${{ vars.FAIRNESS_MODEL_REVISION }}')}\n"
    note = {"openai": "the OpenAI API", "anthropic": "the Anthropic API", "local": "a local model on a GPU runner",
            "openai-compatible": f"the OpenAI-compatible server {base_url}"}[provider]
    tokens = {
        "VERSION": __version__, "RECORDINGS": recordings,  # in comments and a block scalar: plain text there
        "EXTRAS": EXTRAS[provider], "ENGINE": engine, "GENERATE_ARGS": gen_args, "SECRET_ENV": secret_env,
        "PROVIDER_NOTE": note, "PIN_NOTE": pin_note,
        "Q_ACTION": _yaml(f"{repo}@{sha}"), "Q_ACTION_REPO": _yaml(repo), "Q_ACTION_SHA": _yaml(sha),
        "Q_SUITE": _yaml(suite), "Q_RECORDINGS": _yaml(recordings), "Q_MODEL": _yaml(model), "Q_CRON": _yaml(schedule),
        "Q_RUNS_ON": _yaml(RUNNERS[runner]),
    }
    files = {PR_WORKFLOW: _template("fairness-check.yml", tokens), REGEN_WORKFLOW: _template("fairness-regenerate.yml", tokens)}
    labels = ["gpu"] if runner == "self-hosted-gpu" else []
    if getattr(args, "monitor", False):
        label = _monitor_files(args, tokens, files)
        labels.append(label)
    if labels == ["gpu"]:
        files[ACTIONLINT_CONFIG] = ACTIONLINT_GPU
    elif labels:
        files[ACTIONLINT_CONFIG] = ACTIONLINT_LABELS + "".join(f"    - {name}\n" for name in labels)
    if args.with_suite:
        files[SUITE_COPY] = _suite_copy(f"{_slug(str(Path(args.dir).resolve()))}/fairness-suite")
    record = ["llm-fairness-check", "generate", "--suite", suite, "--engine", engine, "--model", model]
    if base_url:
        record += ["--base-url", base_url]
    record += ["--live", "--out", recordings]
    commit = ["git", "add", *files, recordings]
    key_note = f"  (with {'OPENAI' if engine == 'openai' else 'ANTHROPIC'}_API_KEY set)" if secret else ""
    commands = [
        ("record", shlex.join(record) + key_note),
        ("commit", shlex.join(commit) + " && "
         + shlex.join(["git", "commit", "-m", f"Add the fairness check with the recordings of {model}"])),
        ("push", "git push"),
    ]
    return Plan(files, commands)


def monitor_plan(args) -> Plan:
    """`init --monitor` without a model provider: the scheduled monitor workflow, its mapping file and the
    actionlint label of its runner, nothing else (no pull-request check, no regeneration, no key)."""
    if not getattr(args, "monitor", False):
        raise FairnessError("`init` needs `--provider` and `--model` (the model whose recordings the pull-request check "
                            "replays), or `--monitor` alone for the scheduled production-log monitor")
    given = next((f for f in PROVIDER_FLAGS if getattr(args, f, None) is not None), None)
    if given is not None:
        flag = "--" + given.replace("_", "-")
        raise FairnessError(f"`{flag}` is for the model's scaffold (`--provider` and `--model`); `--monitor` alone "
                            "writes only the monitor workflow and its mapping")
    repo, sha, pin_note = action_ref(args.action_ref)
    if args.suite and args.with_suite:
        raise FairnessError("`--with-suite` writes its own suite; drop `--suite`")
    suite = _repo_path("suite", args.suite or (SUITE_COPY if args.with_suite else DEFAULT_SUITE))
    tokens = {"VERSION": __version__, "PIN_NOTE": pin_note, "Q_ACTION_REPO": _yaml(repo), "Q_ACTION_SHA": _yaml(sha),
              "Q_SUITE": _yaml(suite)}
    files: dict[str, str] = {}
    label = _monitor_files(args, tokens, files)
    files[ACTIONLINT_CONFIG] = ACTIONLINT_LABELS + f"    - {label}\n"
    if args.with_suite:
        files[SUITE_COPY] = _suite_copy(f"{_slug(str(Path(args.dir).resolve()))}/fairness-suite")
    mapping = _repo_path("monitor-mapping", args.monitor_mapping)
    commands = [("edit", f"{mapping}: your logs' field names (`llm-fairness-check schema mapping`)"),
                ("commit", shlex.join(["git", "add", *files]) + " && "
                 + shlex.join(["git", "commit", "-m", "Add the scheduled fairness monitor of the production logs"])),
                ("push", "git push")]
    return Plan(files, commands)


MONITOR_MAPPING_TEXT = """\
# Which fields of the production logs `llm-fairness-check monitor` reads (written by
# `llm-fairness-check init --monitor`; schema: `llm-fairness-check schema mapping`). Rename the
# values to your logs' field names; a missing field is an error naming it.
text: output            # the model's output text (the one field the rubric scores)
groups: [gender]        # group attribute fields; or `slice: FIELD` for a field already holding the slice
timestamp: timestamp    # ISO-8601 or a timestamp column (UTC): day and week windows are cut from it
unit: user_id           # optional: records of one user (or conversation) are correlated; delete if none
id: request_id          # a stable record id: the 1/N sample and row windows are keyed on it
"""

ACTIONLINT_LABELS = (
    "# actionlint configuration, written by `llm-fairness-check init`: the self-hosted runners' labels\n"
    "# (https://github.com/rhysd/actionlint/blob/main/docs/config.md)\n"
    "self-hosted-runner:\n  labels:\n"
)


def _monitor_files(args, tokens: dict[str, str], files: dict[str, str]) -> str:
    """Add the monitor workflow (and the mapping file when the repository has none) to `files`; its runner label."""
    if not args.monitor_logs:
        raise FairnessError("`--monitor` needs `--monitor-logs` (the logs on the runner: a file, directory or glob)")
    logs = args.monitor_logs
    if not logs.strip() or "${{" in logs or any(ord(ch) < 32 or ord(ch) == 127 for ch in logs):
        raise FairnessError(f"`--monitor-logs` {logs!r} must be one line without `${{{{` (GitHub would evaluate it)")
    label = _plain("monitor-runner", args.monitor_runner)
    mapping = _repo_path("monitor-mapping", args.monitor_mapping)
    _cron(args.monitor_schedule, "monitor-schedule")
    window = args.monitor_window
    if window not in ("day", "week") and not (window.isdigit() and int(window) > 0):
        raise FairnessError(f"`--monitor-window` {window!r} must be day, week or a positive number of records")
    if not 1 <= args.monitor_sample <= 1_000_000_000:
        raise FairnessError(f"`--monitor-sample` {args.monitor_sample} must be between 1 and 1000000000")
    tokens = {**tokens, "MONITOR_LABEL": label, "Q_MONITOR_CRON": _yaml(args.monitor_schedule),
              "Q_MONITOR_RUNS_ON": _yaml(["self-hosted", label]), "Q_MONITOR_LOGS": _yaml(logs),
              "Q_MONITOR_MAPPING": _yaml(mapping), "Q_MONITOR_SAMPLE": _yaml(str(args.monitor_sample)),
              "Q_MONITOR_WINDOW": _yaml(window)}
    files[MONITOR_WORKFLOW] = _template("fairness-monitor.yml", tokens)
    if not (Path(args.dir) / mapping).exists():
        files[mapping] = MONITOR_MAPPING_TEXT
    return label


def cmd_init(args) -> int:
    root = Path(args.dir)
    if not root.is_dir():
        raise FairnessError(f"`--dir` `{root}` is not a directory")
    p = plan(args)
    from fairness.cli._scaffold import place

    for path in place(root, p.files, force=args.force):
        print(f"wrote {path}")
    print("next:")
    for label, command in p.commands:
        print(f"  {label + ':':<8}{command}")
    return 0
