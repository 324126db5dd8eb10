"""Prepared GPU check: how long would the 3,200-row Qwen2.5-7B grid take, batched vs one prompt at a time?

    python benchmarks/gpu_generation_check.py                 # on one H200 (a few minutes)
    python benchmarks/gpu_generation_check.py --tiny          # CPU smoke test of the same code

With vLLM installed (`pip install vllm`), the same command also times the scale-out recipe
of the nightly workflow: a `vllm serve` OpenAI-compatible server (same shapes, random
weights via `--load-format dummy`) recorded through our `openai` engine with `--base-url`,
per-request seeds and bounded concurrency (`--vllm-concurrency`). vLLM cannot force a
minimum length through the OpenAI API our engine speaks, so its rows end at EOS or at the
budget; with random weights EOS is rare (1 of 152k ids), and the projection scales by the
tokens actually generated.

No weights or hub access are needed: the model is a Qwen2ForCausalLM with Qwen2.5-7B's
shapes (hidden 3584, 28 layers, 28 heads, 4 KV heads, MLP 18944, vocab 152064) and random
bfloat16 weights. Generation cost depends on shapes and lengths, not on weight values, and
`min_new_tokens = max_new_tokens = 160` makes every row run the full 160 steps (the worst
case of the suite's budget), so random weights time exactly what real ones would at that
length.

No Qwen tokenizer is available offline, so a stand-in is built: a word-level tokenizer over
the suite's own words (split on whitespace and punctuation, close to Qwen's BPE counts for
this plain English) with a ChatML chat template like Qwen's, padded to the model's vocab so
any sampled id decodes. Batching, padding, seeding and counting all go through
TransformersEngine (via `from_model`); the one-prompt loop is the same engine with batch
size 1, i.e. one `model.generate` per prompt as in the paper's script.

The loop is timed on fewer rows (`--loop-rows`) and extrapolated: at ~20 ms a step it
would need well over ten minutes for all 256 rows.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

from fairness.generate.engines.transformers import TransformersEngine, plan_batches
from fairness.suite._case import Case
from fairness.suite._suite import load_suite

SUITE = "fairness-cards/qwen-v0.1"
QWEN_7B = {
    "hidden_size": 3584,
    "num_hidden_layers": 28,
    "num_attention_heads": 28,
    "num_key_value_heads": 4,
    "intermediate_size": 18944,
    "vocab_size": 152064,
    "max_position_embeddings": 32768,
    "rope_theta": 1_000_000.0,
    "tie_word_embeddings": False,
}
TINY = dict(QWEN_7B, hidden_size=64, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2, intermediate_size=128, vocab_size=4096)
CHATML = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]


def stand_in_tokenizer(texts: list[str], vocab_size: int) -> Any:
    """Word-level tokenizer over `texts`, ChatML template, vocab padded to `vocab_size`."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    splitter = pre_tokenizers.Whitespace()
    words = sorted({w for t in texts for w, _ in splitter.pre_tokenize_str(t)} | {"system", "user", "assistant", "<unk>"})
    vocab = {tok: i for i, tok in enumerate(SPECIALS + words)}
    if len(vocab) > vocab_size:
        raise SystemExit(f"stand-in vocab ({len(vocab)}) exceeds the model's ({vocab_size})")
    vocab.update({f"<w{i}>": i for i in range(len(vocab), vocab_size)})
    tk = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    tk.pre_tokenizer = splitter
    return PreTrainedTokenizerFast(
        tokenizer_object=tk,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        unk_token="<unk>",
        additional_special_tokens=SPECIALS[1:2],
        chat_template=CHATML,
    )


def build_model(shape: dict[str, Any], device: str, dtype: Any) -> Any:
    """A Qwen2 causal LM with random weights, created directly on `device` in `dtype`."""
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM

    config = Qwen2Config(**shape)
    torch.manual_seed(0)
    previous = torch.get_default_dtype()
    torch.set_default_dtype(dtype)
    try:
        with torch.device(device):
            model = Qwen2ForCausalLM(config)
    finally:
        torch.set_default_dtype(previous)
    return model.eval()


def grid_rows(n: int, batch_size: int) -> list[Case]:
    """The first n rows in the order a full-grid run would generate them (full batches)."""
    cases = load_suite(SUITE).expand()
    return [c for batch in plan_batches(cases, batch_size) for c in batch][:n]


def with_budget(rows: list[Case], new_tokens: int) -> list[Case]:
    return [c.model_copy(update={"params": c.params.model_copy(update={"max_new_tokens": new_tokens})}) for c in rows]


def sync() -> None:
    import torch

    if torch.cuda.is_available():
        torch.cuda.synchronize()


def time_engine(engine: TransformersEngine, rows: list[Case], system_prompt: str) -> dict[str, float]:
    sync()
    t0 = time.perf_counter()
    comps = [c for batch in engine.plan(rows) for c in engine.generate(batch, system_prompt)]
    sync()
    seconds = time.perf_counter() - t0
    tokens = sum(c.completion_tokens for c in comps)
    return {"rows": len(rows), "tokens": tokens, "seconds": seconds, "tokens_per_s": tokens / seconds, "rows_per_s": len(rows) / seconds}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tiny", action="store_true", help="a 2-layer model on the CPU: checks the code, times nothing useful")
    parser.add_argument("--rows", type=int, default=256, help="grid rows for the batched runs")
    parser.add_argument("--loop-rows", type=int, default=16, help="rows for the one-prompt loop (extrapolated)")
    parser.add_argument("--new-tokens", type=int, default=160)
    parser.add_argument("--batch-sizes", default="16,64,256")
    parser.add_argument("--grid-rows", type=int, default=3200, help="rows of the grid whose wall time is projected")
    parser.add_argument("--json", type=Path, help="also write the results here")
    parser.add_argument("--vllm", choices=["auto", "yes", "no"], default="auto",
                        help="also time the vLLM server + openai engine path (auto: when vLLM is installed, on CUDA)")
    parser.add_argument("--vllm-concurrency", type=int, default=64, help="requests in flight to the vLLM server")
    args = parser.parse_args(argv)

    import torch

    device = "cuda" if torch.cuda.is_available() and not args.tiny else "cpu"
    if device == "cpu" and not args.tiny:
        raise SystemExit("no CUDA device: run with --tiny for a CPU smoke test")
    dtype = torch.bfloat16 if device == "cuda" else torch.float32
    shape = TINY if args.tiny else QWEN_7B
    suite = load_suite(SUITE)
    sizes = [int(s) for s in args.batch_sizes.split(",")]

    t0 = time.perf_counter()
    model = build_model(shape, device, dtype)
    cases = suite.expand()
    tokenizer = stand_in_tokenizer([c.prompt for c in cases] + [suite.system_prompt], shape["vocab_size"])
    print(f"model built in {time.perf_counter() - t0:.1f} s on {device} ({dtype}), "
          f"{sum(p.numel() for p in model.parameters()) / 1e9:.2f} B parameters", file=sys.stderr)

    runs: dict[str, Any] = {}
    warm = TransformersEngine.from_model(model, tokenizer, batch_size=2, min_new_tokens=4)
    time_engine(warm, with_budget(grid_rows(2, 2), 4), suite.system_prompt)  # CUDA context, kernels, allocator

    loop = TransformersEngine.from_model(model, tokenizer, batch_size=1, min_new_tokens=args.new_tokens)
    runs["loop (batch 1)"] = time_engine(loop, with_budget(grid_rows(args.loop_rows, 1), args.new_tokens), suite.system_prompt)
    print(f"loop: {runs['loop (batch 1)']}", file=sys.stderr, flush=True)
    for bs in sizes:
        engine = TransformersEngine.from_model(model, tokenizer, batch_size=bs, min_new_tokens=args.new_tokens)
        runs[f"batched {bs}"] = time_engine(engine, with_budget(grid_rows(args.rows, bs), args.new_tokens), suite.system_prompt)
        print(f"batch {bs}: {runs[f'batched {bs}']}", file=sys.stderr, flush=True)

    want_vllm = args.vllm == "yes" or (args.vllm == "auto" and device == "cuda" and importlib.util.find_spec("vllm"))
    if want_vllm:
        del model, warm, loop, engine  # hand the GPU memory to the vLLM server
        if device == "cuda":
            torch.cuda.empty_cache()
        runs[f"vllm server, {args.vllm_concurrency} in flight"] = time_vllm(shape, tokenizer, args, suite.system_prompt)
    elif args.vllm == "auto":
        print("vLLM path skipped: " + ("no CUDA device" if device != "cuda" else "vllm is not installed"), file=sys.stderr)

    report(runs, args, device, shape)
    if args.json:
        args.json.write_text(json.dumps({"device": device, "shape": shape, "new_tokens": args.new_tokens, "runs": runs}, indent=2))


def time_vllm(shape: dict[str, Any], tokenizer: Any, args: argparse.Namespace, system_prompt: str) -> dict[str, float]:
    """Serve the same shapes with random weights from `vllm serve`, record rows through our openai engine."""
    from transformers import Qwen2Config

    from fairness.generate.engines.hosted import ProviderConfig
    from fairness.generate.engines.openai_engine import OpenAIEngine

    with tempfile.TemporaryDirectory() as model_dir:
        Qwen2Config(**shape, torch_dtype="bfloat16", architectures=["Qwen2ForCausalLM"]).save_pretrained(model_dir)
        tokenizer.save_pretrained(model_dir)
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            port = sock.getsockname()[1]
        log = open(Path(model_dir) / "vllm.log", "w")  # noqa: SIM115 - lives as long as the server
        server = subprocess.Popen(
            ["vllm", "serve", model_dir, "--served-model-name", "qwen-shape", "--load-format", "dummy",
             "--dtype", "bfloat16", "--seed", "0", "--generation-config", "vllm", "--max-model-len", "4096",
             "--host", "127.0.0.1", "--port", str(port)],
            stdout=log, stderr=subprocess.STDOUT, env={**os.environ, "VLLM_NO_USAGE_STATS": "1"},
        )
        try:
            _wait_healthy(f"http://127.0.0.1:{port}/health", server, Path(model_dir) / "vllm.log")
            engine = OpenAIEngine(
                "qwen-shape",
                ProviderConfig(base_url=f"http://127.0.0.1:{port}/v1", concurrency=args.vllm_concurrency, timeout_s=3600),
                None,
            )
            print(f"vLLM server: {engine.server_info()}", file=sys.stderr)
            rows = with_budget(grid_rows(args.rows, args.vllm_concurrency), args.new_tokens)
            warm_rows = with_budget(grid_rows(4, 4), 4)
            for batch in engine.plan(warm_rows):
                engine.generate(batch, system_prompt)
            result = time_engine(engine, rows, system_prompt)
            engine.close()
        finally:
            server.terminate()
            server.wait(timeout=120)
            log.close()
    mean = result["tokens"] / result["rows"]
    print(f"vllm: {result} (mean {mean:.0f} of {args.new_tokens} tokens per row)", file=sys.stderr, flush=True)
    # project at the full budget: rows that stopped early were cheaper than the worst case
    return {**result, "rows_per_s": result["rows_per_s"] * mean / args.new_tokens}


def _wait_healthy(url: str, server: subprocess.Popen, log: Path, timeout: float = 900) -> None:
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        if server.poll() is not None:
            raise SystemExit(f"vllm serve exited ({server.returncode}):\n{log.read_text()[-4000:]}")
        try:
            with urllib.request.urlopen(url, timeout=2):
                return
        except OSError:
            time.sleep(2)
    raise SystemExit(f"vllm serve was not healthy after {timeout:.0f} s:\n{log.read_text()[-4000:]}")


def report(runs: dict[str, dict[str, float]], args: argparse.Namespace, device: str, shape: dict[str, Any]) -> None:
    import torch

    name = torch.cuda.get_device_name() if device == "cuda" else "cpu"
    print(f"\n{name}, hidden {shape['hidden_size']} x {shape['num_hidden_layers']} layers, {args.new_tokens} new tokens per row (forced)")
    print(f"{'path':<18}{'rows':>6}{'seconds':>10}{'tok/s':>10}{'rows/s':>9}{'grid ' + str(args.grid_rows) + ' rows':>18}")
    base = runs["loop (batch 1)"]["rows_per_s"]
    for label, r in runs.items():
        projected = args.grid_rows / r["rows_per_s"]
        print(f"{label:<18}{r['rows']:>6}{r['seconds']:>10.1f}{r['tokens_per_s']:>10.1f}{r['rows_per_s']:>9.2f}"
              f"{projected / 60:>14.1f} min   ({r['rows_per_s'] / base:.1f}x loop)")
    if torch.cuda.is_available() and device == "cuda":
        print(f"peak GPU memory: {torch.cuda.max_memory_allocated() / 2**30:.1f} GiB")


if __name__ == "__main__":
    main()
