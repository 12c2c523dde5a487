"""Hostile input: garbage, truncated protobuf, 100 MB bodies, bad auth.

Each is refused with the proper OTLP status, and the server keeps serving
good requests afterwards.
"""

from __future__ import annotations

import gzip
import http.client
import json
import shutil
import ssl
import subprocess
import urllib.parse
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest
from gateway_support import agent_spans, scrape, value, wait_until
from google.rpc import status_pb2  # type: ignore[import-untyped]
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.trace.export import SpanExportResult
from otlp_sink import OtlpSink

from otel_stall.gateway import Gateway, GatewayConfig
from otel_stall.otlp.encode import proto_to_json

pytestmark = pytest.mark.e2e

EXPORT = "/opentelemetry.proto.collector.trace.v1.TraceService/Export"
TOKEN = "s3cret-token"
HUNDRED_MB = 100 * 1024 * 1024


@pytest.fixture
def gateway(sink: OtlpSink) -> Iterator[Gateway]:
    config = GatewayConfig(
        grpc="127.0.0.1:0", http="127.0.0.1:0", metrics="127.0.0.1:0", upstream=sink.endpoint
    )
    with Gateway(config) as running:
        yield running


def valid_request() -> bytes:
    payload: bytes = encode_spans(agent_spans(loops=1, progresses=0)).SerializeToString()
    return payload


def grpc_call(endpoint: str, body: bytes, metadata: Any = None) -> grpc.StatusCode:
    with grpc.insecure_channel(endpoint) as channel:
        call = channel.unary_unary(EXPORT, request_serializer=None, response_deserializer=None)
        try:
            call(body, timeout=60, metadata=metadata)
        except grpc.RpcError as exc:
            code: grpc.StatusCode = exc.code()
            return code
    return grpc.StatusCode.OK


def post(
    url: str, body: bytes, headers: dict[str, str], context: ssl.SSLContext | None = None
) -> tuple[int, bytes, str]:
    parts = urllib.parse.urlsplit(url)
    assert parts.hostname is not None
    conn: http.client.HTTPConnection
    if parts.scheme == "https":
        conn = http.client.HTTPSConnection(parts.hostname, parts.port, timeout=60, context=context)
    else:
        conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=60)
    try:
        conn.request("POST", parts.path, body=body, headers=headers)
        response = conn.getresponse()
        return response.status, response.read(), response.getheader("Content-Type") or ""
    finally:
        conn.close()


def still_serving(gateway: Gateway, sink: OtlpSink) -> None:
    """A good export over each transport still goes through, enriched."""
    assert gateway.grpc_endpoint is not None
    assert gateway.http_endpoint is not None
    before = sink.count
    payload = valid_request()
    spans = len(agent_spans(loops=1, progresses=0))
    assert grpc_call(gateway.grpc_endpoint, payload) is grpc.StatusCode.OK
    status, _, _ = post(gateway.http_endpoint, payload, {"Content-Type": "application/x-protobuf"})
    assert status == 200
    assert wait_until(lambda: sink.count == before + 2 * spans)


def truncated() -> bytes:
    payload = valid_request()
    return payload[: len(payload) - 3]


BAD_BODIES = {
    "garbage": b"\xff\xfe\xfd garbage \x00\x01" * 10,
    "truncated protobuf": truncated(),
}


@pytest.mark.parametrize("name", sorted(BAD_BODIES))
def test_grpc_rejects_malformed_protobuf_and_keeps_serving(
    name: str, sink: OtlpSink, gateway: Gateway
) -> None:
    """Garbage and truncated protobuf over gRPC get INVALID_ARGUMENT; good calls still work."""
    assert gateway.grpc_endpoint is not None
    assert grpc_call(gateway.grpc_endpoint, BAD_BODIES[name]) is grpc.StatusCode.INVALID_ARGUMENT
    still_serving(gateway, sink)
    assert gateway.metrics_endpoint is not None
    samples = scrape(gateway.metrics_endpoint)
    rejected = "otel_stall_gateway_requests_rejected_total"
    assert value(samples, rejected, transport="grpc", reason="malformed") == 1


@pytest.mark.parametrize("name", sorted(BAD_BODIES))
def test_http_rejects_malformed_protobuf_with_a_status_body(
    name: str, sink: OtlpSink, gateway: Gateway
) -> None:
    """Garbage and truncated protobuf over HTTP get 400 with a google.rpc.Status body."""
    assert gateway.http_endpoint is not None
    status, body, content_type = post(
        gateway.http_endpoint, BAD_BODIES[name], {"Content-Type": "application/x-protobuf"}
    )
    assert status == 400
    assert content_type == "application/x-protobuf"
    error = status_pb2.Status.FromString(body)
    assert error.code == grpc.StatusCode.INVALID_ARGUMENT.value[0]
    assert "protobuf" in error.message
    still_serving(gateway, sink)


def test_http_rejects_malformed_json(sink: OtlpSink, gateway: Gateway) -> None:
    """Broken OTLP/JSON gets 400 with a JSON Status body naming the problem."""
    assert gateway.http_endpoint is not None
    for body in (b'{"resourceSpans": [', b'{"resourceSpans": 7}', b"[1, 2]"):
        status, raw, content_type = post(
            gateway.http_endpoint, body, {"Content-Type": "application/json"}
        )
        assert status == 400
        assert content_type == "application/json"
        assert json.loads(raw)["code"] == 3
    still_serving(gateway, sink)


def test_json_with_one_bad_span_is_a_partial_success(sink: OtlpSink, gateway: Gateway) -> None:
    """One undecodable span is refused by count and position; the others are forwarded."""
    assert gateway.http_endpoint is not None
    spans = agent_spans(loops=1, progresses=0)
    document = proto_to_json(encode_spans(spans))
    document["resourceSpans"][0]["scopeSpans"][0]["spans"][0]["spanId"] = "not-hex!"
    status, raw, _ = post(
        gateway.http_endpoint,
        json.dumps(document).encode(),
        {"Content-Type": "application/json"},
    )
    assert status == 200
    partial = json.loads(raw)["partialSuccess"]
    assert partial["rejectedSpans"] == "1"
    assert "spans[0]" in partial["errorMessage"]
    assert wait_until(lambda: sink.count == len(spans) - 1)


def test_100_mb_bodies_are_refused_on_both_transports(sink: OtlpSink, gateway: Gateway) -> None:
    """100 MB requests get HTTP 413 / gRPC RESOURCE_EXHAUSTED; the server keeps serving."""
    assert gateway.grpc_endpoint is not None
    assert gateway.http_endpoint is not None
    huge = b"\x0a" + b"\xff" * (HUNDRED_MB - 1)
    status, body, _ = post(gateway.http_endpoint, huge, {"Content-Type": "application/x-protobuf"})
    assert status == 413
    assert "limit" in status_pb2.Status.FromString(body).message
    assert grpc_call(gateway.grpc_endpoint, huge) is grpc.StatusCode.RESOURCE_EXHAUSTED
    still_serving(gateway, sink)


def test_gzip_bomb_is_refused(sink: OtlpSink, gateway: Gateway) -> None:
    """A small gzip body that inflates past the limit gets 413, without inflating it all."""
    assert gateway.http_endpoint is not None
    bomb = gzip.compress(b"\x00" * (64 * 1024 * 1024))
    status, _, _ = post(
        gateway.http_endpoint,
        bomb,
        {"Content-Type": "application/x-protobuf", "Content-Encoding": "gzip"},
    )
    assert status == 413
    payload = valid_request()
    status, _, _ = post(
        gateway.http_endpoint,
        gzip.compress(payload),
        {"Content-Type": "application/x-protobuf", "Content-Encoding": "gzip"},
    )
    assert status == 200
    assert wait_until(lambda: sink.count == len(agent_spans(loops=1, progresses=0)))


@pytest.mark.parametrize(
    ("headers", "status"),
    [
        ({"Content-Type": "text/plain"}, 415),
        ({"Content-Type": "application/x-protobuf", "Content-Encoding": "br"}, 400),
    ],
)
def test_unsupported_requests_get_clear_statuses(
    headers: dict[str, str], status: int, sink: OtlpSink, gateway: Gateway
) -> None:
    """Unknown media types and encodings are refused with the matching HTTP status."""
    assert gateway.http_endpoint is not None
    got, _, _ = post(gateway.http_endpoint, valid_request(), headers)
    assert got == status
    still_serving(gateway, sink)


@pytest.fixture
def guarded(sink: OtlpSink) -> Iterator[Gateway]:
    config = GatewayConfig(
        grpc="127.0.0.1:0", http="127.0.0.1:0", metrics="off", upstream=sink.endpoint,
        bearer_token=TOKEN,
    )  # fmt: skip
    with Gateway(config) as running:
        yield running


@pytest.mark.parametrize("token", [None, "wrong", TOKEN])
def test_bearer_token_is_required_when_configured(
    token: str | None, sink: OtlpSink, guarded: Gateway
) -> None:
    """Without the right bearer token: gRPC UNAUTHENTICATED and HTTP 401; with it: accepted."""
    assert guarded.grpc_endpoint is not None
    assert guarded.http_endpoint is not None
    metadata = None if token is None else (("authorization", f"Bearer {token}"),)
    headers = {"Content-Type": "application/x-protobuf"}
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    code = grpc_call(guarded.grpc_endpoint, valid_request(), metadata)
    status, _, _ = post(guarded.http_endpoint, valid_request(), headers)
    if token == TOKEN:
        assert (code, status) == (grpc.StatusCode.OK, 200)
        assert wait_until(lambda: sink.count == 2 * len(agent_spans(loops=1, progresses=0)))
    else:
        assert (code, status) == (grpc.StatusCode.UNAUTHENTICATED, 401)
        assert sink.count == 0


@pytest.fixture(scope="module")
def certificate(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    openssl = shutil.which("openssl")
    if openssl is None:
        pytest.skip("openssl is not installed: cannot make a test certificate")
    directory = tmp_path_factory.mktemp("tls")
    cert, key = directory / "cert.pem", directory / "key.pem"
    subprocess.run(
        [
            openssl, "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
            "-keyout", str(key), "-out", str(cert), "-subj", "/CN=localhost",
            "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1",
        ],
        check=True, capture_output=True,
    )  # fmt: skip
    return cert, key


def test_tls_on_both_receivers(certificate: tuple[Path, Path], sink: OtlpSink) -> None:
    """With --tls-cert/--tls-key, the SDK exporter over TLS and HTTPS both get through."""
    cert, key = certificate
    config = GatewayConfig(
        grpc="127.0.0.1:0", http="127.0.0.1:0", metrics="off", upstream=sink.endpoint,
        tls_cert=str(cert), tls_key=str(key),
    )  # fmt: skip
    spans = agent_spans(loops=1, progresses=0)
    with Gateway(config) as gateway:
        assert gateway.grpc_endpoint is not None
        assert gateway.http_endpoint is not None
        credentials = grpc.ssl_channel_credentials(root_certificates=cert.read_bytes())
        exporter = OTLPSpanExporter(
            endpoint=f"localhost:{gateway.grpc_endpoint.rpartition(':')[2]}",
            credentials=credentials,
        )
        assert exporter.export(spans) is SpanExportResult.SUCCESS
        exporter.shutdown()
        context = ssl.create_default_context(cafile=str(cert))
        url = gateway.http_endpoint.replace("http://", "https://")
        status, _, _ = post(
            url, valid_request(), {"Content-Type": "application/x-protobuf"}, context
        )
        assert status == 200
        # Plain HTTP to the TLS port never gets an OTLP answer.
        with pytest.raises((OSError, http.client.HTTPException)):
            post(gateway.http_endpoint, valid_request(), {"Content-Type": "application/x-protobuf"})
        assert wait_until(lambda: sink.count == 2 * len(spans))
