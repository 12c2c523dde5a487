"""Send protobuf ``TracesData`` to an OTLP endpoint, as the messages they already are.

Why not the SDK's OTLP exporters: they take SDK ``ReadableSpan`` objects, so
every stored span would be rebuilt as one (resource, scope, context, events,
links) only for the exporter to encode it back into the protobuf we started
from. Sending the decoded-and-enriched messages directly skips both steps;
``bench/bench_replay.py`` measures the difference. The wire behaviour is the
same as the SDK's: gRPC ``TraceService/Export``, or an HTTP POST of
``application/x-protobuf`` to ``…/v1/traces``, with retries on the statuses
the OTLP spec calls retryable, and partial-success rejections counted.

Bounded in seconds (issue 27): an endpoint that accepts and never answers cost
6 tries x 10 s per request, hours for a big capture. Now every wait (an
attempt, a backoff) ends by the overall ``deadline`` (``--export-deadline``,
``OTEL_STALL_EXPORT_DEADLINE``, default :data:`DEFAULT_DEADLINE`), and once one
request has failed after all its retries the sender gives up on the endpoint:
every later span is counted as not sent, with one message that says why and
which setting to change.
"""

from __future__ import annotations

import http.client
import time
import urllib.parse
from dataclasses import dataclass, field
from typing import Any, Final

import grpc
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.collector.trace.v1.trace_service_pb2_grpc import TraceServiceStub

from otel_stall.offline.deadline import DEADLINE_ENV, DEFAULT_DEADLINE

__all__ = ["OtlpSender", "is_http_url"]

MAX_REQUEST_BYTES: Final = 3 << 20
"""Below the 4 MiB that gRPC servers (and the collector) accept by default."""
_RETRYABLE_HTTP: Final = frozenset({429, 502, 503, 504})
_RETRYABLE_GRPC: Final = frozenset(
    {
        grpc.StatusCode.UNAVAILABLE,
        grpc.StatusCode.RESOURCE_EXHAUSTED,
        grpc.StatusCode.DEADLINE_EXCEEDED,
        grpc.StatusCode.ABORTED,
        grpc.StatusCode.CANCELLED,
    }
)
_ATTEMPTS: Final = 6


def is_http_url(url: str) -> bool:
    """``http(s)://…/v1/traces`` means OTLP/HTTP protobuf; anything else is gRPC."""
    parsed = urllib.parse.urlsplit(url)
    return parsed.scheme in ("http", "https") and parsed.path.rstrip("/").endswith("/v1/traces")


def _span_count(request: Any) -> int:
    return sum(len(ss.spans) for rs in request.resource_spans for ss in rs.scope_spans)


@dataclass
class OtlpSender:
    """Batches ``TracesData`` messages into export requests and sends them."""

    url: str
    timeout: float = 10.0
    """Seconds one attempt may take."""
    max_request_bytes: int = MAX_REQUEST_BYTES
    deadline: float = DEFAULT_DEADLINE
    """Seconds the whole export may take, from the sender's creation."""
    sent: int = 0
    """Spans the endpoint accepted."""
    failed: int = 0
    """Spans that did not arrive (after retries) or that the endpoint rejected."""
    errors: list[str] = field(default_factory=list)
    gave_up: str | None = None
    """Why the sender stopped sending to the endpoint (then every later span is not sent)."""
    _pending: Any = field(default_factory=ExportTraceServiceRequest, init=False)
    _pending_bytes: int = field(default=0, init=False)
    _channel: Any = field(default=None, init=False)
    _stub: Any = field(default=None, init=False)
    _conn: http.client.HTTPConnection | None = field(default=None, init=False)

    def __post_init__(self) -> None:
        self._ends = time.monotonic() + self.deadline
        self._unsent = 0
        parsed = urllib.parse.urlsplit(self.url)
        self._http = is_http_url(self.url)
        self._secure = parsed.scheme == "https"
        self._path = parsed.path or "/v1/traces"
        # gRPC endpoints are often given bare, as host:port.
        self._netloc = parsed.netloc if "://" in self.url else self.url
        if not self._http:
            if self._secure:
                creds = grpc.ssl_channel_credentials()
                self._channel = grpc.secure_channel(self._netloc, creds)
            else:
                self._channel = grpc.insecure_channel(self._netloc)
            self._stub = TraceServiceStub(self._channel)  # type: ignore[no-untyped-call]

    @property
    def protocol(self) -> str:
        """``http/protobuf`` or ``grpc``."""
        return "http/protobuf" if self._http else "grpc"

    def add(self, data: Any) -> None:
        """Queue one ``TracesData`` (or request); sends whenever a request is full."""
        if self.gave_up is not None:
            self.not_sent(_span_count(data))
            return
        size = data.ByteSize()
        if size > self.max_request_bytes and _span_count(data) > 1:
            for part in _split(data, self.max_request_bytes):
                self.add(part)
            return
        # A single span above the limit still goes, alone: better a rejection we
        # count than a span we silently drop.
        if self._pending_bytes + size > self.max_request_bytes:
            self.flush()
        self._pending.resource_spans.extend(data.resource_spans)
        self._pending_bytes += size

    def flush(self) -> None:
        """Send what is queued."""
        if not self._pending.resource_spans:
            return
        request, self._pending, self._pending_bytes = (
            self._pending,
            ExportTraceServiceRequest(),
            0,
        )
        spans = _span_count(request)
        if self.gave_up is not None:
            self.not_sent(spans)
            return
        rejected, error, retried = self._send(request)
        if error is not None:
            self.failed += spans
            self.errors.append(f"{spans} spans not delivered to {self.url}: {error}")
            if retried:
                self.gave_up = error
            return
        self.sent += spans - rejected
        if rejected:
            self.failed += rejected
            self.errors.append(f"{self.url} rejected {rejected} spans (partial success)")

    def not_sent(self, spans: int) -> None:
        """Count spans never sent, since the sender gave up on the endpoint."""
        self.failed += spans
        self._unsent += spans

    def close(self) -> None:
        """Flush and release the connection; say how many spans were never sent, and why."""
        self.flush()
        if self.gave_up is not None:
            self.errors.append(
                f"gave up on {self.url} ({self.gave_up}); {self._unsent:,} more spans not sent. "
                f"A slow endpoint may need a longer --export-deadline (or {DEADLINE_ENV}); "
                f"this one was {self.deadline:g} s"
            )
        if self._channel is not None:
            self._channel.close()
            self._channel = None
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    # -- transport -------------------------------------------------------------

    def _send(self, request: Any) -> tuple[int, str | None, bool]:
        """Rejected spans and the error, and whether the error held through every retry."""
        body = request.SerializeToString()
        error = "not sent"
        for attempt in range(_ATTEMPTS):
            if attempt:
                pause = min(0.1 * 2**attempt, 2.0)
                if self._left() <= pause:
                    return 0, f"{error}; the export deadline ({self.deadline:g} s) passed", True
                time.sleep(pause)
            if self._left() <= 0:
                return 0, f"the export deadline ({self.deadline:g} s) passed", True
            retry, rejected, error_or_none = (
                self._post(body) if self._http else self._export(request)
            )
            if error_or_none is None:
                return rejected, None, False
            error = error_or_none
            if not retry:
                return 0, error, False
        return 0, f"{error}, {_ATTEMPTS} attempts", True

    def _left(self) -> float:
        return self._ends - time.monotonic()

    def _attempt_timeout(self) -> float:
        """One attempt's timeout: ``timeout``, cut to what the deadline leaves."""
        return max(0.001, min(self.timeout, self._left()))

    def _export(self, request: Any) -> tuple[bool, int, str | None]:
        try:
            response = self._stub.Export(request, timeout=self._attempt_timeout())
        except grpc.RpcError as exc:
            code = exc.code()
            return code in _RETRYABLE_GRPC, 0, f"gRPC {code.name}: {exc.details()}"
        return False, int(response.partial_success.rejected_spans), None

    def _post(self, body: bytes) -> tuple[bool, int, str | None]:
        try:
            if self._conn is None:
                cls = http.client.HTTPSConnection if self._secure else http.client.HTTPConnection
                self._conn = cls(self._netloc, timeout=self._attempt_timeout())
            elif self._conn.sock is not None:
                self._conn.sock.settimeout(self._attempt_timeout())
            self._conn.request("POST", self._path, body, {"Content-Type": "application/x-protobuf"})
            response = self._conn.getresponse()
            payload = response.read()
        except (OSError, http.client.HTTPException) as exc:
            if self._conn is not None:
                self._conn.close()
                self._conn = None
            return True, 0, f"HTTP connection failed: {exc}"
        if 200 <= response.status < 300:
            rejected = 0
            if payload:
                try:
                    parsed = ExportTraceServiceResponse.FromString(payload)
                    rejected = int(parsed.partial_success.rejected_spans)
                except Exception:  # a body we cannot parse is not a rejection
                    rejected = 0
            return False, rejected, None
        retry = response.status in _RETRYABLE_HTTP
        return retry, 0, f"HTTP {response.status} {response.reason}"


def _split(data: Any, max_bytes: int) -> list[Any]:
    """Cut one oversized message into pieces below ``max_bytes`` (per span, keeping resources)."""
    parts: list[Any] = []
    for rs in data.resource_spans:
        for ss in rs.scope_spans:
            chunk: Any = None
            chunk_bytes = 0
            for span in ss.spans:
                size = span.ByteSize() + 16
                if chunk is None or chunk_bytes + size > max_bytes:
                    chunk = ExportTraceServiceRequest()
                    new_rs = chunk.resource_spans.add()
                    new_rs.resource.CopyFrom(rs.resource)
                    new_rs.schema_url = rs.schema_url
                    new_ss = new_rs.scope_spans.add()
                    new_ss.scope.CopyFrom(ss.scope)
                    new_ss.schema_url = ss.schema_url
                    chunk_bytes = new_rs.ByteSize()
                    parts.append(chunk)
                chunk.resource_spans[0].scope_spans[0].spans.append(span)
                chunk_bytes += size
    return parts
