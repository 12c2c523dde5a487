"""Pass one of a replay: decoded OTLP messages into one analyzer per trace.

Most spans are plain (HTTP, database, ...), so each span is classified from
its role attributes alone (:data:`~otel_stall.conventions.ROLE_KEYS`, all that
:meth:`Conventions.role` reads) before anything else is decoded. A plain span
only hands its parent link to its :class:`~otel_stall.offline.analysis.TraceAnalyzer` and
a model span its place in time: neither becomes a :class:`SpanRecord`, and a
plain span's attribute values are never converted (in OTLP/JSON they are
still checked, so bad input is reported exactly as the full decoder reports
it). A tool span becomes its :class:`~otel_stall.core.records.ToolCall` straight
from its parts (:meth:`Conventions.tool_call_from`); agent spans, and anything
unusual, take the full decoder.
"""

from __future__ import annotations

from typing import Any

from google.protobuf.message import DecodeError as ProtoDecodeError
from opentelemetry.proto.trace.v1.trace_pb2 import TracesData

from otel_stall.conventions import Conventions, Role, SpanRecord, is_agent_span_name
from otel_stall.core.errors import InputError
from otel_stall.core.policy import StallPolicy
from otel_stall.offline.analysis import TraceAnalyzer
from otel_stall.offline.readers import Unit
from otel_stall.otlp.decode import (
    DecodeError,
    any_value_to_python,
    attributes_from_proto,
    fast_json_attributes,
    iter_json_scopes,
    json_any_value_to_python,
    proto_id_error,
    proto_ids_fit,
    record_from_proto_span,
    span_from_json,
)
from otel_stall.semconv import GenAIAttributes as GenAI
from otel_stall.semconv import GenAIOperation
from otel_stall.semconv import OpenInferenceAttributes as OpenInference
from otel_stall.semconv import TraceloopAttributes as Traceloop

__all__ = ["Intake"]

TRACE_KEYS = frozenset({"resourceSpans", "resource_spans"})
"""The top-level keys of an OTLP/JSON traces object."""
OTHER_SIGNALS = frozenset({"resourceMetrics", "resourceLogs", "resourceProfiles"})
"""Other signals in the same file are not traces, and not errors either."""
_INVOKE_AGENT = GenAIOperation.INVOKE_AGENT
_OTHER = Role.OTHER
_MODEL = Role.MODEL
_TOOL = Role.TOOL
_PRIORITY = (GenAI.OPERATION_NAME, OpenInference.SPAN_KIND, Traceloop.SPAN_KIND)
"""The role keys most spans that have one carry: looked for first."""


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
        self._interest = conventions.role_keys
        # Tool spans skip the SpanRecord, unless a subclass makes its calls its own way.
        self._tool_call_from = (
            conventions.tool_call_from if conventions.builds_calls_from_parts else None
        )
        # Most likely first: the scan of a message stops at the first key found.
        self._interest_bytes = tuple(
            k.encode() for k in sorted(self._interest or (), key=lambda k: k not in _PRIORITY)
        )

    def _analyzer(self, trace_id: str) -> TraceAnalyzer:
        analyzers = self.analyzers
        analyzer = analyzers.get(trace_id)
        if analyzer is None:
            analyzer = analyzers[trace_id] = TraceAnalyzer(trace_id, self.policy, self.conventions)
        return analyzer

    def _add(self, span: SpanRecord, unit: Unit) -> None:
        """One decoded span into its trace's analyzer (a span without ids is only listed)."""
        trace_id = span.trace_id
        if not trace_id or not span.span_id:
            which = "traceId" if not trace_id else "spanId"
            self.errors.append(
                unit.error(
                    f"span {span.name!r} has an empty {which}: it is kept in the "
                    "output but left out of detection"
                )
            )
            return
        self._analyzer(trace_id).add(span)

    def feed_proto(self, unit: Unit, payload: bytes) -> None:
        """Decode one protobuf message into the analyzers, counting every span entry.

        Plain spans (no role attribute, not named as agent spans) take a fast
        path: their attribute values are never decoded, and only their parent
        link is kept. A model span keeps its place, a tool span becomes its
        :class:`~otel_stall.core.records.ToolCall` directly, and any other span a
        :class:`SpanRecord`.
        """
        try:
            message = TracesData.FromString(payload)
        except (ProtoDecodeError, RuntimeError) as exc:
            self.errors.append(unit.error(f"not an OTLP protobuf traces message ({exc})"))
            return
        interest = self._interest
        role_of = self.conventions.role
        # Protobuf strings are plain UTF-8: a message without any role key's bytes
        # holds only plain spans, and their attributes need not even be listed.
        scan = interest is not None and any(key in payload for key in self._interest_bytes)
        tool_call_from = self._tool_call_from
        count = 0
        get = self.analyzers.get
        # A trace's spans mostly come together: keep the last trace's analyzer at hand.
        last_trace = b""
        analyzer: TraceAnalyzer | None = None
        for r, resource_spans in enumerate(message.resource_spans):
            for s, scope_spans in enumerate(resource_spans.scope_spans):
                spans = scope_spans.spans
                count += len(spans)
                for i, span in enumerate(spans):
                    trace_id = span.trace_id
                    span_id = span.span_id
                    parent = span.parent_span_id
                    if len(trace_id) != 16 or len(span_id) != 8 or (parent and len(parent) != 8):
                        # Empty or wrong-length ids: the full decoder's checks and errors.
                        if proto_ids_fit(span):
                            self._add(record_from_proto_span(span), unit)
                        else:
                            self.errors.append(unit.error(str(proto_id_error(r, s, i))))
                        continue
                    name = span.name
                    attributes = span.attributes
                    if trace_id != last_trace or analyzer is None:
                        trace = trace_id.hex()
                        analyzer = get(trace) or self._analyzer(trace)
                        last_trace = trace_id
                    if interest is not None and (
                        not name.startswith(_INVOKE_AGENT) or not is_agent_span_name(name)
                    ):
                        # Classify from the role attributes alone (all that role() reads):
                        # plain spans and model spans need none of the other values.
                        found: dict[str, Any] | None = None
                        if scan:
                            for kv in attributes:
                                key = kv.key
                                if key in interest:
                                    if found is None:
                                        found = {}
                                    found[key] = any_value_to_python(kv.value)
                        role = _OTHER if found is None else role_of(found)
                        if role is _OTHER:
                            if parent:
                                analyzer.add_link(span_id + parent)
                            else:
                                analyzer.add_plain_root(
                                    span_id.hex(),
                                    span.start_time_unix_nano,
                                    span.end_time_unix_nano,
                                )
                            continue
                        if role is _MODEL:
                            analyzer.add_model(
                                span_id.hex(),
                                parent.hex() if parent else None,
                                span.start_time_unix_nano,
                                span.end_time_unix_nano,
                            )
                            continue
                    else:
                        role = None
                    status = span.status
                    if role is _TOOL and tool_call_from is not None:
                        # No SpanRecord: the call is made from the span's parts.
                        call = tool_call_from(
                            attributes_from_proto(attributes),
                            name,
                            span_id.hex(),
                            span.start_time_unix_nano,
                            span.end_time_unix_nano,
                            status.code,
                        )
                        analyzer.add_tool(call, parent.hex() if parent else None)
                        continue
                    record = SpanRecord(
                        analyzer.trace_id,
                        span_id.hex(),
                        parent.hex() if parent else None,
                        name,
                        span.start_time_unix_nano,
                        span.end_time_unix_nano,
                        attributes_from_proto(attributes),
                        status.code,
                        status.message,
                    )
                    analyzer.add(record, role)
        self.spans += count

    def feed_json(self, unit: Unit) -> None:
        """Decode one OTLP/JSON object into the analyzers, counting every span entry.

        Plain spans take a fast path, as in :meth:`_feed_proto`, but their
        attribute values are still checked, so a bad one is reported exactly as
        the full decoder reports it. Anything unusual goes to the full decoder.
        """
        errors = self.errors
        obj = unit.json
        if isinstance(obj, dict) and obj and not (TRACE_KEYS & obj.keys()):
            if not (OTHER_SIGNALS & obj.keys()):
                errors.append(unit.error("not an OTLP/JSON traces object (no resourceSpans)"))
            return
        interest = self._interest
        role_of = self.conventions.role
        tool_call_from = self._tool_call_from
        fromhex = bytes.fromhex
        # A trace's spans mostly come together: the last trace id taken (as written) and
        # its analyzer save checking, lower-casing and looking up the same id again.
        last_trace: Any = None
        last_analyzer: TraceAnalyzer | None = None
        count = 0
        try:
            for where_s, spans in iter_json_scopes(obj):
                for i, span in enumerate(spans):
                    count += 1
                    # The fast path accepts only what span_from_json's own fast path
                    # accepts (well-formed camelCase spans), and any surprise sends the
                    # span to the full decoder, which names the bad field.
                    decoded: dict[str, Any] | None = None
                    role: Role | None = None
                    taken = False
                    try:
                        trace_id = span["traceId"]
                        span_id = span["spanId"]
                        parent = span.get("parentSpanId") or None
                        if (
                            len(trace_id) == 32
                            and len(span_id) == 16
                            and (parent is None or len(parent) == 16)
                        ):
                            analyzer = last_analyzer if trace_id == last_trace else None
                            if analyzer is None:
                                fromhex(trace_id)
                            link = fromhex(span_id + parent) if parent else fromhex(span_id)
                            name = span.get("name", "")
                            status = span.get("status")
                            if status:
                                code = status.get("code", 0)
                                message = status.get("message") or ""
                            else:
                                code, message = 0, ""
                            if type(code) is int and type(name) is str and type(message) is str:
                                start_ns = int(span["startTimeUnixNano"])
                                end_ns = int(span["endTimeUnixNano"])
                                attributes = span.get("attributes")
                                if interest is not None and (
                                    not name.startswith(_INVOKE_AGENT)
                                    or not is_agent_span_name(name)
                                ):
                                    decoded = (
                                        _json_role_scan(attributes, interest)
                                        if attributes
                                        else None
                                    )
                                    role = _OTHER if decoded is None else role_of(decoded)
                                elif attributes:
                                    decoded = fast_json_attributes(attributes)
                                taken = True
                    except (
                        KeyError,
                        TypeError,
                        ValueError,
                        AttributeError,
                        DecodeError,
                        RecursionError,
                    ):
                        taken = False
                    if taken:
                        # Every check passed: nothing below can raise on bad input.
                        if analyzer is None:
                            trace = trace_id.lower()
                            analyzer = self._analyzer(trace)
                            last_trace, last_analyzer = trace_id, analyzer
                        if role is _OTHER:
                            if parent:
                                analyzer.add_link(link)
                            else:
                                analyzer.add_plain_root(span_id.lower(), start_ns, end_ns)
                        elif role is _MODEL:
                            analyzer.add_model(
                                span_id.lower(),
                                parent.lower() if parent else None,
                                start_ns,
                                end_ns,
                            )
                        elif role is _TOOL and tool_call_from is not None:
                            # No SpanRecord: the call is made from the span's parts.
                            call = tool_call_from(
                                decoded or {}, name, span_id.lower(), start_ns, end_ns, code
                            )
                            analyzer.add_tool(call, parent.lower() if parent else None)
                        else:  # agent spans, and spans whose role the analyzer works out
                            record = SpanRecord(
                                trace_id.lower(),
                                span_id.lower(),
                                parent.lower() if parent else None,
                                name,
                                start_ns,
                                end_ns,
                                decoded or {},
                                code,
                                message,
                            )
                            analyzer.add(record, role)
                        continue
                    try:
                        record = span_from_json(span)
                    except DecodeError as exc:
                        where = f"{where_s}.spans[{i}]"
                        where = f"{where}.{exc.where}" if exc.where else where
                        errors.append(unit.error(str(DecodeError(where, exc.reason))))
                        continue
                    except RecursionError:
                        where = f"{where_s}.spans[{i}]"
                        reason = "attribute values nested too deeply"
                        errors.append(unit.error(str(DecodeError(where, reason))))
                        continue
                    self._add(record, unit)
        except DecodeError as exc:
            errors.append(unit.error(str(exc)))
        except RecursionError:
            errors.append(unit.error("nested too deeply to decode"))
        finally:
            self.spans += count


def _json_role_scan(attributes: Any, interest: frozenset[str]) -> dict[str, Any] | None:
    """Every attribute of a span that has a role attribute, decoded; ``None`` if it has none.

    A span without role attributes is plain: its values are only checked, so
    that bad input is rejected where the full decoder would reject it (this
    raises then, and the caller falls back to it). At the first role key,
    the whole list is decoded instead: most such spans are tool spans, which
    need every value, and the role is read from the decoded attributes.
    """
    for kv in attributes:
        key = kv["key"]
        value = kv["value"]
        if key in interest:
            return fast_json_attributes(attributes)
        if type(key) is not str:
            raise TypeError(key)
        text = value.get("stringValue")
        if type(text) is not str:
            number = value.get("intValue")
            if type(number) is str and len(value) == 1:
                int(number)  # what the full decoder does with an int64 string
            elif type(number) is not int or len(value) != 1:
                json_any_value_to_python(value)
    return None
