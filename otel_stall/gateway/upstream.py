"""Deliver serialized OTLP trace requests upstream: bounded queue, retry with backoff.

Batches are kept serialized: concatenated ``ExportTraceServiceRequest``
encodings are themselves a valid request (repeated fields concatenate), so
several small flushes go out as one call without re-encoding.

Delivery is at-least-once per batch: a retryable failure (gRPC UNAVAILABLE,
HTTP 503, connection refused, ...) keeps the batch at the head of the queue,
and the sender waits with exponential backoff. While the upstream is down the
queue fills, bounded in spans and in bytes; a batch that does not fit is
dropped and counted as undelivered (``queue_full``). On shutdown, whatever is
left after the timeout is counted as ``shutdown`` and logged.

Merged batches stay under the upstream's message limit. A batch the upstream
refuses as too large (gRPC RESOURCE_EXHAUSTED "larger than max", HTTP 413) is
split and retried, and the limit it names is learnt; a batch it refuses as
invalid (gRPC INVALID_ARGUMENT, HTTP 400) is split too, down to the span that
is at fault, so one client's bad span never costs another client's spans. A
single span refused as too large or invalid is dropped and counted
(``too_large``, ``rejected``). Nothing the sender does can kill its thread: an
error there counts the batch in hand (``error``) and the thread goes on.
"""

from __future__ import annotations

import http.client
import logging
import random
import re
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

from otel_stall.gateway.wire import pack, pieces_of

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
_TOO_LARGE_HTTP: Final = 413
_INVALID_HTTP: Final = 400
_TOO_LARGE_TEXT: Final = re.compile(r"larger than max|too large|message size", re.IGNORECASE)
_LIMIT_TEXT: Final = re.compile(r"vs\.?\s*(\d+)")


@dataclass(frozen=True, slots=True)
class Delivery:
    """The outcome of one export call."""

    ok: bool
    retryable: bool = False
    rejected_spans: int = 0
    """Spans the upstream accepted the request for but refused (OTLP partial success)."""
    detail: str = ""
    too_large: bool = False
    """Refused for its size: split it and send the parts."""
    invalid: bool = False
    """Refused as malformed: split it to find the spans at fault."""
    limit: int | None = None
    """The size limit the upstream named, if it did."""


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


def _grpc_failure(code: grpc.StatusCode, detail: str) -> Delivery:
    text = f"{code.name}: {detail}"
    if code is grpc.StatusCode.RESOURCE_EXHAUSTED and _TOO_LARGE_TEXT.search(detail):
        found = _LIMIT_TEXT.search(detail)
        limit = int(found.group(1)) if found else None
        return Delivery(False, detail=text, too_large=True, limit=limit)
    if code is grpc.StatusCode.INVALID_ARGUMENT:
        return Delivery(False, detail=text, invalid=True)
    return Delivery(False, code in _RETRYABLE_GRPC, detail=text)


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
            detail = (exc.details() if isinstance(exc, grpc.Call) else str(exc)) or ""
            return _grpc_failure(code, detail)
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
        status = response.status
        return Delivery(
            False,
            status in _RETRYABLE_HTTP,
            detail=f"HTTP {status} {response.reason}",
            too_large=status == _TOO_LARGE_HTTP,
            invalid=status == _INVALID_HTTP,
        )

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
    born: float
    """When it was queued (monotonic), for ``/healthz``."""
    solo: bool = False
    """Split off a refused batch: sent alone, never merged again."""


class Upstream:
    """A queue of serialized batches bounded in spans and bytes, and one sender thread."""

    def __init__(
        self,
        sender: Sender | None,
        *,
        max_spans: int,
        max_bytes: int,
        batch_spans: int,
        batch_bytes: int,
        timeout: float,
        retry_initial: float,
        retry_max: float,
        on_forwarded: Callable[[int], None],
        on_undelivered: Callable[[int, str], None],
        on_oversized: Callable[[list[bytes]], None] | None = None,
    ) -> None:
        self._sender = sender
        self._max_spans = max_spans
        self._max_bytes = max_bytes
        self._batch_spans = batch_spans
        self.batch_bytes = batch_bytes
        """Largest merged batch, in bytes; lowered to what the upstream says it takes."""
        self._timeout = timeout
        self._retry_initial = retry_initial
        self._retry_max = retry_max
        self._on_forwarded = on_forwarded
        self._on_undelivered = on_undelivered
        self._on_oversized = on_oversized
        self._queue: deque[_Batch] = deque()
        self._queued_spans = 0
        self._queued_bytes = 0
        self._in_flight: list[_Batch] = []
        self._cond = threading.Condition()
        self._closing = False
        self._deadline: float | None = None
        self._thread: threading.Thread | None = None
        self._warned_full = False

    # -- producer side -------------------------------------------------------

    @property
    def queued_spans(self) -> int:
        """Spans waiting or being sent."""
        return self._queued_spans + sum(b.spans for b in self._in_flight)

    @property
    def queued_bytes(self) -> int:
        """Bytes waiting or being sent."""
        return self._queued_bytes + sum(len(b.payload) for b in self._in_flight)

    def oldest_age(self) -> float:
        """Seconds the oldest batch still waiting (or being sent) has waited; 0 when empty."""
        with self._cond:
            borns = [b.born for b in self._in_flight]
            if self._queue:
                borns.append(min(b.born for b in self._queue))
        return time.monotonic() - min(borns) if borns else 0.0

    def put(self, payload: bytes, spans: int) -> bool:
        """Queue one serialized request; ``False`` (and counted) when it does not fit."""
        if spans <= 0:
            return True
        if self._sender is None:
            self._on_undelivered(spans, "no_upstream")
            return False
        with self._cond:
            fits = (
                not self._closing
                and self.queued_spans + spans <= self._max_spans
                and self.queued_bytes + len(payload) <= self._max_bytes
            )
            if fits:
                self._queue.append(_Batch(payload, spans, time.monotonic()))
                self._queued_spans += spans
                self._queued_bytes += len(payload)
                self._cond.notify()
                warn = False
            else:
                warn, self._warned_full = not self._warned_full, True
        if not fits:
            self._on_undelivered(spans, "queue_full")
            if warn:
                logger.warning(
                    "upstream queue full (%d spans, %d bytes): dropping batches until it "
                    "drains; see otel_stall_gateway_spans_undelivered_total",
                    self._max_spans,
                    self._max_bytes,
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
            self._queued_bytes = 0
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
            first = self._queue.popleft()
            batches = [first]
            spans, size = first.spans, len(first.payload)
            while not first.solo and self._queue:
                head = self._queue[0]
                if (
                    head.solo
                    or spans + head.spans > self._batch_spans
                    or size + len(head.payload) > self.batch_bytes
                ):
                    break
                batches.append(self._queue.popleft())
                spans += head.spans
                size += len(head.payload)
            self._queued_spans -= spans
            self._queued_bytes -= size
            self._in_flight = batches
            return batches

    def _give_back(self, batches: list[_Batch]) -> None:
        with self._cond:
            self._queue.extendleft(reversed(batches))
            self._queued_spans += sum(b.spans for b in batches)
            self._queued_bytes += sum(len(b.payload) for b in batches)
            self._in_flight = []

    def _done(self) -> None:
        with self._cond:
            self._in_flight = []

    def _past_deadline(self) -> bool:
        deadline = self._deadline
        return deadline is not None and time.monotonic() >= deadline

    def _run(self) -> None:
        backoff = self._retry_initial
        while True:
            batches = self._take()
            if batches is None:
                return
            try:
                retry = self._deliver(batches)
            except Exception:
                self._done()
                self._on_undelivered(sum(b.spans for b in batches), "error")
                logger.exception("the upstream sender failed; the batch in hand is counted")
                continue
            if not retry:
                backoff = self._retry_initial
                continue
            if self._past_deadline():
                return
            self._sleep(backoff)
            backoff = min(backoff * 2, self._retry_max)

    def _deliver(self, batches: list[_Batch]) -> bool:
        """Send one merged batch and settle it; ``True`` when it must be retried after a wait."""
        sender = self._sender
        assert sender is not None
        spans = sum(b.spans for b in batches)
        payload = batches[0].payload if len(batches) == 1 else b"".join(b.payload for b in batches)
        delivery = sender.send(payload, self._timeout)
        if delivery.ok:
            with self._cond:
                self._in_flight = []
                self._warned_full = False
            rejected = min(delivery.rejected_spans, spans)
            self._on_forwarded(spans - rejected)
            if rejected:
                self._on_undelivered(rejected, "rejected")
                logger.warning("upstream refused %d spans: %s", rejected, delivery.detail)
            return False
        if delivery.too_large or delivery.invalid:
            self._split(batches, delivery)
            return False
        if not delivery.retryable:
            self._done()
            self._on_undelivered(spans, "rejected")
            logger.error("upstream rejected %d spans: %s", spans, delivery.detail)
            return False
        self._give_back(batches)
        logger.warning("upstream unavailable (%s); retrying", delivery.detail)
        return True

    def _split(self, batches: list[_Batch], delivery: Delivery) -> None:
        """Refused for size or validity: retry the parts alone; a single span is given up."""
        if delivery.too_large:
            limit = delivery.limit
            if limit is not None and 0 < limit < self.batch_bytes:
                logger.warning("the upstream takes messages of at most %d bytes", limit)
                self.batch_bytes = limit
        if len(batches) > 1:
            parts = [_Batch(b.payload, b.spans, b.born, solo=True) for b in batches]
            self._give_back(parts)
            return
        (batch,) = batches
        if batch.spans <= 1:
            self._done()
            if delivery.too_large and self._on_oversized is not None:
                self._on_oversized([data for _, data in pieces_of(batch.payload)])
            else:
                reason = "too_large" if delivery.too_large else "rejected"
                self._on_undelivered(batch.spans, reason)
                logger.error("upstream refused a span: %s", delivery.detail)
            return
        self._give_back(self._halves(batch))

    def _halves(self, batch: _Batch) -> list[_Batch]:
        """One batch as two (or more, to fit the limit), each of whole spans."""
        pieces = pieces_of(batch.payload)
        half = max(1, len(pieces) // 2)
        out: list[_Batch] = []
        for part in (pieces[:half], pieces[half:]):
            packed = pack(part, self.batch_bytes)
            out.extend(_Batch(p, n, batch.born, solo=True) for p, n in packed.payloads)
            if packed.oversized:
                if self._on_oversized is not None:
                    self._on_oversized(packed.oversized)
                else:
                    self._on_undelivered(len(packed.oversized), "too_large")
        return out

    def _sleep(self, seconds: float) -> None:
        """Back off, with jitter, but wake early for shutdown's deadline."""
        end = time.monotonic() + seconds * random.uniform(0.8, 1.2)
        with self._cond:
            while True:
                now = time.monotonic()
                if now >= end or self._past_deadline():
                    return
                self._cond.wait(min(end - now, 0.2))
