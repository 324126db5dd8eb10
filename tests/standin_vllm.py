"""A stand-in for `vllm serve` in the workflow test: an OpenAI-compatible server on 127.0.0.1.

    python tests/standin_vllm.py serve MODEL --port PORT [other vllm serve flags]

Like the real server it refuses an option that the pinned vLLM does not define: the options are
requirements/vllm-serve-flags.json (parsed from the wheel requirements/vllm.lock pins, by
scripts/vllm_flags.py), so a workflow passing a flag that `vllm serve` would reject fails here too
(exit 2, one line on stderr, as argparse does). Its version is the pinned one, `+standin`.

It answers /health, /version (as vLLM does) and /v1/chat/completions with a deterministic
echo of the prompt, temperature and seed, plus `$STANDIN_NIGHT`, so two "nights" give
different outputs. It is not a model: its text only ever lands in a test's tmp directory.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from http.server import ThreadingHTTPServer
from pathlib import Path

from local_server import JsonHandler

SERVE_FLAGS = json.loads((Path(__file__).resolve().parents[1] / "requirements" / "vllm-serve-flags.json").read_text())
VERSION = f"{SERVE_FLAGS['vllm']}+standin"


def unknown_options(argv: list[str]) -> list[str]:
    """The options in argv that the pinned `vllm serve` does not define (`--a_b` is `--a-b`, as in vLLM)."""
    defined = set(SERVE_FLAGS["flags"])
    options = [a.split("=", 1)[0] for a in argv if a.startswith("-") and a != "-"]
    return [o for o in options if o not in defined and "--" + o[2:].replace("_", "-") not in defined]


class Handler(JsonHandler):
    model = ""

    def do_GET(self) -> None:
        if self.path == "/health":
            self.send_json(200, {})
        elif self.path == "/version":
            self.send_json(200, {"version": VERSION})
        else:
            self.send_json(404, {"error": {"message": "no such route"}})

    def do_POST(self) -> None:
        body = self.read_json({})
        if self.path != "/v1/chat/completions" or body.get("model") != self.model:
            self.send_json(404, {"error": {"message": f"no model {body.get('model')!r} at {self.path}"}})
            return
        prompt = body["messages"][-1]["content"]
        text = f"Answer to: {prompt} (T={body.get('temperature')}, seed={body.get('seed')}, night {os.environ.get('STANDIN_NIGHT', '1')})"
        self.send_json(200, {
            "id": "chatcmpl-standin", "object": "chat.completion", "created": 0, "model": body["model"],
            "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 11, "completion_tokens": 7, "total_tokens": 18},
        })


def main(argv: list[str]) -> None:
    unknown = unknown_options(argv[1:])
    if unknown:
        print(f"vllm serve: error: unrecognized arguments: {' '.join(unknown)} (not defined by vllm {SERVE_FLAGS['vllm']})",
              file=sys.stderr)
        raise SystemExit(2)
    parser = argparse.ArgumentParser()
    parser.add_argument("command", choices=["serve"])
    parser.add_argument("model")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000)
    args, _ = parser.parse_known_args(argv)
    Handler.model = args.model
    pid_dir = os.environ.get("STANDIN_PID_DIR")
    if pid_dir:
        with open(os.path.join(pid_dir, f"vllm-{os.getpid()}.pid"), "w") as fh:
            fh.write(str(os.getpid()))
    ThreadingHTTPServer(("127.0.0.1", args.port), Handler).serve_forever()


if __name__ == "__main__":
    main(sys.argv[1:])
