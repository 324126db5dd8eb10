"""`dry-run`: what a live run would request and roughly cost, before any money is spent.

Never opens a socket and needs no API key: the request count comes from the grid, the
rows already recorded from the content keys in the output directory, and the cost from a
price table with tokens estimated as prompt characters / 4 plus `max_new_tokens`.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING

from fairness._util.errors import FairnessError
from fairness._util.yaml_io import loads_yaml
from fairness.generate._loop import shard_cases
from fairness.generate.engines.hosted import HOSTED_ENGINES, Price, ProviderConfig, hosted_model_id
from fairness.recordings._store import MANIFEST, RECORDS, content_key, iter_records, read_manifest
from fairness.suite._suite import Suite

if TYPE_CHECKING:
    from fairness.generate._options import EngineOptions

_SNAPSHOT_SUFFIX = re.compile(r"^-(\d{4}-\d{2}-\d{2}|\d{8}|latest)$")


@dataclass(frozen=True)
class PriceTable:
    models: dict[str, Price]
    as_of: str

    def lookup(self, model: str) -> tuple[str, Price] | None:
        """Exact name, else the base name of a dated snapshot (`gpt-4o-2024-08-06` → `gpt-4o`)."""
        if model in self.models:
            return model, self.models[model]
        for base in sorted(self.models, key=len, reverse=True):
            if model.startswith(base) and _SNAPSHOT_SUFFIX.match(model[len(base) :]):
                return base, self.models[base]
        return None


def load_prices(overrides: dict[str, Price] | None = None) -> PriceTable:
    text = resources.files("fairness.generate").joinpath("prices.yaml").read_text(encoding="utf-8")
    raw = loads_yaml(text, "price table `fairness/generate/prices.yaml`")
    models = {name: Price.model_validate(p) for name, p in raw["models"].items()}
    return PriceTable({**models, **(overrides or {})}, str(raw.get("as_of", "unknown")))


def estimate_tokens(text: str) -> int:
    """Roughly four characters per token for English text; good enough for a budget."""
    return math.ceil(len(text) / 4)


@dataclass(frozen=True)
class DryRun:
    requests: int
    recorded: int
    input_tokens: int
    output_tokens: int
    """Upper bound: every pending row at `max_new_tokens`."""
    model_id: str
    manifest_model_id: str | None

    @property
    def pending(self) -> int:
        return self.requests - self.recorded


def model_id_for(args: EngineOptions) -> str:
    """The content-key model id `generate` would use, derived without loading the model."""
    if args.engine in HOSTED_ENGINES:
        return hosted_model_id(args)
    if args.model_id:
        return args.model_id
    from fairness.generate import _model_fetch as _models

    known = _models.KNOWN_MODELS.get(args.model)
    if known:
        return known.model_id
    return Path(args.model).stem if args.engine == "llamacpp" else args.model


def plan_dry_run(suite: Suite, model_id: str, out: Path, shard: tuple[int, int] | None = None) -> DryRun:
    cases = shard_cases(suite.expand(), shard)
    keys = {c.row_id: content_key(model_id, suite.system_prompt, c.prompt, c.params, c.seed) for c in cases}
    done = _recorded_keys(out) & set(keys.values())
    pending = [c for c in cases if keys[c.row_id] not in done]
    manifest_id = read_manifest(out).model.id if (out / MANIFEST).exists() else None
    return DryRun(
        requests=len(cases),
        recorded=len(done),
        input_tokens=sum(estimate_tokens(suite.system_prompt + c.prompt) for c in pending),
        output_tokens=sum(c.params.max_new_tokens for c in pending),
        model_id=model_id,
        manifest_model_id=manifest_id,
    )


def _recorded_keys(out: Path) -> set[str]:
    path = out / RECORDS
    if not path.is_file():
        return set()
    return {rec.key for rec in iter_records(path)}


def describe(run: DryRun, *, engine: str, model: str, out: Path, config: ProviderConfig) -> str:
    lines = [
        f"{run.requests} requests for the grid ({engine} `{model}`, model id `{run.model_id}`)",
        f"{run.recorded} already recorded in `{out}`; {run.pending} to go",
    ]
    if run.manifest_model_id is not None and run.manifest_model_id != run.model_id:
        lines.append(f"warning: `{out}` holds recordings of model `{run.manifest_model_id}`; generate would refuse it")
    if run.pending and config.max_requests_per_run is not None and config.max_requests_per_run < run.pending:
        lines.append(f"max_requests_per_run {config.max_requests_per_run} will stop this run early")
    lines.append(
        f"estimated tokens to go: ~{run.input_tokens:,} input (characters / 4), "
        f"at most {run.output_tokens:,} output (max_new_tokens per row)"
    )
    lines.append(_cost_line(run, engine, model, config))
    return "\n".join(lines)


def _cost_line(run: DryRun, engine: str, model: str, config: ProviderConfig) -> str:
    if engine not in HOSTED_ENGINES:
        return f"estimated cost: none per token (the {engine} engine runs locally)"
    table = load_prices(config.prices)
    found = table.lookup(model)
    if found is None:
        return (
            f"estimated cost: unknown model `{model}`: no price in the table; add "
            f"`prices: {{{model}: {{input: …, output: …}}}}` (USD per 1M tokens) to --provider-config"
        )
    name, price = found
    cost = run.input_tokens * price.input / 1e6 + run.output_tokens * price.output / 1e6
    origin = "--provider-config" if name in config.prices else f"fairness/generate/prices.yaml, {table.as_of}"
    return (
        f"estimated cost to go: at most ${cost:,.2f} "
        f"(`{name}`: ${price.input:g} input / ${price.output:g} output per 1M tokens; {origin})"
    )


def dry_run(suite: Suite, engine: EngineOptions, out: Path, shard: tuple[int, int] | None = None) -> str:
    """The plan of a live run as text; no network, no key."""
    from fairness.generate.engines.hosted import effective_config

    config = effective_config(engine) if engine.engine in HOSTED_ENGINES else ProviderConfig()
    if engine.engine not in HOSTED_ENGINES and engine.provider_config:
        raise FairnessError("--provider-config applies to the openai and anthropic engines only")
    run = plan_dry_run(suite, model_id_for(engine), out, shard)
    return describe(run, engine=engine.engine, model=engine.model, out=out, config=config)
