"""Test HTTP servers on 127.0.0.1: one place that starts a threaded server on a free port and stops it.

Fakes of the OpenAI-compatible API, GitHub's API and a vLLM server build their own request
handlers; how they listen, where, and how they shut down is the same for all of them.
"""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def serve(handler: type[BaseHTTPRequestHandler]) -> tuple[ThreadingHTTPServer, str]:
    """Serve `handler` on 127.0.0.1 (an ephemeral port) from a daemon thread; returns the server and its URL."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, args=(0.02,), daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}"


def stop(server: ThreadingHTTPServer) -> None:
    server.shutdown()
    server.server_close()
