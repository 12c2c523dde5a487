"""Offline replay: stored spans through the same conventions and detector as the live processor.

Pass one streams every input, message by message, into one
:class:`~otel_stall.trace.TraceAnalyzer` per trace. Analyzers keep digests and
parent links, never payloads or SDK span objects, so memory follows the
number of tool calls, not the number of bytes. Traces may be interleaved and
their spans may come in any order: nothing is decided until the input ends.

Most spans are plain (HTTP, database, ...), so pass one classifies each span
from its role attributes alone (:data:`~otel_stall.conventions.ROLE_KEYS`,
all that :meth:`Conventions.role` reads) before decoding anything else. A
plain span only hands its parent link to the analyzer and a model span its
place in time: neither becomes a :class:`SpanRecord`, and a plain span's
attribute values are never converted (in OTLP/JSON they are still checked, so
bad input is reported exactly as the full decoder reports it). A tool span
becomes its :class:`~otel_stall.records.ToolCall` straight from its parts
(:meth:`Conventions.tool_call_from`); agent spans, and anything unusual, take
the full decoder.

Pass two (only for ``--out`` and ``--export-otlp``) reads the input again and
adds each span's ``stall.*`` attributes and ``stall.detected`` events, so every
span that came in goes out, enriched exactly as the live processor would have
enriched it. Standard input is spooled to a temporary file first, since it
cannot be read twice.
"""

from __future__ import annotations

import contextlib
import gc
import os
import shutil
import sys
import tempfile
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import IO, Any

import orjson
from google.protobuf.message import DecodeError as ProtoDecodeError
from opentelemetry.proto.trace.v1.trace_pb2 import TracesData

from otel_stall.attributes import GenAIAttributes as GenAI
from otel_stall.attributes import GenAIOperation
from otel_stall.attributes import OpenInferenceAttributes as OpenInference
from otel_stall.attributes import TraceloopAttributes as Traceloop
from otel_stall.conventions import ROLE_KEYS, Conventions, Role, SpanRecord, is_agent_span_name
from otel_stall.detector import detect
from otel_stall.errors import InputError
from otel_stall.otlp.decode import (
    DecodeError,
    any_value_to_python,
    attributes_from_proto,
    fast_json_attributes,
    hex_id,
    iter_json_scopes,
    iter_json_spans,
    json_any_value_to_python,
    proto_id_error,
    proto_ids_fit,
    record_from_proto_span,
    span_from_json,
)
from otel_stall.otlp.encode import (
    enrich_json_span,
    enrich_proto_span,
    proto_to_json,
    redact_json_span,
    traces_from_json,
)
from otel_stall.otlp.read import STDIN, Unit, expand_paths, open_input, read_units
from otel_stall.otlp.send import OtlpSender
from otel_stall.policy import StallPolicy
from otel_stall.records import RunReport, Verdict
from otel_stall.trace import TraceAnalyzer, TraceResult

__all__ = ["ReplayResult", "Replayer", "replay"]

STDIN_LABEL = "<stdin>"
_TRACE_KEYS = frozenset({"resourceSpans", "resource_spans"})
_INVOKE_AGENT = GenAIOperation.INVOKE_AGENT
_OTHER = Role.OTHER
_MODEL = Role.MODEL
_TOOL = Role.TOOL
_PRIORITY = (GenAI.OPERATION_NAME, OpenInference.SPAN_KIND, Traceloop.SPAN_KIND)
"""The role keys most spans that have one carry: looked for first."""
_OTHER_SIGNALS = frozenset({"resourceMetrics", "resourceLogs", "resourceProfiles"})
"""Other signals in the same file are not traces, and not errors either."""
Progress = Callable[[int], None]


@dataclass(slots=True)
class ReplayResult:
    """Runs found, input problems, and the counts a summary needs."""

    reports: list[RunReport] = field(default_factory=list)
    errors: list[InputError] = field(default_factory=list)
    files: int = 0
    spans: int = 0
    """Every span entry seen, including ones that could not be decoded."""
    traces: dict[str, TraceResult] = field(default_factory=dict)
    """Per-trace results, used to enrich spans in the second pass (kept only when asked)."""
    trace_count: int = 0
    formats: dict[str, str] = field(default_factory=dict)
    """The format detected for each input."""
    tool_call_events: int = 0
    """Events read from files in the reference's JSONL tool-call format."""
    written: int | None = None
    """Spans written by ``--out`` (None when not asked)."""
    exported: int | None = None
    """Spans accepted by the ``--export-otlp`` endpoint (None when not asked)."""

    @property
    def verdicts(self) -> dict[str, int]:
        """Run count per verdict, every verdict listed."""
        counts = Counter(r.verdict.value for r in self.reports)
        return {v.value: counts.get(v.value, 0) for v in Verdict}

    @property
    def worst(self) -> Verdict:
        """The most severe verdict of any run (``ok`` without runs)."""
        return max((r.verdict for r in self.reports), key=lambda v: v.severity, default=Verdict.OK)

    def summary(self) -> dict[str, Any]:
        """The ``summary`` object of the JSON report."""
        out: dict[str, Any] = {
            "files": self.files,
            "spans": self.spans,
            "traces": self.trace_count,
            "runs": len(self.reports),
            "verdicts": self.verdicts,
        }
        if self.tool_call_events:
            out["tool_call_events"] = self.tool_call_events
        if self.written is not None:
            out["written"] = self.written
        if self.exported is not None:
            out["exported"] = self.exported
        return out


def _label(path: str) -> str:
    return STDIN_LABEL if path == STDIN else path


class Replayer:
    """Runs the replay's passes with one policy and one set of conventions."""

    def __init__(
        self,
        policy: StallPolicy | None = None,
        conventions: Conventions | None = None,
        *,
        progress: Progress | None = None,
        pause_gc: bool = False,
    ) -> None:
        self.policy = policy or StallPolicy()
        self.conventions = conventions or Conventions()
        self.progress = progress
        self.pause_gc = pause_gc
        """Pause the cyclic garbage collector during :meth:`analyse` (process-wide).

        10-20% faster on big inputs. Off by default: a library must not change
        the collector under its host application; the CLI, which owns its
        process, turns it on.
        """
        self._interest = _role_keys(self.conventions)
        # Tool spans skip the SpanRecord, unless a subclass makes its calls its own way.
        self._tool_call_from = (
            self.conventions.tool_call_from
            if type(self.conventions).tool_call is Conventions.tool_call
            else None
        )
        # Most likely first: the scan of a message stops at the first key found.
        self._interest_bytes = tuple(
            k.encode() for k in sorted(self._interest or (), key=lambda k: k not in _PRIORITY)
        )

    # -- pass one ------------------------------------------------------------------

    def analyse(
        self,
        paths: Sequence[str],
        *,
        labels: dict[str, str] | None = None,
        keep_enrichment: bool = True,
    ) -> ReplayResult:
        """Read every input once and detect; bad input is listed, never raised.

        ``keep_enrichment=False`` drops the per-span ``stall.*`` attributes once
        the reports are built: a report-only replay needs less memory.
        """
        if not self.pause_gc:
            return self._analyse(paths, labels, keep_enrichment)
        with _cyclic_gc_paused():
            return self._analyse(paths, labels, keep_enrichment)

    def _analyse(
        self, paths: Sequence[str], labels: dict[str, str] | None, keep_enrichment: bool
    ) -> ReplayResult:
        result = ReplayResult()
        errors = result.errors
        analyzers: dict[str, TraceAnalyzer] = {}
        policy = self.policy
        for path in expand_paths(paths, errors):
            label = (labels or {}).get(path, _label(path))
            result.files += 1
            for unit in self._units(path, label, errors):
                result.formats.setdefault(label, unit.format)
                if unit.events is not None:
                    loaded = unit.events
                    errors.extend(loaded.errors)
                    result.tool_call_events += len(loaded.events)
                    for report in detect(loaded.events, policy):
                        report.attributes.update(
                            trace_id=None, run_span_id=None, agent=str(report.run_key)
                        )
                        result.reports.append(report)
                    continue
                if unit.proto is not None:
                    self._feed_proto(unit, unit.proto, result, analyzers)
                else:
                    self._feed_json(unit, result, analyzers)
        result.trace_count = len(analyzers)
        for trace_id in list(analyzers):
            analysis = analyzers.pop(trace_id).analyse(enrich=keep_enrichment)
            if keep_enrichment:
                result.traces[trace_id] = analysis
            result.reports.extend(analysis.reports)
        return result

    def _units(self, path: str, label: str, errors: list[InputError]) -> Iterator[Unit]:
        try:
            stream = open_input(path, self.progress)
        except OSError as exc:
            errors.append(InputError(label, None, None, f"cannot read: {exc.strerror or exc}"))
            return
        try:
            yield from read_units(label, stream, errors)
        finally:
            if path != STDIN:
                stream.close()

    def _analyzer(self, analyzers: dict[str, TraceAnalyzer], trace_id: str) -> TraceAnalyzer:
        analyzer = analyzers.get(trace_id)
        if analyzer is None:
            analyzer = analyzers[trace_id] = TraceAnalyzer(trace_id, self.policy, self.conventions)
        return analyzer

    def _add(
        self,
        span: SpanRecord,
        unit: Unit,
        result: ReplayResult,
        analyzers: dict[str, TraceAnalyzer],
    ) -> None:
        """One decoded span into its trace's analyzer (a span without ids is only listed)."""
        trace_id = span.trace_id
        if not trace_id or not span.span_id:
            which = "traceId" if not trace_id else "spanId"
            result.errors.append(
                unit.error(
                    f"span {span.name!r} has an empty {which}: it is kept in the "
                    "output but left out of detection"
                )
            )
            return
        analyzer = analyzers.get(trace_id)
        if analyzer is None:
            analyzer = analyzers[trace_id] = TraceAnalyzer(trace_id, self.policy, self.conventions)
        analyzer.add(span)

    def _feed_proto(
        self,
        unit: Unit,
        payload: bytes,
        result: ReplayResult,
        analyzers: dict[str, TraceAnalyzer],
    ) -> None:
        """Decode one protobuf message into the analyzers, counting every span entry.

        Plain spans (no role attribute, not named as agent spans) take a fast
        path: their attribute values are never decoded, and only their parent
        link is kept. A model span keeps its place, a tool span becomes its
        :class:`~otel_stall.records.ToolCall` directly, and any other span a
        :class:`SpanRecord`.
        """
        try:
            message = TracesData.FromString(payload)
        except (ProtoDecodeError, RuntimeError) as exc:
            result.errors.append(unit.error(f"not an OTLP protobuf traces message ({exc})"))
            return
        interest = self._interest
        role_of = self.conventions.role
        # Protobuf strings are plain UTF-8: a message without any role key's bytes
        # holds only plain spans, and their attributes need not even be listed.
        scan = interest is not None and any(key in payload for key in self._interest_bytes)
        tool_call_from = self._tool_call_from
        count = 0
        get = analyzers.get
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
                            self._add(record_from_proto_span(span), unit, result, analyzers)
                        else:
                            result.errors.append(unit.error(str(proto_id_error(r, s, i))))
                        continue
                    name = span.name
                    attributes = span.attributes
                    if trace_id != last_trace or analyzer is None:
                        trace = trace_id.hex()
                        analyzer = get(trace) or self._analyzer(analyzers, trace)
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
        result.spans += count

    def _feed_json(
        self, unit: Unit, result: ReplayResult, analyzers: dict[str, TraceAnalyzer]
    ) -> None:
        """Decode one OTLP/JSON object into the analyzers, counting every span entry.

        Plain spans take a fast path, as in :meth:`_feed_proto`, but their
        attribute values are still checked, so a bad one is reported exactly as
        the full decoder reports it. Anything unusual goes to the full decoder.
        """
        errors = result.errors
        obj = unit.json
        if isinstance(obj, dict) and obj and not (_TRACE_KEYS & obj.keys()):
            if not (_OTHER_SIGNALS & obj.keys()):
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
                            analyzer = analyzers.get(trace) or self._analyzer(analyzers, trace)
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
                    self._add(record, unit, result, analyzers)
        except DecodeError as exc:
            errors.append(unit.error(str(exc)))
        except RecursionError:
            errors.append(unit.error("nested too deeply to decode"))
        finally:
            result.spans += count

    # -- pass two ------------------------------------------------------------------

    def _lookup(
        self, result: ReplayResult, trace_id: str, span_id: str
    ) -> tuple[dict[str, Any], list[Any]]:
        trace = result.traces.get(trace_id)
        if trace is None:
            return {}, []
        return trace.attributes.get(span_id, {}), trace.events.get(span_id, [])

    def enriched(
        self,
        result: ReplayResult,
        paths: Sequence[str],
        *,
        redact: bool = False,
        labels: dict[str, str] | None = None,
    ) -> Iterator[tuple[Unit, Any]]:
        """Yield ``(unit, enriched message)`` for the second pass.

        JSON units are enriched in place as dicts (so nothing the decoder
        skipped is lost); protobuf units as ``TracesData``. Errors were
        already reported by the first pass, so they go to a scratch list.
        """
        scratch: list[InputError] = []
        for path in expand_paths(paths, scratch):
            label = (labels or {}).get(path, _label(path))
            for unit in self._units(path, label, scratch):
                if unit.proto is not None:
                    try:
                        message = TracesData.FromString(unit.proto)
                    except (ProtoDecodeError, RuntimeError):
                        continue
                    for rs in message.resource_spans:
                        for ss in rs.scope_spans:
                            for span in ss.spans:
                                attrs, events = self._lookup(
                                    result, span.trace_id.hex(), span.span_id.hex()
                                )
                                if attrs or events or redact:
                                    enrich_proto_span(span, attrs, events, redact=redact)
                    yield unit, message
                elif isinstance(unit.json, dict):
                    try:
                        raw_spans = [span for _, span in iter_json_spans(unit.json)]
                    except DecodeError:
                        continue
                    for span in raw_spans:
                        if isinstance(span, dict):
                            self._enrich_json(result, span, redact)
                    yield unit, unit.json

    def _enrich_json(self, result: ReplayResult, span: dict[str, Any], redact: bool) -> None:
        ids = []
        for camel, snake, size in (("traceId", "trace_id", 16), ("spanId", "span_id", 8)):
            key = camel if camel in span else snake
            try:
                value = hex_id(span.get(key), size, camel)
            except DecodeError:
                return
            if key in span:
                span[key] = value
            ids.append(value)
        parent_key = "parentSpanId" if "parentSpanId" in span else "parent_span_id"
        if isinstance(span.get(parent_key), str):
            span[parent_key] = span[parent_key].lower()
        attrs, events = self._lookup(result, ids[0], ids[1])
        if attrs or events:
            enrich_json_span(span, attrs, events, redact=redact)
        elif redact:
            redact_json_span(span)

    def write_json_lines(
        self,
        result: ReplayResult,
        paths: Sequence[str],
        out: IO[bytes],
        *,
        redact: bool = False,
        labels: dict[str, str] | None = None,
    ) -> int:
        """Write every span, enriched, as OTLP/JSON lines; returns the spans written."""
        written = 0
        for unit, message in self.enriched(result, paths, redact=redact, labels=labels):
            obj = proto_to_json(message) if unit.proto is not None else message
            written += _count_spans(obj)
            out.write(orjson.dumps(obj))
            out.write(b"\n")
        result.written = written
        return written

    def export(
        self,
        result: ReplayResult,
        paths: Sequence[str],
        url: str,
        *,
        redact: bool = False,
        labels: dict[str, str] | None = None,
    ) -> OtlpSender:
        """Send every span, enriched, to an OTLP endpoint; returns the sender's tallies."""
        sender = OtlpSender(url)
        try:
            for unit, message in self.enriched(result, paths, redact=redact, labels=labels):
                # JSON is already enriched (and redacted) as a dict; spans that
                # cannot be converted were reported by the first pass.
                data = message if unit.proto is not None else traces_from_json(message, _ignore)
                sender.add(data)
        finally:
            sender.close()
        result.exported = sender.sent
        return sender


@contextlib.contextmanager
def _cyclic_gc_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector while a replay builds its records.

    A replay keeps hundreds of thousands of small records alive until the
    input ends, and parses as many short-lived dicts. None of them form
    reference cycles, yet every collection of the oldest generation walks all
    of them again: 10-20% of a replay's time. Reference counting frees memory
    as usual meanwhile; the collector is switched back on (if it was on) at the
    end, even on error, and never switched on by us if someone else had it off.
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _role_keys(conventions: Conventions) -> frozenset[str] | None:
    """Every attribute that can make a span more than plain; ``None``: no fast path.

    A span holding none of them is :attr:`Role.OTHER` to :meth:`Conventions.role`
    (see :data:`ROLE_KEYS`), unless a subclass classifies spans its own way.
    """
    if type(conventions).role is not Conventions.role:
        return None
    return ROLE_KEYS | {c.role_key for c in conventions.custom}


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


def _ignore(error: DecodeError) -> None:
    """Errors of the second pass were already reported by the first."""


def _count_spans(obj: Any) -> int:
    try:
        return sum(1 for _ in iter_json_spans(obj))
    except DecodeError:
        return 0


@contextlib.contextmanager
def spooled_stdin(paths: Sequence[str]) -> Iterator[tuple[list[str], dict[str, str]]]:
    """Replace ``-`` by a temporary copy of stdin, so the input can be read twice."""
    if STDIN not in paths:
        yield list(paths), {}
        return
    with tempfile.NamedTemporaryFile(prefix="otel-stall-stdin-", delete=False) as tmp:
        shutil.copyfileobj(sys.stdin.buffer, tmp, 1 << 20)
    try:
        yield [tmp.name if p == STDIN else p for p in paths], {tmp.name: STDIN_LABEL}
    finally:
        os.unlink(tmp.name)


def replay(
    paths: Sequence[str] | str,
    policy: StallPolicy | None = None,
    conventions: Conventions | None = None,
) -> ReplayResult:
    """Analyse stored spans (files, directories or ``-``) and return runs and errors."""
    if isinstance(paths, str):
        paths = [paths]
    return Replayer(policy, conventions).analyse(paths)
