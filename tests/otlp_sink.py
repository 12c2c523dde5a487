"""A minimal OTLP/gRPC trace receiver that keeps what arrives: for tests, benches, debugging.

It stands in for the upstream collector on loopback. It counts every span,
keeps each span's ``stall.*`` attributes and event names (not whole spans,
so 100k spans stay small), and can be stopped and started again on the same
port to play an upstream outage. Like a real collector it can refuse messages
over a size limit (``max_message``: gRPC RESOURCE_EXHAUSTED, from grpcio
itself), refuse a request holding a span with malformed ids (``validate_ids``:
INVALID_ARGUMENT, as the collector's decoder does), and answer slowly (``delay``).
"""

from __future__ import annotations

import threading
import time
from concurrent import futures
from dataclasses import dataclass, field
from typing import Any

import grpc
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)

from otel_stall.otlp.decode import any_value_to_python

__all__ = ["OtlpSink", "SinkSpan"]

_SERVICE = "opentelemetry.proto.collector.trace.v1.TraceService"
_RESPONSE = bytes(ExportTraceServiceResponse().SerializeToString())


@dataclass(frozen=True, slots=True)
class SinkSpan:
    """What the sink keeps of one span."""

    trace_id: str
    span_id: str
    name: str
    stall: dict[str, Any] = field(default_factory=dict)
    """The span's ``stall.*`` attributes."""
    events: tuple[str, ...] = ()
    """Names of the span's events."""
    attribute_count: int = 0


class OtlpSink:
    """An OTLP/gRPC receiver on loopback; ``port=0`` picks a free port once, then keeps it."""

    def __init__(
        self,
        port: int = 0,
        *,
        keep: bool = True,
        workers: int = 4,
        max_message: int = 64 << 20,
        validate_ids: bool = False,
        delay: float = 0.0,
    ) -> None:
        self.port = port
        self.keep = keep
        self._workers = workers
        self.max_message = max_message
        self.validate_ids = validate_ids
        self.delay = delay
        self.refused = 0
        """Requests refused for malformed ids."""
        self._lock = threading.Lock()
        self._server: Any = None
        self.count = 0
        self.requests = 0
        self.spans: dict[str, SinkSpan] = {}
        """Kept spans by span id (hex); a span delivered twice is kept once."""
        self.duplicates = 0

    @property
    def endpoint(self) -> str:
        """``127.0.0.1:PORT``."""
        return f"127.0.0.1:{self.port}"

    def start(self) -> OtlpSink:
        """Listen (again) on the same port."""
        server = grpc.server(
            futures.ThreadPoolExecutor(max_workers=self._workers),
            options=[
                ("grpc.max_receive_message_length", self.max_message),
                ("grpc.so_reuseport", 0),
            ],
        )
        handler = grpc.method_handlers_generic_handler(
            _SERVICE,
            {
                "Export": grpc.unary_unary_rpc_method_handler(
                    self._export, request_deserializer=None, response_serializer=None
                )
            },
        )
        server.add_generic_rpc_handlers((handler,))
        port = server.add_insecure_port(f"127.0.0.1:{self.port}")
        if port == 0:
            raise OSError(f"cannot listen on 127.0.0.1:{self.port}")
        self.port = port
        server.start()
        self._server = server
        return self

    def stop(self) -> None:
        """Stop listening (an outage); :meth:`start` brings it back."""
        if self._server is not None:
            self._server.stop(0).wait(5)
            self._server = None

    def __enter__(self) -> OtlpSink:
        return self.start()

    def __exit__(self, *_exc: object) -> None:
        self.stop()

    def _export(self, body: bytes, context: grpc.ServicerContext) -> bytes:
        request = ExportTraceServiceRequest.FromString(body)
        if self.delay:
            time.sleep(self.delay)
        if self.validate_ids and not _ids_valid(request):
            with self._lock:
                self.refused += 1
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, "invalid trace or span id length")
        kept: list[SinkSpan] = []
        count = 0
        for rs in request.resource_spans:
            for ss in rs.scope_spans:
                count += len(ss.spans)
                if not self.keep:
                    continue
                for span in ss.spans:
                    stall = {
                        kv.key: any_value_to_python(kv.value)
                        for kv in span.attributes
                        if kv.key.startswith("stall.")
                    }
                    kept.append(
                        SinkSpan(
                            span.trace_id.hex(),
                            span.span_id.hex(),
                            span.name,
                            stall,
                            tuple(e.name for e in span.events),
                            len(span.attributes),
                        )
                    )
        with self._lock:
            self.count += count
            self.requests += 1
            for item in kept:
                if item.span_id in self.spans:
                    self.duplicates += 1
                self.spans[item.span_id] = item
        return _RESPONSE


def _ids_valid(request: Any) -> bool:
    return all(
        len(span.trace_id) == 16 and len(span.span_id) == 8 and len(span.parent_span_id) in (0, 8)
        for rs in request.resource_spans
        for ss in rs.scope_spans
        for span in ss.spans
    )
