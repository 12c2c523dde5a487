"""A trace store's HTTP API on loopback, answering what a test routes, recording each request.

A real ``http.server`` in a thread: the command under test opens real
connections to it. Each route is a function of the request (path, query,
headers) returning a status and a JSON body; a route may also hang (never
answer) or drip its body slowly, for the timeout and deadline tests.
"""

from __future__ import annotations

import threading
import time
import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any

import orjson


@dataclass(frozen=True)
class Request:
    """One request as it arrived."""

    path: str
    query: dict[str, list[str]]
    headers: dict[str, str]


@dataclass
class Answer:
    """What a route answers: a status and a body; ``drip`` seconds between bytes; ``hang``."""

    status: int = 200
    body: Any = None
    raw: bytes | None = None
    drip: float = 0.0
    hang: bool = False
    headers: dict[str, str] = field(default_factory=dict)


Route = Callable[[Request], Answer]


class StoreServer:
    """``http.server`` on ``127.0.0.1:<free port>`` with routes by path prefix (longest first)."""

    def __init__(self, routes: dict[str, Route]) -> None:
        self.routes = routes
        self.requests: list[Request] = []
        self.stopping = threading.Event()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                parts = urllib.parse.urlsplit(self.path)
                request = Request(
                    parts.path,
                    urllib.parse.parse_qs(parts.query),
                    {k.lower(): v for k, v in self.headers.items()},
                )
                server.requests.append(request)
                route = next(
                    (
                        server.routes[p]
                        for p in sorted(server.routes, key=len, reverse=True)
                        if parts.path.startswith(p)
                    ),
                    None,
                )
                answer = route(request) if route else Answer(404, {"error": "no route"})
                if answer.hang:
                    server.stopping.wait(60)
                    return
                body = answer.raw if answer.raw is not None else orjson.dumps(answer.body)
                self.send_response(answer.status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                for name, value in answer.headers.items():
                    self.send_header(name, value)
                self.end_headers()
                if not answer.drip:
                    self.wfile.write(body)
                    return
                for i in range(len(body)):
                    if server.stopping.wait(answer.drip):
                        return
                    self.wfile.write(body[i : i + 1])
                    self.wfile.flush()

        self.http = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.http.daemon_threads = True
        self.thread = threading.Thread(target=self.http.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        """``http://127.0.0.1:PORT``."""
        return f"http://127.0.0.1:{self.http.server_address[1]}"

    def __enter__(self) -> StoreServer:
        self.thread.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stopping.set()
        self.http.shutdown()
        self.http.server_close()
        self.thread.join(5)


def json_answer(body: Any) -> Route:
    """A route that always answers ``body`` with 200."""
    return lambda _request: Answer(200, body)


def elapsed(since: float) -> float:
    """Seconds since ``since`` (``time.monotonic()``)."""
    return time.monotonic() - since
