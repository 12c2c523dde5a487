"""A loopback OTLP/HTTP trace receiver (protobuf or JSON) writing the capture exporter's format.

For frameworks that are not Python (the Vercel AI SDK in Node): their own OTel
SDK exports with its standard OTLP/HTTP protobuf exporter to this receiver, which
writes each request as one OTLP/JSON line through ``otel_stall.otlp.encode.proto_to_json``,
the function behind ``OtlpJsonLinesSpanExporter``; so a Node fixture reads
exactly like a Python one. Runs in the generator (the repository's venv).
"""

from __future__ import annotations

import base64
import gzip
import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import orjson
from google.protobuf import json_format
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)

from otel_stall.otlp.encode import proto_to_json

_ID_KEYS = ("traceId", "spanId", "parentSpanId")


def _hex_ids_to_base64(data: Any) -> Any:
    """OTLP/JSON spells ids in hex; protobuf's JSON mapping wants base64 for bytes."""
    if isinstance(data, list):
        return [_hex_ids_to_base64(item) for item in data]
    if not isinstance(data, dict):
        return data
    return {
        key: base64.b64encode(bytes.fromhex(value)).decode()
        if key in _ID_KEYS and isinstance(value, str)
        else _hex_ids_to_base64(value)
        for key, value in data.items()
    }


def _handler(out: Path, lock: threading.Lock) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:
            """Quiet."""

        def do_POST(self) -> None:
            """``/v1/traces``: append one line per request; logs and metrics are dropped."""
            body = self._body()
            request = ExportTraceServiceRequest()
            if self.headers.get("Content-Encoding", "").lower() == "gzip":
                body = gzip.decompress(body)
            if not self.path.rstrip("/").endswith("/v1/traces"):
                pass
            elif "json" in self.headers.get("Content-Type", ""):
                json_format.ParseDict(_hex_ids_to_base64(json.loads(body)), request, True)
            else:
                request.ParseFromString(body)
            if request.resource_spans:
                with lock, out.open("ab") as stream:
                    stream.write(orjson.dumps(proto_to_json(request)) + b"\n")
            reply = ExportTraceServiceResponse().SerializeToString()
            self.send_response(200)
            self.send_header("Content-Type", "application/x-protobuf")
            self.send_header("Content-Length", str(len(reply)))
            self.end_headers()
            self.wfile.write(reply)

        def _body(self) -> bytes:
            """The request body, sized or chunked (Node's exporter streams it chunked)."""
            if self.headers.get("Transfer-Encoding", "").lower() != "chunked":
                return self.rfile.read(int(self.headers.get("Content-Length", 0)))
            parts = []
            while size := int(self.rfile.readline().split(b";")[0].strip() or b"0", 16):
                parts.append(self.rfile.read(size))
                self.rfile.readline()
            while self.rfile.readline().strip():  # trailers, then the blank line
                pass
            return b"".join(parts)

    return Handler


@contextmanager
def receiving(out: Path) -> Iterator[str]:
    """Receive traces into ``out`` (emptied first); yields the ``.../v1/traces`` URL."""
    out.unlink(missing_ok=True)
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(out, threading.Lock()))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1/traces"
    finally:
        server.shutdown()
        server.server_close()
