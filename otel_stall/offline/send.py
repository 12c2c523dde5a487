"""Send protobuf ``TracesData`` to an OTLP endpoint, as the messages they already are.

Why not the SDK's OTLP exporters: they take SDK ``ReadableSpan`` objects, so
every stored span would be rebuilt as one (resource, scope, context, events,
links) only for the exporter to encode it back into the protobuf we started
from. Sending the decoded-and-enriched messages directly skips both steps;
``bench/bench_replay.py`` measures the difference. The wire behaviour is the
same as the SDK's: gRPC ``TraceService/Export``, or an HTTP POST of
``application/x-protobuf`` to ``…/v1/traces``, with retries on the statuses
the OTLP spec calls retryable, and partial-success rejections counted.
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
    max_request_bytes: int = MAX_REQUEST_BYTES
    sent: int = 0
    """Spans the endpoint accepted."""
    failed: int = 0
    """Spans that did not arrive (after retries) or that the endpoint rejected."""
    errors: list[str] = field(default_factory=list)
    _pending: Any = field(default_factory=ExportTraceServiceRequest, init=False)
    _pending_bytes: int = field(default=0, init=False)
    _channel: Any = field(default=None, init=False)
    _stub: Any = field(default=None, init=False)
    _conn: http.client.HTTPConnection | None = field(default=None, init=False)

    def __post_init__(self) -> None:
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
        rejected, error = self._send(request)
        if error is not None:
            self.failed += spans
            self.errors.append(f"{spans} spans not delivered to {self.url}: {error}")
            return
        self.sent += spans - rejected
        if rejected:
            self.failed += rejected
            self.errors.append(f"{self.url} rejected {rejected} spans (partial success)")

    def close(self) -> None:
        """Flush and release the connection."""
        self.flush()
        if self._channel is not None:
            self._channel.close()
            self._channel = None
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    # -- transport -------------------------------------------------------------

    def _send(self, request: Any) -> tuple[int, str | None]:
        body = request.SerializeToString()
        error = "not sent"
        for attempt in range(_ATTEMPTS):
            if attempt:
                time.sleep(min(0.1 * 2**attempt, 2.0))
            retry, rejected, error_or_none = (
                self._post(body) if self._http else self._export(request)
            )
            if error_or_none is None:
                return rejected, None
            error = error_or_none
            if not retry:
                break
        return 0, error

    def _export(self, request: Any) -> tuple[bool, int, str | None]:
        try:
            response = self._stub.Export(request, timeout=self.timeout)
        except grpc.RpcError as exc:
            code = exc.code()
            return code in _RETRYABLE_GRPC, 0, f"gRPC {code.name}: {exc.details()}"
        return False, int(response.partial_success.rejected_spans), None

    def _post(self, body: bytes) -> tuple[bool, int, str | None]:
        try:
            if self._conn is None:
                cls = http.client.HTTPSConnection if self._secure else http.client.HTTPConnection
                self._conn = cls(self._netloc, timeout=self.timeout)
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
