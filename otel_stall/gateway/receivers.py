"""OTLP receivers (gRPC, HTTP/protobuf, HTTP/JSON) and the ``/metrics`` endpoint.

Bad input is the client's problem, never the server's: malformed protobuf or
JSON gets gRPC ``INVALID_ARGUMENT`` or HTTP 400 with a ``google.rpc.Status``
body, an oversized request gets ``RESOURCE_EXHAUSTED`` or HTTP 413, spans with
malformed ids come back as a partial success, and the server goes on serving.
gRPC is served through a generic handler that takes the raw bytes, so a parse
failure reaches our code (and our metrics) instead of failing inside grpcio.

The HTTP listeners run on one asyncio event loop (:mod:`otel_stall.gateway.http`):
a connection costs no thread, and each has a TLS handshake and header deadline.
"""

from __future__ import annotations

import gzip
import hmac
import logging
import ssl
import zlib
from concurrent import futures
from http import HTTPStatus
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
from otel_stall.gateway.http import AsyncHttpServer, Reply, Request
from otel_stall.gateway.pipeline import Ingested, Pipeline
from otel_stall.gateway.prometheus import CONTENT_TYPE as PROMETHEUS_CONTENT_TYPE
from otel_stall.otlp.decode import DecodeError
from otel_stall.otlp.encode import traces_from_json

__all__ = [
    "GrpcReceiver",
    "HttpReceiver",
    "MetricsServer",
    "RequestRejected",
    "StartupError",
    "decode_request",
]

logger = logging.getLogger("otel_stall.gateway")

SERVICE: Final = "opentelemetry.proto.collector.trace.v1.TraceService"
_GRPC_INVALID_ARGUMENT: Final = 3
_GRPC_UNAUTHENTICATED: Final = 16
_GRPC_RESOURCE_EXHAUSTED: Final = 8
_DRAIN_CHUNK: Final = 1 << 16
_EMPTY_RESPONSE: Final[bytes] = bytes(ExportTraceServiceResponse().SerializeToString())


class StartupError(Exception):
    """A listener could not start; the message names it and why."""


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
                ("grpc.server_handshake_timeout_ms", int(config.header_timeout * 1000)),
                ("grpc.so_reuseport", 0),
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
        try:
            if config.tls_cert and config.tls_key:
                with open(config.tls_key, "rb") as key, open(config.tls_cert, "rb") as cert:
                    creds = grpc.ssl_server_credentials([(key.read(), cert.read())])
                self.port = self._server.add_secure_port(target, creds)
            else:
                self.port = self._server.add_insecure_port(target)
        except (OSError, RuntimeError) as exc:
            raise StartupError(f"cannot listen for OTLP/gRPC on {target}: {exc}") from None
        if self.port == 0:
            raise StartupError(f"cannot listen for OTLP/gRPC on {target}")
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
        try:
            ingested = self._pipeline.ingest(request, body)
        except Exception:
            logger.debug("ingest failed", exc_info=True)
            context.abort(grpc.StatusCode.INTERNAL, "the gateway failed on this request")
        return _response(ingested)


def _response(ingested: Ingested, errors: list[str] | None = None) -> bytes:
    """An ``ExportTraceServiceResponse``: empty, or a partial success naming what was refused."""
    refused = ingested.refused + len(errors or ())
    if not refused:
        return _EMPTY_RESPONSE
    response = ExportTraceServiceResponse()
    response.partial_success.rejected_spans = refused
    shown = list(errors or ())[:5]
    if ingested.refused:
        shown.insert(0, ingested.message)
    response.partial_success.error_message = "; ".join(shown) + (
        "; ..." if errors and len(errors) > 5 else ""
    )
    return bytes(response.SerializeToString())


# -- HTTP ----------------------------------------------------------------------------

_PROTOBUF: Final = "application/x-protobuf"
_JSON: Final = "application/json"


def _status_reply(
    http_status: int,
    grpc_code: int,
    message: str,
    json: bool,
    *,
    headers: tuple[tuple[str, str], ...] = (),
    close: bool = False,
) -> Reply:
    """An OTLP error: a ``google.rpc.Status``, as JSON or protobuf like the request."""
    if json:
        body = orjson.dumps({"code": grpc_code, "message": message})
        return Reply(http_status, body, _JSON, headers, close)
    body = status_pb2.Status(code=grpc_code, message=message).SerializeToString()
    return Reply(http_status, body, _PROTOBUF, headers, close)


def _media(headers: dict[str, str]) -> str:
    return (headers.get("content-type") or "").split(";")[0].strip().lower()


class HttpReceiver:
    """OTLP/HTTP on ``/v1/traces`` (protobuf and JSON), on the bounded asyncio server."""

    def __init__(self, pipeline: Pipeline, config: GatewayConfig) -> None:
        address = config.http_address
        assert address is not None
        self._pipeline = pipeline
        self._config = config
        self._server = _listen(
            "OTLP/HTTP",
            address,
            config,
            handler=self._handle,
            precheck=self._precheck,
            ssl_context=tls_context(config),
        )
        self.host, self.port = self._server.host, self._server.port

    def start(self) -> None:
        """Start serving."""
        self._server.start()

    def stop(self) -> None:
        """Stop serving and release the port."""
        self._server.stop()

    @property
    def stats(self) -> Any:
        """Open, refused and timed-out connection counts."""
        return self._server.stats

    def _reject(self, reason: str, reply: Reply) -> Reply:
        self._pipeline.metrics.rejected("http", reason)
        return reply

    def _precheck(self, method: str, path: str, headers: dict[str, str]) -> Reply | None:
        """Refusals that need no body: method, path, token, media type, declared length."""
        json = _media(headers) == _JSON
        if method != "POST":
            return _status_reply(HTTPStatus.METHOD_NOT_ALLOWED, 12, "use POST /v1/traces", True)
        if path != "/v1/traces":
            return _status_reply(
                HTTPStatus.NOT_FOUND, 5, f"no such path {path}; use /v1/traces", json
            )
        if not _authorized(self._config.bearer_token, headers.get("authorization")):
            return self._reject("unauthorized", _status_reply(
                HTTPStatus.UNAUTHORIZED, _GRPC_UNAUTHENTICATED, "missing or wrong bearer token",
                json, headers=(("WWW-Authenticate", "Bearer"),),
            ))  # fmt: skip
        media = _media(headers)
        if media not in (_PROTOBUF, _JSON):
            return self._reject("unsupported_media_type", _status_reply(
                HTTPStatus.UNSUPPORTED_MEDIA_TYPE, _GRPC_INVALID_ARGUMENT,
                f"Content-Type {media or '(none)'} is not {_PROTOBUF} or {_JSON}", False,
            ))  # fmt: skip
        length = headers.get("content-length", "").strip()
        limit = self._config.max_request_bytes
        if length.isdigit() and int(length) > limit:
            return self._reject("too_large", _status_reply(
                HTTPStatus.REQUEST_ENTITY_TOO_LARGE, _GRPC_RESOURCE_EXHAUSTED,
                f"request of {length} bytes is over the {limit}-byte limit", json,
            ))  # fmt: skip
        return None

    def _handle(self, request: Request) -> Reply:
        """Decompress, decode and ingest one request (in a worker thread)."""
        json = _media(request.headers) == _JSON
        limit = self._config.max_request_bytes
        encoding = (request.headers.get("content-encoding") or "identity").strip().lower()
        try:
            body = _decompress(request.body, encoding, limit)
            decoded, errors = decode_request(body, json=json)
        except _TooLarge:
            return self._reject("too_large", _status_reply(
                HTTPStatus.REQUEST_ENTITY_TOO_LARGE, _GRPC_RESOURCE_EXHAUSTED,
                f"request is over the {limit}-byte limit once decompressed", json,
            ))  # fmt: skip
        except ValueError as exc:
            return self._reject("malformed", _status_reply(
                HTTPStatus.BAD_REQUEST, _GRPC_INVALID_ARGUMENT, str(exc), json
            ))  # fmt: skip
        except RequestRejected as exc:
            return self._reject(exc.reason, _status_reply(
                HTTPStatus.BAD_REQUEST, _GRPC_INVALID_ARGUMENT, exc.message, json
            ))  # fmt: skip
        try:
            ingested = self._pipeline.ingest(decoded, None if json else body)
        except Exception:
            logger.debug("ingest failed", exc_info=True)
            return _status_reply(
                HTTPStatus.INTERNAL_SERVER_ERROR, 13, "the gateway failed on this request", json
            )
        if errors or ingested.refused:
            self._pipeline.metrics.rejected("http", "partial")
        return _ok(ingested, errors, json)


def _ok(ingested: Ingested, errors: list[str], json: bool) -> Reply:
    payload = _response(ingested, errors)
    if not json:
        return Reply(HTTPStatus.OK, payload, _PROTOBUF)
    if payload == _EMPTY_RESPONSE:
        return Reply(HTTPStatus.OK, b"{}", _JSON)
    response = ExportTraceServiceResponse.FromString(payload)
    body = orjson.dumps(
        {
            "partialSuccess": {
                "rejectedSpans": str(response.partial_success.rejected_spans),
                "errorMessage": response.partial_success.error_message,
            }
        }
    )
    return Reply(HTTPStatus.OK, body, _JSON)


class _TooLarge(Exception):
    pass


def _decompress(body: bytes, encoding: str, limit: int) -> bytes:
    """Gzip (every member of it) or deflate, bounded: a small bomb cannot expand past ``limit``."""
    if encoding in ("", "identity"):
        return body
    if encoding == "gzip":
        wbits = 16 + zlib.MAX_WBITS
    elif encoding == "deflate":
        wbits = zlib.MAX_WBITS
    else:
        raise ValueError(f"Content-Encoding {encoding} is not supported (use gzip)")
    out: list[bytes] = []
    size = 0
    data = body
    while True:
        decoder = zlib.decompressobj(wbits)
        try:
            chunk = decoder.decompress(data, limit - size + 1)
        except zlib.error as exc:
            raise ValueError(f"cannot decompress the {encoding} body: {exc}") from None
        size += len(chunk)
        if size > limit or decoder.unconsumed_tail:
            raise _TooLarge
        if not decoder.eof:
            raise ValueError(f"the {encoding} body is truncated")
        out.append(chunk)
        # A gzip stream may hold several members, one after the other (RFC 1952, 2.2).
        data = decoder.unused_data
        if encoding != "gzip" or not data.strip(b"\x00"):
            return b"".join(out)


def tls_context(config: GatewayConfig) -> ssl.SSLContext | None:
    """The server TLS context, or ``None``; a bad certificate or key is a :class:`StartupError`."""
    if not (config.tls_cert and config.tls_key):
        return None
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    try:
        context.load_cert_chain(config.tls_cert, config.tls_key)
    except (OSError, ssl.SSLError) as exc:
        raise StartupError(
            f"TLS: cannot load --tls-cert {config.tls_cert} / --tls-key {config.tls_key}: {exc}"
        ) from None
    return context


def _listen(
    name: str,
    address: tuple[str, int],
    config: GatewayConfig,
    *,
    handler: Any,
    precheck: Any = None,
    ssl_context: ssl.SSLContext | None = None,
) -> AsyncHttpServer:
    try:
        return AsyncHttpServer(
            name,
            address,
            handler=handler,
            precheck=precheck,
            ssl_context=ssl_context,
            max_connections=config.http_connections,
            header_timeout=config.header_timeout,
            body_timeout=config.body_timeout,
            min_body_rate=config.min_body_rate,
            body_grace=config.body_grace,
            max_body=config.max_request_bytes,
            workers=config.workers,
        )
    except OSError as exc:
        host, port = address
        raise StartupError(
            f"cannot listen for {name} on {host}:{port}: {exc.strerror or exc}"
        ) from None


# -- /metrics --------------------------------------------------------------------------


class MetricsServer:
    """Prometheus scrape endpoint, and ``/healthz``."""

    def __init__(self, pipeline: Pipeline, address: tuple[str, int], config: GatewayConfig) -> None:
        self._pipeline = pipeline
        self._server = _listen("metrics", address, config, handler=self._handle)
        self.host, self.port = self._server.host, self._server.port

    def start(self) -> None:
        """Start serving."""
        self._server.start()

    def stop(self) -> None:
        """Stop serving and release the port."""
        self._server.stop()

    def _handle(self, request: Request) -> Reply:
        """``/metrics`` in Prometheus text; ``/healthz`` for probes."""
        if request.method != "GET":
            return Reply(HTTPStatus.METHOD_NOT_ALLOWED, b"use GET\n")
        if request.path == "/metrics":
            body = self._pipeline.metrics_text().encode()
            content_type, status = PROMETHEUS_CONTENT_TYPE, HTTPStatus.OK
        elif request.path in ("/healthz", "/"):
            healthy, message = self._pipeline.health()
            status = HTTPStatus.OK if healthy else HTTPStatus.SERVICE_UNAVAILABLE
            body, content_type = (message + "\n").encode(), "text/plain"
        else:
            body, content_type, status = b"not found\n", "text/plain", HTTPStatus.NOT_FOUND
        if "gzip" in request.headers.get("accept-encoding", "") and len(body) > 4096:
            return Reply(
                status, gzip.compress(body, 5), content_type, (("Content-Encoding", "gzip"),)
            )
        return Reply(status, body, content_type)
