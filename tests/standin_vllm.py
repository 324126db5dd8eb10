"""A stand-in for `vllm serve` in the workflow test: an OpenAI-compatible server on 127.0.0.1.

    python tests/standin_vllm.py serve MODEL --port PORT [any other vllm flags]

It answers /health, /version (as vLLM does) and /v1/chat/completions with a deterministic
echo of the prompt, temperature and seed, plus `$STANDIN_NIGHT`, so two "nights" give
different outputs. It is not a model: its text only ever lands in a test's tmp directory.
"""

from __future__ import annotations

import argparse
import os
import sys
from http.server import ThreadingHTTPServer

from local_server import JsonHandler

VERSION = "0.8.5+standin"


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
