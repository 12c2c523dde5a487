"""Capture spans with the SDK alone, in the collector file exporter's OTLP/JSON lines.

``OtlpJsonLinesSpanExporter`` writes one ``{"resourceSpans": [...]}`` object
per export call and line, grouped by resource and scope, with hex ids, int64
as strings and enums as integers, like the collector's ``fileexporter``
(format json). ``otel-stall replay`` reads the file back, so a user can
capture a run without any collector and analyse it later.
"""

from __future__ import annotations

import io
import os
import threading
from collections.abc import Sequence
from typing import IO

import orjson
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

from otel_stall.otlp.encode import proto_to_json

__all__ = ["OtlpJsonLinesSpanExporter"]


class OtlpJsonLinesSpanExporter(SpanExporter):
    """An SDK ``SpanExporter`` that appends OTLP/JSON lines to a file or a binary/text stream."""

    def __init__(self, target: str | os.PathLike[str] | IO[bytes] | IO[str]) -> None:
        self._lock = threading.Lock()
        self._owned = isinstance(target, str | os.PathLike)
        self._stream: IO[bytes] | IO[str] = (
            open(target, "ab") if isinstance(target, str | os.PathLike) else target  # noqa: SIM115
        )
        self._closed = False

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        """Write one line holding every span of this batch."""
        if self._closed:
            return SpanExportResult.FAILURE
        if not spans:
            return SpanExportResult.SUCCESS
        line = orjson.dumps(proto_to_json(encode_spans(spans))) + b"\n"
        try:
            with self._lock:
                stream = self._stream
                if isinstance(stream, io.TextIOBase):
                    stream.write(line.decode("utf-8"))
                else:
                    stream.write(line)  # type: ignore[arg-type]
                stream.flush()
        except (OSError, ValueError):
            return SpanExportResult.FAILURE
        return SpanExportResult.SUCCESS

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        """Everything is flushed at each export."""
        return True

    def shutdown(self) -> None:
        """Close the file if this exporter opened it."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            if self._owned:
                self._stream.close()
