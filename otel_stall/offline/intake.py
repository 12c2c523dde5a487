"""Pass one of a replay: decoded OTLP spans into one analyzer per trace.

Decoding is :mod:`otel_stall.otlp.decode`'s business; this module is the
:class:`~otel_stall.otlp.decode.SpanSink` it decodes into. It keeps the books
(every span entry counted, every bad one listed with its file and line or
offset) and hands each span to its trace's :class:`TraceAnalyzer`.
"""

from __future__ import annotations

from google.protobuf.message import DecodeError as ProtoDecodeError
from opentelemetry.proto.trace.v1.trace_pb2 import TracesData

from otel_stall.conventions import Conventions, SpanRecord
from otel_stall.core.errors import InputError
from otel_stall.core.policy import StallPolicy
from otel_stall.offline.analysis import TraceAnalyzer
from otel_stall.offline.readers import Unit
from otel_stall.otlp.decode import DecodeError, decode_json, decode_proto

__all__ = ["Intake"]


class Intake:
    """Feeds decoded units into one :class:`TraceAnalyzer` per trace.

    Every span entry is counted in :attr:`spans`, and bad ones are listed in
    ``errors`` (the caller's list) with their position; nothing raises.
    """

    def __init__(
        self, policy: StallPolicy, conventions: Conventions, errors: list[InputError]
    ) -> None:
        self.policy = policy
        self.conventions = conventions
        self.errors = errors
        self.spans = 0
        """Span entries seen, bad ones included."""
        self.analyzers: dict[str, TraceAnalyzer] = {}
        """One analyzer per trace id, in the order traces were first seen."""
        self._plain_keys = conventions.role_keys
        self._unit: Unit | None = None

    def feed_proto(self, unit: Unit, payload: bytes) -> None:
        """Decode one protobuf message into the analyzers."""
        try:
            message = TracesData.FromString(payload)
        except (ProtoDecodeError, RuntimeError) as exc:
            self.errors.append(unit.error(f"not an OTLP protobuf traces message ({exc})"))
            return
        self._unit = unit
        decode_proto(message, self, self._bad_span, self._plain_keys)

    def feed_json(self, unit: Unit) -> None:
        """Decode one OTLP/JSON object into the analyzers; a broken structure ends it."""
        self._unit = unit
        try:
            decode_json(unit.json, self, self._bad_span, self._plain_keys)
        except DecodeError as exc:
            self.errors.append(unit.error(str(exc)))
        except RecursionError:
            self.errors.append(unit.error("nested too deeply to decode"))

    # -- the decoder's sink -----------------------------------------------------------

    def add(self, record: SpanRecord) -> None:
        """One decoded span into its trace's analyzer (a span without ids is only listed)."""
        self.spans += 1
        trace_id = record.trace_id
        if not trace_id or not record.span_id:
            which = "traceId" if not trace_id else "spanId"
            self._error(
                f"span {record.name!r} has an empty {which}: it is kept in the "
                "output but left out of detection"
            )
            return
        self._analyzer(trace_id).add(record)

    def add_link(self, trace_id: str, link: bytes) -> None:
        """A plain span: only its parent link goes to its trace's analyzer."""
        self.spans += 1
        self._analyzer(trace_id).add_link(link)

    def _bad_span(self, error: DecodeError) -> None:
        """A span entry that could not be decoded: counted and listed."""
        self.spans += 1
        self._error(str(error))

    def _error(self, message: str) -> None:
        assert self._unit is not None
        self.errors.append(self._unit.error(message))

    def _analyzer(self, trace_id: str) -> TraceAnalyzer:
        analyzer = self.analyzers.get(trace_id)
        if analyzer is None:
            analyzer = self.analyzers[trace_id] = TraceAnalyzer(
                trace_id, self.policy, self.conventions
            )
        return analyzer
