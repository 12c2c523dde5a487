"""OTLP receivers (gRPC, HTTP/protobuf, HTTP/JSON) and the ``/metrics`` endpoint.

Bad input is the client's problem, never the server's: malformed protobuf or
JSON gets gRPC ``INVALID_ARGUMENT`` or HTTP 400 with a ``google.rpc.Status``
body, an oversized request gets ``RESOURCE_EXHAUSTED`` or HTTP 413, and the
server goes on serving. gRPC is served through a generic handler that takes
the raw bytes, so a parse failure reaches our code (and our metrics) instead
of failing inside grpcio.
"""

from __future__ import annotations

import contextlib
import gzip
import hmac
import logging
import socket
import ssl
import threading
import zlib
from concurrent import futures
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Final

import grpc
import orjson
from google.protobuf.message import DecodeError as ProtobufDecodeError
from google.rpc import status_pb2  # type: ignore[import-untyped]
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)

from otel_stall.gateway.config import GatewayConfig
from otel_stall.gateway.core import Pipeline
from otel_stall.gateway.prometheus import CONTENT_TYPE as PROMETHEUS_CONTENT_TYPE
from otel_stall.otlp.decode import DecodeError
from otel_stall.otlp.encode import traces_from_json

__all__ = ["GrpcReceiver", "HttpReceiver", "MetricsServer", "RequestRejected", "decode_request"]

logger = logging.getLogger("otel_stall.gateway")

SERVICE: Final = "opentelemetry.proto.collector.trace.v1.TraceService"
_GRPC_INVALID_ARGUMENT: Final = 3
_GRPC_UNAUTHENTICATED: Final = 16
_GRPC_RESOURCE_EXHAUSTED: Final = 8
_DRAIN_CHUNK: Final = 1 << 16
_EMPTY_RESPONSE: Final[bytes] = bytes(ExportTraceServiceResponse().SerializeToString())


class RequestRejected(Exception):
    """A request the gateway refuses, with the reason label and the client-facing message."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason
        self.message = message


def decode_request(body: bytes, *, json: bool) -> tuple[Any, list[str]]:
    """Bytes to an ``ExportTraceServiceRequest``; also the per-span JSON errors (partial success).

    Raises :class:`RequestRejected` when the request as a whole cannot be read.
    """
    if not json:
        request = ExportTraceServiceRequest()
        try:
            request.ParseFromString(body)
        except (ProtobufDecodeError, RuntimeError, ValueError) as exc:
            raise RequestRejected("malformed", f"cannot decode OTLP protobuf: {exc}") from None
        return request, []
    try:
        obj = orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        raise RequestRejected("malformed", f"cannot decode OTLP/JSON: {exc}") from None
    errors: list[str] = []
    try:
        data = traces_from_json(obj, on_error=lambda e: errors.append(str(e)))
    except DecodeError as exc:
        raise RequestRejected("malformed", f"invalid OTLP/JSON: {exc}") from None
    except RecursionError:
        raise RequestRejected("malformed", "invalid OTLP/JSON: nested too deeply") from None
    request = ExportTraceServiceRequest()
    request.resource_spans.extend(data.resource_spans)
    return request, errors


def _authorized(token: str | None, header: str | None) -> bool:
    if token is None:
        return True
    expected = f"Bearer {token}"
    return header is not None and hmac.compare_digest(header.encode(), expected.encode())


# -- gRPC ---------------------------------------------------------------------------


class GrpcReceiver:
    """OTLP/gRPC ``TraceService/Export``."""

    def __init__(self, pipeline: Pipeline, config: GatewayConfig) -> None:
        address = config.grpc_address
        assert address is not None
        self._pipeline = pipeline
        self._token = config.bearer_token
        self._server = grpc.server(
            futures.ThreadPoolExecutor(max_workers=config.workers, thread_name_prefix="otlp-grpc"),
            options=[
                ("grpc.max_receive_message_length", config.max_request_bytes),
                ("grpc.max_send_message_length", 4 << 20),
            ],
        )
        handler = grpc.method_handlers_generic_handler(
            SERVICE,
            {
                "Export": grpc.unary_unary_rpc_method_handler(
                    self._export, request_deserializer=None, response_serializer=None
                )
            },
        )
        self._server.add_generic_rpc_handlers((handler,))
        host, port = address
        target = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
        if config.tls_cert and config.tls_key:
            with open(config.tls_key, "rb") as key, open(config.tls_cert, "rb") as cert:
                creds = grpc.ssl_server_credentials([(key.read(), cert.read())])
            self.port = self._server.add_secure_port(target, creds)
        else:
            self.port = self._server.add_insecure_port(target)
        if self.port == 0:
            raise OSError(f"cannot listen for OTLP/gRPC on {target}")
        self.host = host

    def start(self) -> None:
        """Start serving."""
        self._server.start()

    def stop(self, grace: float = 5.0) -> None:
        """Stop accepting; let running calls finish for ``grace`` seconds."""
        self._server.stop(grace).wait(grace + 1.0)

    def _export(self, body: bytes, context: grpc.ServicerContext) -> bytes:
        metrics = self._pipeline.metrics
        if self._token is not None:
            header = dict(context.invocation_metadata()).get("authorization")
            if not _authorized(self._token, header if isinstance(header, str) else None):
                metrics.rejected("grpc", "unauthorized")
                context.abort(grpc.StatusCode.UNAUTHENTICATED, "missing or wrong bearer token")
        try:
            request, _ = decode_request(body, json=False)
        except RequestRejected as exc:
            metrics.rejected("grpc", exc.reason)
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, exc.message)
        self._pipeline.ingest(request)
        return _EMPTY_RESPONSE


# -- HTTP ----------------------------------------------------------------------------


class _Server(ThreadingHTTPServer):
    """A threading server that does its TLS handshake in the connection's thread."""

    daemon_threads = True
    request_queue_size = 128

    def __init__(
        self,
        address: tuple[str, int],
        handler: type[BaseHTTPRequestHandler],
        ssl_context: ssl.SSLContext | None,
    ) -> None:
        if ":" in address[0]:
            self.address_family = socket.AF_INET6
        super().__init__(address, handler)
        self.ssl_context = ssl_context

    def finish_request(self, request: Any, client_address: Any) -> None:
        if self.ssl_context is not None:
            try:
                request = self.ssl_context.wrap_socket(request, server_side=True)
            except (OSError, ssl.SSLError):
                return
        super().finish_request(request, client_address)

    def handle_error(self, request: Any, client_address: Any) -> None:
        logger.debug("connection from %s failed", client_address, exc_info=True)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "otel-stall"
    timeout = 30
    pipeline: Pipeline
    config: GatewayConfig

    def log_message(self, format: str, *args: Any) -> None:
        logger.debug("http: " + format, *args)

    # -- responses -----------------------------------------------------------

    def _reply(
        self,
        status: int,
        body: bytes,
        content_type: str,
        close: bool = False,
        headers: dict[str, str] | None = None,
    ) -> None:
        self.send_response(status)
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        if close:
            self.send_header("Connection", "close")
            self.close_connection = True
        self.end_headers()
        self.wfile.write(body)

    def _status(
        self,
        http_status: int,
        grpc_code: int,
        message: str,
        json: bool,
        close: bool = False,
        headers: dict[str, str] | None = None,
    ) -> None:
        if json:
            body = orjson.dumps({"code": grpc_code, "message": message})
            content_type = "application/json"
        else:
            body = status_pb2.Status(code=grpc_code, message=message).SerializeToString()
            content_type = "application/x-protobuf"
        self._reply(http_status, body, content_type, close, headers)

    def _reject(
        self,
        reason: str,
        http_status: int,
        grpc_code: int,
        message: str,
        json: bool,
        close: bool = False,
        headers: dict[str, str] | None = None,
    ) -> None:
        self.pipeline.metrics.rejected("http", reason)
        self._status(http_status, grpc_code, message, json, close, headers)

    def _drain(self, length: int) -> bool:
        """Read and discard a body we refuse, so the client can read our answer."""
        limit = 8 * self.config.max_request_bytes
        if length > limit:
            return False
        left = length
        while left > 0:
            chunk = self.rfile.read(min(left, _DRAIN_CHUNK))
            if not chunk:
                return False
            left -= len(chunk)
        return True

    # -- methods ---------------------------------------------------------------

    def do_GET(self) -> None:
        """Only POST is served here."""
        self._status(HTTPStatus.METHOD_NOT_ALLOWED, 12, "use POST /v1/traces", json=True)

    def do_POST(self) -> None:
        """OTLP/HTTP export, protobuf or JSON."""
        content_type = (self.headers.get("Content-Type") or "").split(";")[0].strip().lower()
        json = content_type == "application/json"
        length_header = self.headers.get("Content-Length")
        path = self.path.split("?")[0]
        if path != "/v1/traces":
            self._drain_or_close(length_header)
            self._status(HTTPStatus.NOT_FOUND, 5, f"no such path {path}; use /v1/traces", json)
            return
        if not _authorized(self.config.bearer_token, self.headers.get("Authorization")):
            self._drain_or_close(length_header)
            self._reject(
                "unauthorized", HTTPStatus.UNAUTHORIZED, _GRPC_UNAUTHENTICATED,
                "missing or wrong bearer token", json, headers={"WWW-Authenticate": "Bearer"},
            )  # fmt: skip
            return
        if content_type not in ("application/x-protobuf", "application/json"):
            self._drain_or_close(length_header)
            self._reject(
                "unsupported_media_type", HTTPStatus.UNSUPPORTED_MEDIA_TYPE,
                _GRPC_INVALID_ARGUMENT,
                f"Content-Type {content_type or '(none)'} is not application/x-protobuf "
                "or application/json", json=False,
            )  # fmt: skip
            return
        if length_header is None or not length_header.strip().isdigit():
            self._reject(
                "length_required", HTTPStatus.LENGTH_REQUIRED, _GRPC_INVALID_ARGUMENT,
                "a Content-Length header is required", json, close=True,
            )  # fmt: skip
            return
        length = int(length_header)
        limit = self.config.max_request_bytes
        if length > limit:
            drained = self._drain(length)
            self._reject(
                "too_large", HTTPStatus.REQUEST_ENTITY_TOO_LARGE, _GRPC_RESOURCE_EXHAUSTED,
                f"request of {length} bytes is over the {limit}-byte limit", json,
                close=not drained,
            )  # fmt: skip
            return
        body = self.rfile.read(length)
        if len(body) < length:
            self.close_connection = True
            return
        encoding = (self.headers.get("Content-Encoding") or "identity").strip().lower()
        try:
            body = _decompress(body, encoding, limit)
        except _TooLarge:
            self._reject(
                "too_large", HTTPStatus.REQUEST_ENTITY_TOO_LARGE, _GRPC_RESOURCE_EXHAUSTED,
                f"request is over the {limit}-byte limit once decompressed", json,
            )  # fmt: skip
            return
        except ValueError as exc:
            self._reject(
                "malformed", HTTPStatus.BAD_REQUEST, _GRPC_INVALID_ARGUMENT, str(exc), json
            )
            return
        try:
            request, errors = decode_request(body, json=json)
        except RequestRejected as exc:
            self._reject(
                exc.reason, HTTPStatus.BAD_REQUEST, _GRPC_INVALID_ARGUMENT, exc.message, json
            )
            return
        self.pipeline.ingest(request)
        if errors:
            self.pipeline.metrics.rejected("http", "partial")
        self._ok(json, errors)

    def _drain_or_close(self, length_header: str | None) -> None:
        if length_header and length_header.strip().isdigit() and self._drain(int(length_header)):
            return
        self.close_connection = True

    def _ok(self, json: bool, errors: list[str]) -> None:
        response = ExportTraceServiceResponse()
        if errors:
            response.partial_success.rejected_spans = len(errors)
            shown = "; ".join(errors[:5]) + ("; ..." if len(errors) > 5 else "")
            response.partial_success.error_message = shown
        if json:
            body = b"{}"
            if errors:
                body = orjson.dumps(
                    {
                        "partialSuccess": {
                            "rejectedSpans": str(len(errors)),
                            "errorMessage": response.partial_success.error_message,
                        }
                    }
                )
            self._reply(HTTPStatus.OK, body, "application/json")
        else:
            self._reply(HTTPStatus.OK, response.SerializeToString(), "application/x-protobuf")


class _TooLarge(Exception):
    pass


def _decompress(body: bytes, encoding: str, limit: int) -> bytes:
    """gzip/deflate with a bound, so a small bomb cannot expand past the request limit."""
    if encoding in ("", "identity"):
        return body
    if encoding == "gzip":
        wbits = 16 + zlib.MAX_WBITS
    elif encoding == "deflate":
        wbits = zlib.MAX_WBITS
    else:
        raise ValueError(f"Content-Encoding {encoding} is not supported (use gzip)")
    decoder = zlib.decompressobj(wbits)
    try:
        out = decoder.decompress(body, limit + 1)
    except zlib.error as exc:
        raise ValueError(f"cannot decompress the {encoding} body: {exc}") from None
    if len(out) > limit or decoder.unconsumed_tail:
        raise _TooLarge
    return out


class _Background:
    """An HTTP server run in a daemon thread, stopped without raising."""

    def __init__(self, server: _Server, name: str) -> None:
        self._server = server
        self._name = name
        self.host: str = str(server.server_address[0])
        self.port: int = server.server_address[1]

    def start(self) -> None:
        """Serve in a background thread."""
        threading.Thread(target=self._server.serve_forever, name=self._name, daemon=True).start()

    def stop(self) -> None:
        """Stop accepting and close the socket."""
        with contextlib.suppress(OSError):
            self._server.shutdown()
            self._server.server_close()


class HttpReceiver(_Background):
    """OTLP/HTTP on ``/v1/traces`` (protobuf and JSON), one thread per connection."""

    def __init__(self, pipeline: Pipeline, config: GatewayConfig) -> None:
        address = config.http_address
        assert address is not None
        context = None
        if config.tls_cert and config.tls_key:
            context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            context.load_cert_chain(config.tls_cert, config.tls_key)
        handler = type("OtlpHandler", (_Handler,), {"pipeline": pipeline, "config": config})
        super().__init__(_Server(address, handler, context), "otlp-http")


# -- /metrics --------------------------------------------------------------------------


class _MetricsHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "otel-stall"
    timeout = 30
    pipeline: Pipeline

    def log_message(self, format: str, *args: Any) -> None:
        logger.debug("metrics: " + format, *args)

    def do_GET(self) -> None:
        """``/metrics`` in Prometheus text; ``/healthz`` for probes."""
        path = self.path.split("?")[0]
        if path == "/metrics":
            body = self.pipeline.metrics_text().encode()
            content_type = PROMETHEUS_CONTENT_TYPE
            status = HTTPStatus.OK
        elif path in ("/healthz", "/"):
            body, content_type, status = b"ok\n", "text/plain", HTTPStatus.OK
        else:
            body, content_type, status = b"not found\n", "text/plain", HTTPStatus.NOT_FOUND
        if "gzip" in (self.headers.get("Accept-Encoding") or "") and len(body) > 4096:
            body = gzip.compress(body, 5)
            encoded = True
        else:
            encoded = False
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        if encoded:
            self.send_header("Content-Encoding", "gzip")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


class MetricsServer(_Background):
    """Prometheus scrape endpoint."""

    def __init__(self, pipeline: Pipeline, address: tuple[str, int]) -> None:
        handler = type("MetricsHandler", (_MetricsHandler,), {"pipeline": pipeline})
        super().__init__(_Server(address, handler, None), "otel-stall-metrics")
