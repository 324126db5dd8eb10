"""Hugging Face transformers models (a hub id, a local directory or a GGUF file), batched.

Batching changes sampled outputs: the random stream is shared by the rows of a call and
padding changes the numerics. So the plan is fixed over the whole grid (or shard), never
over the rows still pending, and each call is seeded from its own first row; a resumed run
then replays exactly the calls of an uninterrupted one.

The suite's regime is the whole decoding: transformers' built-in default `top_k=50`, and
any defaults a checkpoint ships in its `generation_config.json` (top_k, repetition penalty,
…), are switched off, and `effective_sampling()` reports the merged config generate uses.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import platform
from pathlib import Path
from typing import Any

from fairness._util.errors import FairnessError
from fairness.generate.engines import Completion
from fairness.suite._case import Case, SamplingParams

INSTALL_HINT = "pip install 'llm-fairness-check[live]' (CPU torch: pip install torch --index-url https://download.pytorch.org/whl/cpu)"

NEUTRAL = {
    "top_k": 0,
    "min_p": None,
    "typical_p": 1.0,
    "epsilon_cutoff": 0.0,
    "eta_cutoff": 0.0,
    "repetition_penalty": 1.0,
    "encoder_repetition_penalty": 1.0,
    "no_repeat_ngram_size": 0,
    "length_penalty": 1.0,
    "num_beams": 1,
    "num_return_sequences": 1,
    "bad_words_ids": None,
    "suppress_tokens": None,
    "begin_suppress_tokens": None,
    "forced_bos_token_id": None,
    "forced_eos_token_id": None,
    "renormalize_logits": False,
}
"""Every decoding knob besides temperature and top-p, at its no-op value."""

REPORTED = ("do_sample", "temperature", "top_p", *NEUTRAL, "max_new_tokens", "min_new_tokens", "eos_token_id", "pad_token_id")
GREEDY_UNUSED = ("temperature", "top_p", "top_k", "min_p", "typical_p", "epsilon_cutoff", "eta_cutoff")
TOKEN_IDS = ("bos_token_id", "eos_token_id", "pad_token_id", "decoder_start_token_id")

SEEDING = "torch.manual_seed(first 8 bytes, big-endian, of sha256('<seed>/<grid index of the batch's first row>') & (2**63 - 1))"


def _libs():
    """torch and transformers, imported only when a live run needs them."""
    try:
        import torch
        import transformers
    except ImportError as exc:
        raise FairnessError(f"the transformers engine needs torch and transformers ({exc.name} is missing): {INSTALL_HINT}") from None
    return torch, transformers


def batch_seed(batch: list[Case]) -> int:
    """The seed of one generate call: fixed by the call's rows, not by what ran before it."""
    digest = hashlib.sha256(f"{batch[0].seed}/{batch[0].index}".encode()).digest()
    return int.from_bytes(digest[:8], "big") & (2**63 - 1)


def plan_batches(cases: list[Case], batch_size: int) -> list[list[Case]]:
    """Group by (regime, seed) in order of first appearance, then chunk each group in grid order."""
    groups: dict[tuple[str, int], list[Case]] = {}
    for case in sorted(cases, key=lambda c: c.index):
        groups.setdefault((case.regime, case.seed), []).append(case)
    return [rows[i : i + batch_size] for rows in groups.values() for i in range(0, len(rows), batch_size)]


class TransformersEngine:
    name = "transformers"

    def __init__(
        self,
        source: str,
        *,
        gguf_file: str | None = None,
        device: str | None = None,
        dtype: str | None = None,
        batch_size: int = 16,
        min_new_tokens: int = 0,
        revision: str | None = None,
    ):
        """`min_new_tokens` > 0 forbids EOS before that many tokens: for timing checks only (it is recorded).
        `revision` pins a hub model to a commit (or names a branch/tag to resolve)."""
        torch, transformers = _libs()
        _check_gguf_deps(gguf_file)
        device = device or ("cuda" if torch.cuda.is_available() else "cpu")
        torch_dtype = _resolve_dtype(torch, dtype, device)
        tokenizer, model = _load(transformers, source, gguf_file, torch_dtype, revision)
        self._setup(model.to(device), tokenizer, batch_size, min_new_tokens)
        self.source, self.gguf_file = source, gguf_file

    @classmethod
    def from_model(cls, model: Any, tokenizer: Any, *, batch_size: int = 16, min_new_tokens: int = 0) -> TransformersEngine:
        """Wrap an already built model (e.g. random weights for a timing check) in the same batching path."""
        _libs()
        self = cls.__new__(cls)
        self._setup(model, tokenizer, batch_size, min_new_tokens)
        self.source, self.gguf_file = type(model).__name__, None
        return self

    def _setup(self, model: Any, tokenizer: Any, batch_size: int, min_new_tokens: int) -> None:
        if batch_size < 1:
            raise FairnessError("`--batch-size` must be at least 1")
        self._torch, _ = _libs()
        self.batch_size, self.min_new_tokens = batch_size, min_new_tokens
        self._model = model.eval()
        self._tokenizer = _prepare_tokenizer(tokenizer)
        self.model_defaults_dropped = _neutralise_model_defaults(model, self._tokenizer)
        self.device, self.dtype = str(model.device), str(model.dtype).removeprefix("torch.")

    @property
    def model(self) -> Any:
        return self._model

    @property
    def tokenizer(self) -> Any:
        return self._tokenizer

    # -- manifest ------------------------------------------------------------------
    def backend_info(self) -> dict[str, Any]:
        torch, transformers = _libs()
        versions = {"torch": torch.__version__, "transformers": transformers.__version__, "python": platform.python_version()}
        for extra in ("gguf", "accelerate") if self.gguf_file else ():
            versions[extra] = _version(extra)
        return {"engine": self.name, "versions": versions, "dtype": self.dtype, "device": self.device, "details": self._details()}

    def _details(self) -> dict[str, Any]:
        torch = self._torch
        details = {
            "source": "local directory" if os.path.isabs(self.source) else self.source,
            "gguf_file": self.gguf_file,
            "batch_size": self.batch_size,
            "padding_side": "left",
            "attn_implementation": getattr(self._model.config, "_attn_implementation", None),
            "torch_threads": torch.get_num_threads(),
            "model_generation_defaults_dropped": self.model_defaults_dropped,
            "machine": platform.machine(),
        }
        if self.device.startswith("cuda"):
            details["gpu"] = torch.cuda.get_device_name(self._model.device)
            details["cuda"] = torch.version.cuda
        return details

    def effective_sampling(self, params: SamplingParams) -> dict[str, Any]:
        """The merged config `generate` runs with (checkpoint + library defaults + ours), as read back."""
        merged, _ = self._model._prepare_generation_config(self._generation_config(params))
        out: dict[str, Any] = {k: _plain(getattr(merged, k, None)) for k in REPORTED}
        if not merged.do_sample:
            out.update(dict.fromkeys(GREEDY_UNUSED))
        out["processors"] = self._processor_names(merged)
        out["note"] = "greedy (temperature 0)" if not merged.do_sample else "only the listed processors run, then a seeded multinomial draw"
        return out

    def _processor_names(self, merged: Any) -> list[str] | None:
        """Names of the logits processors generate would build; None if this transformers' API differs."""
        try:
            self._model._prepare_special_tokens(merged, kwargs_has_attention_mask=True, device="cpu")
            procs = self._model._get_logits_processor(generation_config=merged, input_ids_seq_length=1, device="cpu")
        except (TypeError, AttributeError):
            return None
        return [type(p).__name__ for p in procs]

    def batch_plan(self) -> dict[str, Any]:
        return {
            "kind": "batched",
            "batch_size": self.batch_size,
            "grouping": "rows grouped by (regime, seed) in order of first appearance; each group chunked in grid order",
            "order": "grid",
            "padding": "left",
            "seeding": SEEDING,
        }

    # -- generation ----------------------------------------------------------------
    def plan(self, cases: list[Case]) -> list[list[Case]]:
        return plan_batches(cases, self.batch_size)

    def generate(self, batch: list[Case], system_prompt: str) -> list[Completion]:
        if len({(c.regime, c.seed, c.params) for c in batch}) != 1:
            raise ValueError("a batch must share one regime and seed; use plan() to build batches")
        torch = self._torch
        texts = [self.chat_text(system_prompt, c.prompt) for c in batch]
        enc = self._tokenizer(texts, return_tensors="pt", padding=True, add_special_tokens=False).to(self._model.device)
        config = self._generation_config(batch[0].params)
        torch.manual_seed(batch_seed(batch))
        with torch.inference_mode():
            out = self._model.generate(**enc, generation_config=config)
        new = out[:, enc["input_ids"].shape[1] :].tolist()
        prompt_lens = enc["attention_mask"].sum(dim=1).tolist()
        return [self._completion(ids, int(n), config.max_new_tokens) for ids, n in zip(new, prompt_lens, strict=True)]

    def chat_text(self, system_prompt: str, prompt: str) -> str:
        """The prompt as the model sees it: the tokenizer's chat template, ready for the reply."""
        messages = ([{"role": "system", "content": system_prompt}] if system_prompt else []) + [{"role": "user", "content": prompt}]
        return self._tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)

    def _generation_config(self, params: SamplingParams) -> Any:
        _, transformers = _libs()
        base = {k: getattr(self._model.generation_config, k, None) for k in TOKEN_IDS}
        decoding = {"max_new_tokens": params.max_new_tokens, "min_new_tokens": self.min_new_tokens or None}
        if params.temperature == 0:
            return transformers.GenerationConfig(**base, **decoding, do_sample=False)
        sampling = {"do_sample": True, "temperature": params.temperature, "top_p": params.top_p, **NEUTRAL}
        return transformers.GenerationConfig(**base, **decoding, **sampling)

    def _completion(self, ids: list[int], prompt_tokens: int, max_new_tokens: int) -> Completion:
        """Count up to and including the first EOS; what follows it is padding."""
        eos = self._eos_ids()
        end = next((i for i, t in enumerate(ids) if t in eos), None)
        if end is None:
            body, count = ids, len(ids)
            reason = "length" if count >= max_new_tokens else "stop"
        else:
            body, count, reason = ids[:end], end + 1, "stop"
        text = self._tokenizer.decode(body, skip_special_tokens=True).strip()
        return Completion(text=text, prompt_tokens=prompt_tokens, completion_tokens=count, finish_reason=reason)

    def _eos_ids(self) -> set[int]:
        eos = self._model.generation_config.eos_token_id
        return set(eos if isinstance(eos, list) else [eos]) - {None}

    def close(self) -> None:
        self._model = None


# -- loading -----------------------------------------------------------------------
def _check_gguf_deps(gguf_file: str | None) -> None:
    if not gguf_file:
        return
    missing = [m for m in ("gguf", "accelerate") if importlib.util.find_spec(m) is None]
    if missing:
        raise FairnessError(f"loading a GGUF file with transformers needs {' and '.join(missing)}: {INSTALL_HINT}")


def _resolve_dtype(torch: Any, dtype: str | None, device: str) -> Any:
    """bfloat16 on CUDA, float32 on the CPU (where bf16 matmuls are slow or emulated), unless asked."""
    name = dtype or ("bfloat16" if device.startswith("cuda") else "float32")
    allowed = {"bfloat16": torch.bfloat16, "float16": torch.float16, "float32": torch.float32}
    if name not in allowed:
        raise FairnessError(f"`--dtype` must be one of {', '.join(allowed)}, got `{name}`")
    return allowed[name]


def _load(
    transformers: Any, source: str, gguf_file: str | None, torch_dtype: Any, revision: str | None = None
) -> tuple[Any, Any]:
    """Tokenizer and model from a local directory or the HF cache; HF_HUB_OFFLINE is honoured by the hub client."""
    local = Path(source).is_dir()
    if gguf_file and local and not (Path(source) / gguf_file).is_file():
        raise FairnessError(f"GGUF file `{Path(source) / gguf_file}` does not exist")
    kwargs: dict[str, Any] = {"gguf_file": gguf_file} if gguf_file else {}
    if local:
        kwargs["local_files_only"] = True
    elif revision:
        kwargs["revision"] = revision
    dtype_kw = "dtype" if _at_least(transformers.__version__, (4, 56)) else "torch_dtype"
    try:
        tokenizer = transformers.AutoTokenizer.from_pretrained(source, **kwargs)
        model = transformers.AutoModelForCausalLM.from_pretrained(source, **kwargs, **{dtype_kw: torch_dtype})
    except OSError as exc:
        raise FairnessError(f"cannot load `{source}` with transformers: {exc}") from None
    return tokenizer, model


def _prepare_tokenizer(tokenizer: Any) -> Any:
    """Left padding, so every row's continuation starts at the same column; pad with EOS if unset."""
    tokenizer.padding_side = "left"
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    if not getattr(tokenizer, "chat_template", None):
        raise FairnessError("the tokenizer has no chat template; the suite's prompts are chat messages")
    return tokenizer


def _neutralise_model_defaults(model: Any, tokenizer: Any) -> dict[str, Any]:
    """Keep only the checkpoint's token ids in its generation config; return what was dropped."""
    _, transformers = _libs()
    old = model.generation_config
    ids = {k: getattr(old, k, None) for k in TOKEN_IDS}
    if ids["pad_token_id"] is None:
        ids["pad_token_id"] = tokenizer.pad_token_id
    if ids["eos_token_id"] is None:
        ids["eos_token_id"] = tokenizer.eos_token_id
    dropped = {k: _plain(v) for k, v in old.to_diff_dict().items() if k not in TOKEN_IDS and k != "transformers_version"}
    model.generation_config = transformers.GenerationConfig(**ids)
    return dropped


def _plain(value: Any) -> Any:
    """JSON-friendly copy of a config value."""
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    return str(value)


def _version(module: str) -> str:
    try:
        from importlib.metadata import version

        return version(module)
    except (ImportError, ValueError):  # PackageNotFoundError is an ImportError
        return "unknown"


def _at_least(version: str, minimum: tuple[int, int]) -> bool:
    parts = []
    for piece in version.split(".")[:2]:
        digits = "".join(ch for ch in piece if ch.isdigit())
        parts.append(int(digits or 0))
    return tuple(parts) >= minimum
