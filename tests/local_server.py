"""Test HTTP servers on 127.0.0.1: one place that starts a threaded server on a free port and stops it.

Fakes of the OpenAI-compatible API, GitHub's API and a vLLM server build their own request
handlers; how they listen, where, and how they shut down is the same for all of them.
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


def serve(handler: type[BaseHTTPRequestHandler]) -> tuple[ThreadingHTTPServer, str]:
    """Serve `handler` on 127.0.0.1 (an ephemeral port) from a daemon thread; returns the server and its URL."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, args=(0.02,), daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}"


def stop(server: ThreadingHTTPServer) -> None:
    server.shutdown()
    server.server_close()


class JsonHandler(BaseHTTPRequestHandler):
    """A quiet request handler that reads and answers JSON, the one shape every fake API here speaks."""

    def read_json(self, empty: Any = None) -> Any:
        """The request body decoded as JSON; `empty` when there is none."""
        n = int(self.headers.get("content-length") or 0)
        return json.loads(self.rfile.read(n)) if n else empty

    def send_json(self, status: int, body: Any, headers: dict[str, str] | None = None) -> None:
        """Answer `status` with `body` (encoded as JSON unless it is bytes already) and extra `headers`."""
        payload = body if isinstance(body, bytes) else json.dumps(body).encode()
        self.send_response(status)
        for k, v in {"content-type": "application/json", **(headers or {})}.items():
            self.send_header(k, v)
        self.send_header("content-length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, *args: Any) -> None:
        pass
