"""`llm-fairness-check serve`: the REST service on uvicorn (a thin adapter over `fairness.serve`).

The token comes from FAIRNESS_SERVE_TOKEN, never argv; listening beyond this machine without one
is refused (exit 2). The socket is bound here, so a port in use is one line and exit 2 too.
"""

from __future__ import annotations

import argparse
import importlib.util
import socket
import sys

from fairness._util.errors import FairnessError


def add_arguments(s: argparse.ArgumentParser) -> None:
    """The options of `serve`."""
    s.add_argument("--host", default="127.0.0.1",
                   help="address to listen on (default 127.0.0.1); any other than 127.0.0.1, ::1 or localhost needs "
                        "FAIRNESS_SERVE_TOKEN")
    s.add_argument("--port", type=int, default=8000, help="TCP port (default 8000; 0: any free port, printed)")
    s.set_defaults(handler=cmd_serve)


def cmd_serve(args: argparse.Namespace) -> int:
    from fairness.audit._validate import check_count
    from fairness.serve import SERVE_EXTRA

    if importlib.util.find_spec("fastapi") is None or importlib.util.find_spec("uvicorn") is None:
        raise FairnessError(f"`serve` needs fastapi and uvicorn: {SERVE_EXTRA}")
    from fairness.serve._settings import ServeSettings

    settings = ServeSettings.from_env(args.host, check_count("--port", args.port, 0, 65535))
    sock = _bind(settings.host, settings.port)
    host, port = sock.getsockname()[:2]
    shown = f"[{host}]" if ":" in host else host
    print(f"llm-fairness-check serve: listening on http://{shown}:{port} "
          f"(token {'required' if settings.token is not None else 'not required'})", flush=True)
    _serve(settings, sock)
    return 0


def _bind(host: str, port: int) -> socket.socket:
    try:
        family, kind, proto, _, address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0]
        sock = socket.socket(family, kind, proto)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
        sock.listen(128)  # connections wait in the backlog until uvicorn serves them
    except OSError as exc:
        raise FairnessError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None
    return sock


def _serve(settings, sock: socket.socket) -> None:
    import logging  # here, not at the top: `serve --help` and a bad option need no logging

    import uvicorn

    from fairness.serve._app import create_app

    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    config = uvicorn.Config(create_app(settings), log_level="info", access_log=False, log_config=None)
    uvicorn.Server(config).run(sockets=[sock])
