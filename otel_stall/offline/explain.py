"""``otel-stall explain``: every span of a file as the conventions read it.

For a user whose framework's runs come out empty: each span's role and why,
and for tool spans where the tool name, arguments, result and status were
read from (or that content was not captured, and the switch that captures it).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from google.protobuf.message import DecodeError as ProtoDecodeError
from opentelemetry.proto.trace.v1.trace_pb2 import TracesData

from otel_stall.conventions import Conventions, SpanRecord
from otel_stall.conventions.explain import Explanation, explain
from otel_stall.core.errors import InputError
from otel_stall.offline.readers import STDIN, Unit, expand_paths, open_input, read_units
from otel_stall.otlp.decode import DecodeError, spans_from_json, spans_from_proto


def span_records(paths: Sequence[str], errors: list[InputError]) -> Iterator[SpanRecord]:
    """Every span of the inputs, whole (no plain-span shortcut); bad input goes to ``errors``."""
    for path in expand_paths(paths, errors):
        try:
            stream = open_input(path)
        except OSError as exc:
            errors.append(InputError(path, None, None, f"cannot read: {exc.strerror or exc}"))
            continue
        try:
            for unit in read_units(path, stream, errors):
                yield from _unit_spans(unit, errors)
        finally:
            if path != STDIN:
                stream.close()


def _unit_spans(unit: Unit, errors: list[InputError]) -> Iterator[SpanRecord]:
    """The spans of one message read from a file; its bad parts go to ``errors``."""

    def bad(error: DecodeError) -> None:
        errors.append(unit.error(str(error)))

    try:
        if unit.proto is not None:
            yield from spans_from_proto(TracesData.FromString(unit.proto), bad)
        elif unit.json is not None:
            yield from spans_from_json(unit.json, bad)
    except (DecodeError, ProtoDecodeError) as exc:
        errors.append(unit.error(str(exc)))


def explanations(
    paths: Sequence[str],
    conventions: Conventions,
    errors: list[InputError],
    span_id: str | None = None,
) -> Iterator[Explanation]:
    """How ``conventions`` read each span (or only the span ``span_id``)."""
    wanted = span_id.lower() if span_id else None
    for record in span_records(paths, errors):
        if wanted is None or record.span_id == wanted:
            yield explain(conventions, record)


__all__ = ["explanations", "span_records"]
