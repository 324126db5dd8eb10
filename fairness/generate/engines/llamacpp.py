"""GGUF models on the CPU through llama.cpp (`xllamacpp`, a prebuilt wheel).

Determinism, measured: with one slot (`n_parallel=1`), no prompt cache, a seed per request
and only the temperature and top-p samplers (transformers' order), each (prompt, seed)
gives one fixed output whatever the order of requests or the process. That is what makes
committed recordings regenerable byte for byte.
"""

from __future__ import annotations

import json
import platform
import socket
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from fairness._util.errors import FairnessError
from fairness.generate.engines import Completion
from fairness.suite._case import Case, SamplingParams

SAMPLERS = ["temperature", "top_p"]


class LlamaCppEngine:
    name = "llamacpp"

    def __init__(self, model_path: Path, *, threads: int | None = None, n_ctx: int = 2048):
        try:
            import xllamacpp as xlc
        except ImportError:
            raise FairnessError("the llamacpp engine needs `xllamacpp`: pip install 'llm-fairness-check[live]'") from None
        if not Path(model_path).is_file():
            raise FairnessError(f"GGUF model file `{model_path}` does not exist")
        self._xlc = xlc
        self.model_path = Path(model_path)
        # One thread per process unless asked: on a busy 2-core machine 2 threads ran 4-6x slower
        # than 1 (5.6-7.0 vs 28-35 tok/s); use the cores with `--shard K/N` processes instead.
        self.threads = threads or 1
        self.n_ctx = n_ctx
        params = xlc.CommonParams()
        params.model.path = str(self.model_path)
        params.n_ctx = n_ctx
        params.n_parallel = 1
        params.cpuparams.n_threads = self.threads
        params.cpuparams_batch.n_threads = self.threads
        params.n_gpu_layers = 0
        params.verbosity = -1
        self.port = _free_loopback_port()
        params.port = self.port
        self._server = xlc.Server(params)

    def backend_info(self) -> dict[str, Any]:
        xlc = self._xlc
        return {
            "engine": self.name,
            "versions": {"xllamacpp": xlc.__version__, "python": platform.python_version()},
            "dtype": _gguf_type(self.model_path.name),
            "device": "cpu",
            "details": {
                "transport": "embedded llama.cpp server on 127.0.0.1",
                "n_parallel": 1,
                "n_ctx": self.n_ctx,
                "threads": self.threads,
                "cache_prompt": False,
                "cpu_features": xlc.get_system_info().strip(),
                "machine": platform.machine(),
            },
        }

    def effective_sampling(self, params: SamplingParams) -> dict[str, Any]:
        return {
            "temperature": params.temperature,
            "top_p": params.top_p,
            "max_new_tokens": params.max_new_tokens,
            "samplers": SAMPLERS,
            "top_k": None,
            "min_p": None,
            "repetition_penalty": None,
            "note": "only the listed samplers run, in that order, then a seeded draw",
        }

    def batch_plan(self) -> dict[str, Any]:
        return {"kind": "sequential", "batch_size": 1, "order": "grid", "seed": "per request"}

    def plan(self, cases: list[Case]) -> list[list[Case]]:
        return [[c] for c in cases]

    def generate(self, batch: list[Case], system_prompt: str) -> list[Completion]:
        out = []
        for case in batch:
            messages = ([{"role": "system", "content": system_prompt}] if system_prompt else []) + [
                {"role": "user", "content": case.prompt}
            ]
            req = {
                "messages": messages,
                "max_tokens": case.params.max_new_tokens,
                "temperature": case.params.temperature,
                "top_p": case.params.top_p,
                "seed": case.seed,
                "cache_prompt": False,
                "samplers": SAMPLERS,
            }
            res = self._post(req)
            if not isinstance(res, dict) or "choices" not in res:
                raise RuntimeError(f"llama.cpp returned an error for row {case.row_id}: {res}")
            choice = res["choices"][0]
            reason = choice.get("finish_reason")
            out.append(
                Completion(
                    text=(choice["message"].get("content") or "").strip(),
                    prompt_tokens=int(res["usage"]["prompt_tokens"]),
                    completion_tokens=int(res["usage"]["completion_tokens"]),
                    finish_reason="length" if reason == "length" else "stop",
                )
            )
        return out

    def _post(self, req: dict[str, Any]) -> Any:
        """Ask the embedded server over loopback HTTP.

        Measured: the in-process `handle_chat_completions` busy-waits on the calling
        thread, stealing a core from generation on a 2-core machine; a blocking socket
        read does not, and gives the same text.
        """
        http = urllib.request.Request(
            f"http://127.0.0.1:{self.port}/v1/chat/completions",
            data=json.dumps(req).encode("utf-8"),
            headers={"Content-Type": "application/json"},
        )
        try:
            with urllib.request.urlopen(http, timeout=3600) as resp:
                return json.loads(resp.read())
        except urllib.error.HTTPError as exc:
            return {"error": exc.read().decode("utf-8", "replace")}

    def close(self) -> None:
        self._server = None


def _free_loopback_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _gguf_type(filename: str) -> str:
    stem = filename.rsplit(".", 1)[0]
    quant = stem.rsplit(".", 1)[-1] if "." in stem else "unknown"
    return f"gguf:{quant}"
