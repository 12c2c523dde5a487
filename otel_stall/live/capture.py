"""Capture spans with the SDK alone, in the collector file exporter's OTLP/JSON lines.

``OtlpJsonLinesSpanExporter`` writes one ``{"resourceSpans": [...]}`` object
per export call and line, grouped by resource and scope, with hex ids, int64
as strings and enums as integers, like the collector's ``fileexporter``
(format json). ``otel-stall replay`` reads the file back, so a user can
capture a run without any collector and analyse it later.

Fork-safe (issue 27): a prefork server (gunicorn ``--preload``, celery) may
fork while another thread is inside :meth:`~OtlpJsonLinesSpanExporter.export`.
The child inherits the lock held, and its first span would wait for ever. An
at-fork hook gives every live exporter a new lock in the child. A file the
exporter opened itself is unbuffered (one ``write`` per line, appended with
``O_APPEND``), so no buffered writer's own lock, nor half a line of the
parent's, is inherited either; parent and children append whole lines to one
file. A stream the caller passes in is the caller's to make fork-safe.
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

from otel_stall.live.fork import reset_in_child
from otel_stall.otlp.encode import proto_to_json

__all__ = ["OtlpJsonLinesSpanExporter"]


class OtlpJsonLinesSpanExporter(SpanExporter):
    """An SDK ``SpanExporter`` that appends OTLP/JSON lines to a file or a binary/text stream."""

    def __init__(self, target: str | os.PathLike[str] | IO[bytes] | IO[str]) -> None:
        self._lock = threading.Lock()
        self._owned = isinstance(target, str | os.PathLike)
        self._stream: IO[bytes] | IO[str] = (
            open(target, "ab", buffering=0)  # noqa: SIM115
            if isinstance(target, str | os.PathLike)
            else target
        )
        self._closed = False
        reset_in_child(self)

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
                elif self._owned:
                    _write_all(stream, line)  # type: ignore[arg-type]
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

    def _after_fork(self) -> None:
        """In a forked child: a new lock (the parent's may have been held by another thread)."""
        self._lock = threading.Lock()


def _write_all(stream: IO[bytes], data: bytes) -> None:
    """An unbuffered file may write less than asked (a signal, a full disk): write the rest."""
    view = memoryview(data)
    while view:
        written = stream.write(view)
        if not written:  # None: would block; 0: nothing more fits
            raise OSError("short write")
        view = view[written:]
