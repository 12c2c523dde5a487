"""A small HTTP/1.1 server on asyncio and h11, bounded by design.

``http.server`` gives every connection a thread, and a connection that never
finishes its TLS handshake or its headers keeps that thread for as long as
it likes. Here one event loop holds all connections and:

- the TLS handshake has a deadline (asyncio's ``ssl_handshake_timeout``);
- so do a request's headers (and the wait for the next request on a kept-alive
  connection), and its body, which must also keep up a minimum rate
  (``min_body_rate`` bytes a second after ``body_grace`` seconds): a client
  trickling a body a byte at a time holds a body slot for about ``body_grace``,
  not ``body_timeout`` (issue 27: 20 such clients held every slot and starved
  all OTLP/HTTP ingestion, and ``/healthz`` on the metrics port);
- a request without a body (``GET /healthz``) takes no body slot, so slow
  bodies cannot starve probes;
- open connections are capped: past the cap a connection gets 503 and is closed;
- at most a few bodies are read and handled at once (each up to the request
  limit), so memory is bounded by the cap on bodies, not by the clients;
- the work itself (decompress, decode, ingest) runs in a small thread pool.

HTTP parsing is h11's (python-hyper's sans-I/O HTTP/1.1, used by httpx and
uvicorn). We chose it over uvicorn and hypercorn, which need an ASGI layer
and still have no deadline for a request's headers and body, and over
aiohttp, which brings a large dependency tree for one endpoint; the bounds
above are the part no library gave us, and they are a few lines on asyncio.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import ssl
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Final

import h11

__all__ = ["AsyncHttpServer", "Reply", "Request"]

logger = logging.getLogger("otel_stall.gateway")

_READ: Final = 1 << 16
_MAX_HEADERS: Final = 64 << 10
_DRAIN_FACTOR: Final = 8
"""A refused body up to this many request limits is read and dropped: the client sees the answer."""


@dataclass(frozen=True, slots=True)
class Request:
    """One request with its whole body; header names in lower case."""

    method: str
    path: str
    headers: dict[str, str]
    body: bytes = b""


@dataclass(frozen=True, slots=True)
class Reply:
    """One response."""

    status: int
    body: bytes
    content_type: str = "text/plain"
    headers: tuple[tuple[str, str], ...] = ()
    close: bool = False


@dataclass(slots=True)
class _Stats:
    open: int = 0
    refused: int = 0
    """Connections answered 503 because the cap was reached."""
    timed_out: int = 0
    """Connections closed for a missed handshake, header or body deadline."""
    tasks: set[asyncio.Task[None]] = field(default_factory=set)


Precheck = Callable[[str, str, dict[str, str]], "Reply | None"]
"""Method, path and headers to a reply given before the body is read (refusals), or ``None``."""
Handler = Callable[[Request], Reply]
"""A whole request to its reply; runs in a worker thread."""

_BUSY: Final = (
    b"HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain\r\nContent-Length: 29\r\n"
    b"Retry-After: 1\r\nConnection: close\r\n\r\ntoo many connections: retry\r\n"
)


_SLOW_BODY: Final = (
    b"request body too slow: it must arrive at min_body_rate bytes a second after body_grace "
    b"seconds, within body_timeout (OTEL_STALL_GATEWAY_MIN_BODY_RATE, _BODY_GRACE, "
    b"_BODY_TIMEOUT)\n"
)


class AsyncHttpServer:
    """One listener: bound at construction (so a taken port fails at once), served in a thread."""

    def __init__(
        self,
        name: str,
        address: tuple[str, int],
        *,
        handler: Handler,
        precheck: Precheck | None = None,
        ssl_context: ssl.SSLContext | None = None,
        max_connections: int = 256,
        header_timeout: float = 10.0,
        body_timeout: float = 60.0,
        min_body_rate: int = 16 << 10,
        body_grace: float = 2.0,
        max_body: int = 16 << 20,
        workers: int = 4,
    ) -> None:
        self.name = name
        host, port = address
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        self._sock = socket.create_server((host, port), family=family, backlog=256)
        self._sock.setblocking(False)
        self.host: str = host
        self.port: int = self._sock.getsockname()[1]
        self._handler = handler
        self._precheck = precheck
        self._ssl = ssl_context
        self._max_connections = max_connections
        self._header_timeout = header_timeout
        self._body_timeout = body_timeout
        self._min_body_rate = min_body_rate
        self._body_grace = body_grace
        self._max_body = max_body
        self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix=name)
        self._bodies = max(16, 2 * workers)
        self.stats = _Stats()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stopping: asyncio.Event | None = None
        self._thread: threading.Thread | None = None
        self._ready = threading.Event()

    # -- lifecycle -----------------------------------------------------------

    def start(self) -> None:
        """Serve in a daemon thread; returns once the loop is accepting."""
        self._thread = threading.Thread(target=self._run, name=self.name, daemon=True)
        self._thread.start()
        self._ready.wait(30)

    def stop(self) -> None:
        """Stop accepting, drop open connections, release the port. Never raises."""
        loop, stopping = self._loop, self._stopping
        if loop is not None and stopping is not None and self._thread is not None:
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(stopping.set)
            self._thread.join(10)
        with contextlib.suppress(OSError):
            self._sock.close()
        self._pool.shutdown(wait=False, cancel_futures=True)

    def _run(self) -> None:
        loop = asyncio.new_event_loop()
        self._loop = loop
        try:
            loop.run_until_complete(self._main())
        except Exception:
            logger.exception("%s stopped on an error", self.name)
        finally:
            self._ready.set()
            loop.close()

    async def _main(self) -> None:
        self._stopping = asyncio.Event()
        self._body_slots = asyncio.Semaphore(self._bodies)
        server = await asyncio.start_server(
            self._on_connection,
            sock=self._sock,
            ssl=self._ssl,
            ssl_handshake_timeout=self._header_timeout if self._ssl is not None else None,
        )
        self._ready.set()
        async with server:
            await self._stopping.wait()
            server.close()
            await _cancel_the_rest()

    # -- connections ---------------------------------------------------------

    async def _on_connection(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        stats = self.stats
        if stats.open >= self._max_connections:
            stats.refused += 1
            writer.write(_BUSY)
            with contextlib.suppress(Exception):
                await asyncio.wait_for(writer.drain(), 1.0)
            writer.close()
            return
        task = asyncio.current_task()
        assert task is not None
        stats.open += 1
        stats.tasks.add(task)
        try:
            await self._serve(reader, writer)
        except (asyncio.TimeoutError, TimeoutError):
            stats.timed_out += 1
        except (ConnectionError, ssl.SSLError, h11.ProtocolError, asyncio.IncompleteReadError):
            pass
        except asyncio.CancelledError:
            pass
        except Exception:
            logger.debug("%s: connection failed", self.name, exc_info=True)
        finally:
            stats.open -= 1
            stats.tasks.discard(task)
            writer.close()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(writer.wait_closed(), 1.0)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        conn = h11.Connection(h11.SERVER, max_incomplete_event_size=_MAX_HEADERS)
        while True:
            try:
                event = await asyncio.wait_for(self._next(conn, reader), self._header_timeout)
            except h11.RemoteProtocolError as exc:
                await self._error(conn, writer, exc.error_status_hint)
                return
            if not isinstance(event, h11.Request):
                return  # closed, or idle past the deadline
            reply = await self._answer(conn, reader, event)
            await self._send(conn, writer, reply)
            if reply.close or conn.our_state is not h11.DONE or conn.their_state is not h11.DONE:
                return
            conn.start_next_cycle()

    async def _answer(
        self, conn: h11.Connection, reader: asyncio.StreamReader, event: h11.Request
    ) -> Reply:
        method = event.method.decode("ascii", "replace")
        path = event.target.decode("ascii", "replace").split("?")[0]
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in event.headers}
        pace = _Pace(self._body_timeout, self._body_grace, self._min_body_rate)
        if self._precheck is not None:
            refusal = self._precheck(method, path, headers)
            if refusal is not None:
                drained = await self._drain(conn, reader, _DRAIN_FACTOR * self._max_body, pace)
                return refusal if drained else _closing(refusal)
        loop = asyncio.get_running_loop()
        if _bodiless(method, headers):
            body = await self._body(conn, reader, 0, pace)
            request = Request(method, path, headers, body or b"")
            return await loop.run_in_executor(self._pool, self._handler, request)
        # A few bodies at a time: memory is this many request limits, whatever the clients do.
        await asyncio.wait_for(self._body_slots.acquire(), self._body_timeout)
        try:
            try:
                body = await self._body(conn, reader, self._max_body, pace)
            except (asyncio.TimeoutError, TimeoutError):
                self.stats.timed_out += 1
                return Reply(408, _SLOW_BODY, close=True)
            if body is None:
                return Reply(413, b"request body over the limit\n", close=True)
            request = Request(method, path, headers, body)
            return await loop.run_in_executor(self._pool, self._handler, request)
        finally:
            self._body_slots.release()

    @staticmethod
    async def _next(conn: h11.Connection, reader: asyncio.StreamReader) -> object:
        while True:
            event = conn.next_event()
            if event is not h11.NEED_DATA:
                return event
            conn.receive_data(await reader.read(_READ))

    @staticmethod
    async def _paced(conn: h11.Connection, reader: asyncio.StreamReader, pace: _Pace) -> object:
        """The next event of a body, read no slower than ``pace`` allows (else TimeoutError)."""
        while True:
            event = conn.next_event()
            if event is not h11.NEED_DATA:
                return event
            data = await asyncio.wait_for(reader.read(_READ), pace.left())
            pace.received += len(data)
            conn.receive_data(data)

    async def _body(
        self, conn: h11.Connection, reader: asyncio.StreamReader, limit: int, pace: _Pace
    ) -> bytes | None:
        """The whole body, or ``None`` once it is over ``limit`` (the rest is not read)."""
        parts: list[bytes] = []
        size = 0
        while True:
            event = await self._paced(conn, reader, pace)
            if isinstance(event, h11.Data):
                size += len(event.data)
                if size > limit:
                    return None
                parts.append(bytes(event.data))
            elif isinstance(event, h11.EndOfMessage):
                return b"".join(parts)
            else:
                raise ConnectionError("connection closed during the body")

    async def _drain(
        self, conn: h11.Connection, reader: asyncio.StreamReader, limit: int, pace: _Pace
    ) -> bool:
        """Read and drop a refused body; ``False`` if it is too long to bother (then close)."""
        size = 0
        while size <= limit:
            event = await self._paced(conn, reader, pace)
            if isinstance(event, h11.Data):
                size += len(event.data)
            else:
                return isinstance(event, h11.EndOfMessage)
        return False

    @staticmethod
    async def _send(conn: h11.Connection, writer: asyncio.StreamWriter, reply: Reply) -> None:
        headers = [
            ("Content-Type", reply.content_type),
            ("Content-Length", str(len(reply.body))),
            ("Server", "otel-stall"),
            *reply.headers,
        ]
        if reply.close:
            headers.append(("Connection", "close"))
        # One write: the head and the body leave in one segment, so a client reading once
        # sees the whole answer (three writes went out as two packets when the buffer was empty).
        head = conn.send(h11.Response(status_code=reply.status, headers=headers)) or b""
        body = conn.send(h11.Data(data=reply.body)) or b""
        end = conn.send(h11.EndOfMessage()) or b""
        writer.write(head + body + end)
        await writer.drain()

    async def _error(self, conn: h11.Connection, writer: asyncio.StreamWriter, status: int) -> None:
        if conn.our_state is not h11.SEND_RESPONSE and conn.our_state is not h11.IDLE:
            return
        with contextlib.suppress(Exception):
            await self._send(conn, writer, Reply(status, b"malformed HTTP request\n", close=True))


_CANCEL_ROUNDS: Final = 5


async def _cancel_the_rest() -> None:
    """Cancel every other task of the loop, and wait for them (5 s at most each round).

    Every task, not only the connections counted: one accepted just before the
    listener closed has a task that has not run yet. Left pending, it was
    destroyed with the loop, and the handler it waited for then called back into
    the closed loop: ``RuntimeError: Event loop is closed`` in about half of the
    shutdowns under load (issue 27).
    """
    me = asyncio.current_task()
    for _ in range(_CANCEL_ROUNDS):
        pending = [task for task in asyncio.all_tasks() if task is not me and not task.done()]
        if not pending:
            return
        for task in pending:
            task.cancel()
        await asyncio.wait(pending, timeout=5)


class _Pace:
    """A body's deadline: ``grace`` seconds plus a second per ``rate`` bytes received so far.

    Never past ``timeout`` from its start.
    """

    __slots__ = ("end", "grace", "rate", "received", "start")

    def __init__(self, timeout: float, grace: float, rate: int) -> None:
        self.start = time.monotonic()
        self.end = self.start + timeout
        self.grace = grace
        self.rate = rate
        self.received = 0

    def left(self) -> float:
        """Seconds the next read may take; at most 0 once the body is late (a timeout)."""
        due = min(self.end, self.start + self.grace + self.received / self.rate)
        return max(0.0, due - time.monotonic())


def _bodiless(method: str, headers: dict[str, str]) -> bool:
    """A request that says it has no body (a probe's GET): it needs no body slot."""
    if "transfer-encoding" in headers:
        return False
    return headers.get("content-length", "0").strip() == "0" or method in ("GET", "HEAD")


def _closing(reply: Reply) -> Reply:
    return Reply(reply.status, reply.body, reply.content_type, reply.headers, close=True)
