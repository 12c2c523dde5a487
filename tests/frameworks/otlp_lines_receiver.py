"""A loopback OTLP/HTTP (protobuf) trace receiver that writes the capture exporter's format.

For frameworks that are not Python (the Vercel AI SDK in Node): their own OTel
SDK exports with its standard OTLP/HTTP protobuf exporter to this receiver, which
writes each request as one OTLP/JSON line through ``otel_stall.otlp.encode.proto_to_json``,
the function behind ``OtlpJsonLinesSpanExporter``; so a Node fixture reads
exactly like a Python one. Runs in the generator (the repository's venv).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import orjson
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)

from otel_stall.otlp.encode import proto_to_json


def _handler(out: Path, lock: threading.Lock) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:
            """Quiet."""

        def do_POST(self) -> None:
            """``/v1/traces``: append one line per request, answer an empty success."""
            body = self._body()
            request = ExportTraceServiceRequest()
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
