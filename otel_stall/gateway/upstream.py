"""Deliver serialized OTLP trace requests upstream: bounded queue, retry with backoff.

Batches are kept serialized: concatenated ``ExportTraceServiceRequest``
encodings are themselves a valid request (repeated fields concatenate), so
several small flushes go out as one call without re-encoding.

Delivery is at-least-once per batch: a retryable failure (gRPC UNAVAILABLE,
HTTP 503, connection refused, ...) keeps the batch at the head of the queue,
and the sender waits with exponential backoff. While the upstream is down the
queue fills; a batch that does not fit is dropped and counted as undelivered
(``queue_full``). A permanent rejection (gRPC INVALID_ARGUMENT, HTTP 400) is
counted as ``rejected``. On shutdown, whatever is left after the timeout is
counted as ``shutdown`` and logged.
"""

from __future__ import annotations

import http.client
import logging
import random
import threading
import time
import urllib.parse
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final, Protocol

import grpc
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceResponse,
)

__all__ = ["Delivery", "GrpcSender", "HttpSender", "Sender", "Upstream", "make_sender"]

logger = logging.getLogger("otel_stall.gateway")

EXPORT_METHOD: Final = "/opentelemetry.proto.collector.trace.v1.TraceService/Export"

_RETRYABLE_GRPC: Final = frozenset(
    {
        grpc.StatusCode.CANCELLED,
        grpc.StatusCode.DEADLINE_EXCEEDED,
        grpc.StatusCode.RESOURCE_EXHAUSTED,
        grpc.StatusCode.ABORTED,
        grpc.StatusCode.OUT_OF_RANGE,
        grpc.StatusCode.UNAVAILABLE,
        grpc.StatusCode.DATA_LOSS,
    }
)
_RETRYABLE_HTTP: Final = frozenset({408, 429, 502, 503, 504})


@dataclass(frozen=True, slots=True)
class Delivery:
    """The outcome of one export call."""

    ok: bool
    retryable: bool = False
    rejected_spans: int = 0
    """Spans the upstream accepted the request for but refused (OTLP partial success)."""
    detail: str = ""


class Sender(Protocol):
    """Sends one serialized ``ExportTraceServiceRequest``."""

    def send(self, payload: bytes, timeout: float) -> Delivery:
        """Export ``payload`` once; never raises."""
        ...

    def close(self) -> None:
        """Release the connection."""
        ...


def _partial(response: ExportTraceServiceResponse) -> tuple[int, str]:
    if not response.HasField("partial_success"):
        return 0, ""
    partial = response.partial_success
    return int(partial.rejected_spans), partial.error_message


class GrpcSender:
    """OTLP/gRPC through a raw unary call, so the already-encoded bytes go as they are."""

    def __init__(self, target: str, *, insecure: bool = True) -> None:
        options = [("grpc.max_send_message_length", 64 << 20)]
        if insecure:
            self._channel = grpc.insecure_channel(target, options=options)
        else:
            creds = grpc.ssl_channel_credentials()
            self._channel = grpc.secure_channel(target, creds, options=options)
        self._call = self._channel.unary_unary(
            EXPORT_METHOD,
            request_serializer=None,
            response_deserializer=ExportTraceServiceResponse.FromString,
        )

    def send(self, payload: bytes, timeout: float) -> Delivery:
        """One Export call."""
        try:
            response = self._call(payload, timeout=timeout)
        except grpc.RpcError as exc:
            code = exc.code() if isinstance(exc, grpc.Call) else grpc.StatusCode.UNKNOWN
            detail = exc.details() if isinstance(exc, grpc.Call) else str(exc)
            return Delivery(False, code in _RETRYABLE_GRPC, detail=f"{code.name}: {detail}")
        except Exception as exc:  # a broken channel must not kill the sender thread
            return Delivery(False, True, detail=f"{type(exc).__name__}: {exc}")
        rejected, message = _partial(response)
        return Delivery(True, rejected_spans=rejected, detail=message)

    def close(self) -> None:
        """Close the channel."""
        self._channel.close()


class HttpSender:
    """OTLP/HTTP protobuf to ``http(s)://host:port/v1/traces`` over one kept-alive connection."""

    def __init__(self, url: str, headers: dict[str, str] | None = None) -> None:
        parts = urllib.parse.urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"{url!r} is not an http(s) URL")
        self._https = parts.scheme == "https"
        self._host = parts.hostname
        self._port = parts.port or (443 if self._https else 80)
        self._path = parts.path or "/v1/traces"
        self._headers = {"Content-Type": "application/x-protobuf", **(headers or {})}
        self._conn: http.client.HTTPConnection | None = None

    def _connection(self, timeout: float) -> http.client.HTTPConnection:
        if self._conn is None:
            cls = http.client.HTTPSConnection if self._https else http.client.HTTPConnection
            self._conn = cls(self._host, self._port, timeout=timeout)
        return self._conn

    def send(self, payload: bytes, timeout: float) -> Delivery:
        """One POST."""
        try:
            conn = self._connection(timeout)
            conn.request("POST", self._path, body=payload, headers=self._headers)
            response = conn.getresponse()
            body = response.read()
        except (OSError, http.client.HTTPException) as exc:
            self.close()
            return Delivery(False, True, detail=f"{type(exc).__name__}: {exc}")
        if 200 <= response.status < 300:
            try:
                rejected, message = _partial(ExportTraceServiceResponse.FromString(body))
            except Exception:
                rejected, message = 0, ""
            return Delivery(True, rejected_spans=rejected, detail=message)
        retryable = response.status in _RETRYABLE_HTTP
        return Delivery(False, retryable, detail=f"HTTP {response.status} {response.reason}")

    def close(self) -> None:
        """Drop the connection; the next send reconnects."""
        if self._conn is not None:
            self._conn.close()
            self._conn = None


def make_sender(upstream: str, *, insecure: bool = True) -> Sender:
    """``http(s)://…`` gives OTLP/HTTP; anything else is a gRPC target (``host:port``)."""
    if upstream.startswith(("http://", "https://")):
        return HttpSender(upstream)
    if upstream.startswith("grpc://"):
        upstream = upstream[len("grpc://") :]
    elif upstream.startswith("grpcs://"):
        return GrpcSender(upstream[len("grpcs://") :], insecure=False)
    return GrpcSender(upstream, insecure=insecure)


@dataclass(slots=True)
class _Batch:
    payload: bytes
    spans: int


class Upstream:
    """A bounded queue of serialized batches and one sender thread."""

    def __init__(
        self,
        sender: Sender | None,
        *,
        max_spans: int,
        batch_spans: int,
        timeout: float,
        retry_initial: float,
        retry_max: float,
        on_forwarded: Callable[[int], None],
        on_undelivered: Callable[[int, str], None],
    ) -> None:
        self._sender = sender
        self._max_spans = max_spans
        self._batch_spans = batch_spans
        self._timeout = timeout
        self._retry_initial = retry_initial
        self._retry_max = retry_max
        self._on_forwarded = on_forwarded
        self._on_undelivered = on_undelivered
        self._queue: deque[_Batch] = deque()
        self._queued_spans = 0
        self._in_flight = 0
        self._cond = threading.Condition()
        self._closing = False
        self._deadline: float | None = None
        self._thread: threading.Thread | None = None
        self._warned_full = False

    # -- producer side -------------------------------------------------------

    @property
    def queued_spans(self) -> int:
        """Spans waiting or being sent."""
        return self._queued_spans + self._in_flight

    def put(self, payload: bytes, spans: int) -> bool:
        """Queue one serialized request; ``False`` (and counted) when it does not fit."""
        if spans <= 0:
            return True
        if self._sender is None:
            self._on_undelivered(spans, "no_upstream")
            return False
        with self._cond:
            held = self._queued_spans + self._in_flight
            fits = not self._closing and held + spans <= self._max_spans
            if fits:
                self._queue.append(_Batch(payload, spans))
                self._queued_spans += spans
                self._cond.notify()
                warn = False
            else:
                warn, self._warned_full = not self._warned_full, True
        if not fits:
            self._on_undelivered(spans, "queue_full")
            if warn:
                logger.warning(
                    "upstream queue full (%d spans): dropping batches until it drains; "
                    "see otel_stall_gateway_spans_undelivered_total",
                    self._max_spans,
                )
        return fits

    # -- lifecycle -----------------------------------------------------------

    def start(self) -> None:
        """Start the sender thread."""
        if self._sender is None or self._thread is not None:
            return
        self._thread = threading.Thread(target=self._run, name="otel-stall-upstream", daemon=True)
        self._thread.start()

    def close(self, timeout: float) -> int:
        """Deliver what is queued for up to ``timeout`` seconds; count and return what is left."""
        with self._cond:
            self._closing = True
            self._deadline = time.monotonic() + timeout
            self._cond.notify_all()
        if self._thread is not None:
            self._thread.join(timeout + self._timeout + 1.0)
        with self._cond:
            left = sum(b.spans for b in self._queue)
            self._queue.clear()
            self._queued_spans = 0
        if left:
            self._on_undelivered(left, "shutdown")
            logger.error("shutdown: %d spans could not be delivered upstream", left)
        if self._sender is not None:
            self._sender.close()
        return left

    # -- sender thread -------------------------------------------------------

    def _take(self) -> list[_Batch] | None:
        with self._cond:
            while not self._queue:
                if self._closing:
                    return None
                self._cond.wait(0.5)
            batches = [self._queue.popleft()]
            spans = batches[0].spans
            while self._queue and spans + self._queue[0].spans <= self._batch_spans:
                batch = self._queue.popleft()
                batches.append(batch)
                spans += batch.spans
            self._queued_spans -= spans
            self._in_flight = spans
            return batches

    def _give_back(self, batches: list[_Batch]) -> None:
        with self._cond:
            self._queue.extendleft(reversed(batches))
            self._queued_spans += sum(b.spans for b in batches)
            self._in_flight = 0

    def _past_deadline(self) -> bool:
        deadline = self._deadline
        return deadline is not None and time.monotonic() >= deadline

    def _run(self) -> None:
        sender = self._sender
        assert sender is not None
        backoff = self._retry_initial
        while True:
            batches = self._take()
            if batches is None:
                return
            spans = sum(b.spans for b in batches)
            payload = b"".join(b.payload for b in batches)
            delivery = sender.send(payload, self._timeout)
            if delivery.ok:
                backoff = self._retry_initial
                with self._cond:
                    self._in_flight = 0
                    self._warned_full = False
                rejected = min(delivery.rejected_spans, spans)
                self._on_forwarded(spans - rejected)
                if rejected:
                    self._on_undelivered(rejected, "rejected")
                    logger.warning("upstream refused %d spans: %s", rejected, delivery.detail)
                continue
            if not delivery.retryable:
                with self._cond:
                    self._in_flight = 0
                self._on_undelivered(spans, "rejected")
                logger.error("upstream rejected %d spans: %s", spans, delivery.detail)
                continue
            self._give_back(batches)
            if self._past_deadline():
                return
            logger.warning("upstream unavailable (%s); retrying in %.1fs", delivery.detail, backoff)
            self._sleep(backoff)
            backoff = min(backoff * 2, self._retry_max)

    def _sleep(self, seconds: float) -> None:
        """Back off, with jitter, but wake early for shutdown's deadline."""
        end = time.monotonic() + seconds * random.uniform(0.8, 1.2)
        with self._cond:
            while True:
                now = time.monotonic()
                if now >= end or self._past_deadline():
                    return
                self._cond.wait(min(end - now, 0.2))
