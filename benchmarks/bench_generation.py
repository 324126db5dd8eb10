"""Completion tokens per second: the paper's one-prompt loop vs our two engines (run by hand).

    python benchmarks/bench_generation.py --rows 64 --max-new-tokens 64

(a) paper loop: one `model.generate` per prompt with transformers, library defaults for
    everything the regime does not set (top_k=50), as the reference implementation did;
(b) TransformersEngine: our batched, seeded plan (same loaded weights as (a));
(c) LlamaCppEngine: llama.cpp on the GGUF file, one request at a time.

All three get the same rows and the same max_new_tokens cap. Tokens/s, not rows/s, is
compared because the engines sample different texts of different lengths. Not a test:
timings depend on the machine and on whatever else is running on it.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass

from fairness.generate._model_fetch import locate
from fairness.generate.engines.transformers import plan_batches
from fairness.suite._case import Case
from fairness.suite._suite import load_suite

SUITE = "fairness-cards/qwen-v0.1"


@dataclass
class Result:
    label: str
    rows: int
    tokens: int
    seconds: float

    @property
    def tokens_per_second(self) -> float:
        return self.tokens / self.seconds


def select_rows(n: int, cap: int, source: str, batch_size: int) -> list[Case]:
    """The first n rows of the grid (or of the full grid's batch plan), with max_new_tokens capped."""
    cases = load_suite(SUITE).expand()
    if source == "plan":
        cases = [c for batch in plan_batches(cases, batch_size) for c in batch]
    rows = cases[:n]
    return [c.model_copy(update={"params": c.params.model_copy(update={"max_new_tokens": min(cap, c.params.max_new_tokens)})}) for c in rows]


def timed(label: str, rows: list[Case], run: Callable[[], int]) -> Result:
    print(f"running {label} on {len(rows)} rows …", file=sys.stderr, flush=True)
    t0 = time.perf_counter()
    tokens = run()
    result = Result(label, len(rows), tokens, time.perf_counter() - t0)
    print(f"  {result.tokens} tokens in {result.seconds:.1f} s", file=sys.stderr, flush=True)
    return result


def paper_loop(engine, rows: list[Case], system_prompt: str) -> int:
    """One generate call per prompt, sampling kwargs only, as in the paper's script."""
    import torch

    model, tok = engine.model, engine.tokenizer
    eos = engine._eos_ids()
    tokens = 0
    for case in rows:
        inputs = tok(engine.chat_text(system_prompt, case.prompt), return_tensors="pt", add_special_tokens=False)
        torch.manual_seed(case.seed)
        kwargs = {"do_sample": case.params.temperature > 0, "max_new_tokens": case.params.max_new_tokens}
        if case.params.temperature > 0:
            kwargs.update(temperature=case.params.temperature, top_p=case.params.top_p, top_k=50)
        with torch.inference_mode():
            out = model.generate(**inputs, **kwargs)
        new = out[0, inputs["input_ids"].shape[1] :].tolist()
        tokens += next((i + 1 for i, t in enumerate(new) if t in eos), len(new))
    return tokens


def engine_run(engine, rows: list[Case], system_prompt: str) -> int:
    return sum(c.completion_tokens for batch in engine.plan(rows) for c in engine.generate(batch, system_prompt))


def warm_up(engine, rows: list[Case], system_prompt: str) -> None:
    """One short call first, so one-off costs (allocation, kernel selection) are not timed."""
    row = rows[0].model_copy(update={"params": rows[0].params.model_copy(update={"max_new_tokens": 4})})
    engine.generate([row], system_prompt)


def print_table(results: list[Result], cap: int, args: argparse.Namespace) -> None:
    print(f"\nrows: {args.rows} ({args.rows_from} order), max_new_tokens cap: {cap}, "
          f"transformers batch_size: {args.batch_size}, torch threads: {args.torch_threads}, llama.cpp threads: {args.llama_threads}")
    print(f"{'engine':<34}{'rows':>6}{'tokens':>9}{'seconds':>10}{'tok/s':>9}")
    for r in results:
        print(f"{r.label:<34}{r.rows:>6}{r.tokens:>9}{r.seconds:>10.1f}{r.tokens_per_second:>9.1f}")
    base = next((r for r in results if r.label.startswith("(a)")), None)
    if base:
        for r in results:
            if r is not base:
                print(f"{r.label[:3]}/(a) = {r.tokens_per_second / base.tokens_per_second:.2f}x")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=64)
    parser.add_argument("--max-new-tokens", type=int, default=64, help="cap applied to all three (the suite asks 160)")
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--rows-from", choices=["grid", "plan"], default="grid", help="first rows of the grid, or of the full grid's batch plan (full batches)")
    parser.add_argument("--torch-threads", type=int, default=None, help="torch intra-op threads (default: torch's own)")
    parser.add_argument("--llama-threads", type=int, default=2)
    parser.add_argument("--only", default="abc", help="which of a, b, c to run")
    args = parser.parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")

    import torch

    from fairness.generate.engines.llamacpp import LlamaCppEngine
    from fairness.generate.engines.transformers import TransformersEngine

    if args.torch_threads:
        torch.set_num_threads(args.torch_threads)
    args.torch_threads = torch.get_num_threads()
    system_prompt = load_suite(SUITE).system_prompt
    rows = select_rows(args.rows, args.max_new_tokens, args.rows_from, args.batch_size)
    path = locate("smollm2")
    results = []
    if {"a", "b"} & set(args.only):
        engine = TransformersEngine(str(path.parent), gguf_file=path.name, device="cpu", batch_size=args.batch_size)
        warm_up(engine, rows, system_prompt)
        sizes = [len(b) for b in engine.plan(rows)]
        print(f"(b) plan: {len(sizes)} calls, mean batch {sum(sizes) / len(sizes):.1f} rows", file=sys.stderr)
        if "a" in args.only:
            results.append(timed("(a) paper loop, transformers", rows, lambda: paper_loop(engine, rows, system_prompt)))
        if "b" in args.only:
            results.append(timed(f"(b) TransformersEngine, batch {args.batch_size}", rows, lambda: engine_run(engine, rows, system_prompt)))
        engine.close()
    if "c" in args.only:
        llama = LlamaCppEngine(path, threads=args.llama_threads)
        warm_up(llama, rows, system_prompt)
        results.append(timed(f"(c) LlamaCppEngine, {args.llama_threads} threads", rows, lambda: engine_run(llama, rows, system_prompt)))
        llama.close()
    print_table(results, args.max_new_tokens, args)


if __name__ == "__main__":
    main()
