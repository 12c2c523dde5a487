"""Small OTLP trace receivers on loopback, for end-to-end tests of real exporters.

Two flavours that record every ``ExportTraceServiceRequest`` they get:

* :class:`GrpcReceiver`: grpcio server with the opentelemetry-proto
  ``TraceService`` servicer on ``127.0.0.1:<free port>``;
* :class:`HttpReceiver`: ``http.server`` answering ``POST /v1/traces``
  (protobuf body, optionally gzip), on ``127.0.0.1:<free port>``.

Both are context managers; :meth:`OtlpReceiver.wait_for` blocks until a number
of spans arrived (or a generous timeout passed) and :meth:`OtlpReceiver.spans`
flattens what arrived into :class:`ReceivedSpan` values with plain Python
attributes, so tests can compare without touching protobuf.

The decoding here is deliberately independent of :mod:`otel_stall.otlp.decode`:
an oracle that reused the package's own decoder could hide a symmetric bug in
what the package encodes.
"""

from __future__ import annotations

import gzip
import threading
import zlib
from concurrent import futures
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any

import grpc
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc

Request = Any  # trace_service_pb2.ExportTraceServiceRequest (protobuf has no stubs here)


@dataclass(frozen=True)
class ReceivedEvent:
    """One span event as it arrived."""

    name: str
    time_ns: int
    attributes: dict[str, Any]


@dataclass(frozen=True)
class ReceivedSpan:
    """One span as it arrived, with attributes decoded to plain Python values."""

    trace_id: str
    span_id: str
    parent_span_id: str
    name: str
    start_ns: int
    end_ns: int
    status_code: int
    attributes: dict[str, Any]
    events: list[ReceivedEvent] = field(default_factory=list)
    resource: dict[str, Any] = field(default_factory=dict)
    scope: str = ""


def any_value(value: Any) -> Any:
    """A protobuf ``AnyValue`` as Python: kvlist -> dict, array -> list, bytes stay bytes."""
    kind = value.WhichOneof("value")
    if kind is None:
        return None
    if kind == "kvlist_value":
        return {kv.key: any_value(kv.value) for kv in value.kvlist_value.values}
    if kind == "array_value":
        return [any_value(v) for v in value.array_value.values]
    return getattr(value, kind)


def key_values(items: Any) -> dict[str, Any]:
    """Repeated ``KeyValue`` as a dict."""
    return {kv.key: any_value(kv.value) for kv in items}


def flatten(request: Request) -> list[ReceivedSpan]:
    """Every span of an ``ExportTraceServiceRequest``."""
    out: list[ReceivedSpan] = []
    for resource_spans in request.resource_spans:
        resource = key_values(resource_spans.resource.attributes)
        for scope_spans in resource_spans.scope_spans:
            for span in scope_spans.spans:
                out.append(
                    ReceivedSpan(
                        trace_id=span.trace_id.hex(),
                        span_id=span.span_id.hex(),
                        parent_span_id=span.parent_span_id.hex(),
                        name=span.name,
                        start_ns=span.start_time_unix_nano,
                        end_ns=span.end_time_unix_nano,
                        status_code=span.status.code,
                        attributes=key_values(span.attributes),
                        events=[
                            ReceivedEvent(e.name, e.time_unix_nano, key_values(e.attributes))
                            for e in span.events
                        ],
                        resource=resource,
                        scope=scope_spans.scope.name,
                    )
                )
    return out


class OtlpReceiver:
    """What both receivers share: the recorded requests and a condition to wait on."""

    def __init__(self) -> None:
        self.requests: list[Request] = []
        self._cond = threading.Condition()

    def record(self, request: Request) -> None:
        """Store one export request and wake waiters."""
        with self._cond:
            self.requests.append(request)
            self._cond.notify_all()

    def spans(self) -> list[ReceivedSpan]:
        """Every span received so far, in arrival order."""
        with self._cond:
            requests = list(self.requests)
        return [span for request in requests for span in flatten(request)]

    def wait_for(self, count: int, timeout: float = 30.0) -> list[ReceivedSpan]:
        """Block until at least ``count`` spans arrived, or ``timeout``; return them all."""

        def enough() -> bool:
            return sum(len(flatten(r)) for r in self.requests) >= count

        with self._cond:
            self._cond.wait_for(enough, timeout)
        return self.spans()


class _TraceService(trace_service_pb2_grpc.TraceServiceServicer):
    def __init__(self, receiver: OtlpReceiver) -> None:
        self._receiver = receiver

    def Export(self, request: Request, context: Any) -> Any:
        self._receiver.record(request)
        return trace_service_pb2.ExportTraceServiceResponse()


class GrpcReceiver(OtlpReceiver):
    """An OTLP/gRPC trace receiver on loopback; ``endpoint`` is ``http://127.0.0.1:<port>``."""

    def __init__(self) -> None:
        super().__init__()
        self._server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
        trace_service_pb2_grpc.add_TraceServiceServicer_to_server(  # type: ignore[no-untyped-call]
            _TraceService(self), self._server
        )
        self.port: int = self._server.add_insecure_port("127.0.0.1:0")
        self.endpoint = f"http://127.0.0.1:{self.port}"

    def __enter__(self) -> GrpcReceiver:
        self._server.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._server.stop(grace=None)


class _Handler(BaseHTTPRequestHandler):
    receiver: OtlpReceiver

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length", "0"))
        body = self.rfile.read(length)
        encoding = (self.headers.get("Content-Encoding") or "").lower()
        if encoding == "gzip":
            body = gzip.decompress(body)
        elif encoding == "deflate":
            body = zlib.decompress(body)
        if self.path.rstrip("/") != "/v1/traces":
            self.send_error(404, "only /v1/traces is served")
            return
        request = trace_service_pb2.ExportTraceServiceRequest()
        try:
            request.ParseFromString(body)
        except Exception:
            self.send_error(400, "body is not an ExportTraceServiceRequest")
            return
        self.receiver.record(request)
        payload = trace_service_pb2.ExportTraceServiceResponse().SerializeToString()
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, format: str, *args: Any) -> None:
        """Keep test output quiet."""


class HttpReceiver(OtlpReceiver):
    """An OTLP/HTTP (protobuf) receiver on loopback; ``endpoint`` is the base URL."""

    def __init__(self) -> None:
        super().__init__()
        handler = type("Handler", (_Handler,), {"receiver": self})
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.port = int(self._server.server_address[1])
        self.endpoint = f"http://127.0.0.1:{self.port}"
        self.traces_url = self.endpoint + "/v1/traces"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def __enter__(self) -> HttpReceiver:
        self._thread.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join()


__all__ = [
    "GrpcReceiver",
    "HttpReceiver",
    "OtlpReceiver",
    "ReceivedEvent",
    "ReceivedSpan",
    "any_value",
    "flatten",
]
