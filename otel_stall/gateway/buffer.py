"""Per-trace buffering, as the collector's tail sampler does it.

Spans of one trace arrive in several batches and in any order (a tool span
usually before its agent span). A trace is held until its root span arrives
(the run is over) or ``decision_wait`` has passed since its first span, then
it is handed out whole for detection.

Everything is bounded: traces, spans and encoded bytes. A span that does not
fit, or that belongs to a trace already decided (it came too late), is handed
back at once to be forwarded un-enriched: never dropped, always counted. The
lock guards only the dictionaries; detection and forwarding happen outside it.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Held", "Intake", "TraceBuffer"]


@dataclass(slots=True)
class Held:
    """One span waiting for its trace: the protobuf span and where it came from."""

    span: Any
    """``opentelemetry.proto.trace.v1.Span``, enriched in place later."""
    resource_spans: Any
    """The ``ResourceSpans`` it arrived in (its resource and schema URL go out with it)."""
    scope_spans: Any
    """The ``ScopeSpans`` it arrived in."""
    size: int = 0


@dataclass(slots=True)
class _Trace:
    first_seen: float
    spans: list[Held] = field(default_factory=list)
    size: int = 0


@dataclass(slots=True)
class Intake:
    """What one :meth:`TraceBuffer.add` call decided."""

    ready: list[tuple[bytes, list[Held]]] = field(default_factory=list)
    """Traces whose root span arrived: detect now."""
    overflow: list[Held] = field(default_factory=list)
    """Spans that did not fit: forward un-enriched (``buffer_full``)."""
    late: list[Held] = field(default_factory=list)
    """Spans of traces already decided: forward un-enriched (``late``)."""


class TraceBuffer:
    """Traces in flight, bounded by count, spans and bytes."""

    def __init__(
        self,
        *,
        decision_wait: float,
        max_traces: int,
        max_spans: int,
        max_bytes: int,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.decision_wait = decision_wait
        self.max_traces = max_traces
        self.max_spans = max_spans
        self.max_bytes = max_bytes
        self._clock = clock
        self._lock = threading.Lock()
        self._traces: OrderedDict[bytes, _Trace] = OrderedDict()
        self._decided: OrderedDict[bytes, None] = OrderedDict()
        self._decided_max = max(4 * max_traces, 10_000)
        self._spans = 0
        self._bytes = 0

    @property
    def spans(self) -> int:
        """Spans held now."""
        return self._spans

    @property
    def traces(self) -> int:
        """Traces held now."""
        return len(self._traces)

    @property
    def size(self) -> int:
        """Encoded bytes held now."""
        return self._bytes

    def add(self, groups: dict[bytes, tuple[list[Held], bool]]) -> Intake:
        """Take spans grouped by trace id, each group with "its root span is here"."""
        out = Intake()
        now = self._clock()
        with self._lock:
            traces = self._traces
            for trace_id, (spans, has_root) in groups.items():
                if trace_id in self._decided:
                    out.late.extend(spans)
                    continue
                trace = traces.get(trace_id)
                size = sum(h.size for h in spans)
                fits = (
                    self._spans + len(spans) <= self.max_spans
                    and self._bytes + size <= self.max_bytes
                    and (trace is not None or len(traces) < self.max_traces)
                )
                if not fits:
                    out.overflow.extend(spans)
                    continue
                if trace is None:
                    trace = traces[trace_id] = _Trace(now)
                trace.spans.extend(spans)
                trace.size += size
                self._spans += len(spans)
                self._bytes += size
                if has_root:
                    out.ready.append((trace_id, self._pop(trace_id)))
        return out

    def expired(self, *, everything: bool = False) -> list[tuple[bytes, list[Held]]]:
        """Traces held for ``decision_wait`` or longer (all of them on shutdown)."""
        deadline = self._clock() - self.decision_wait
        out: list[tuple[bytes, list[Held]]] = []
        with self._lock:
            # Insertion order is arrival order of each trace's first span.
            while self._traces:
                trace_id, trace = next(iter(self._traces.items()))
                if not everything and trace.first_seen > deadline:
                    break
                out.append((trace_id, self._pop(trace_id)))
        return out

    def _pop(self, trace_id: bytes) -> list[Held]:
        """Remove a trace and remember it was decided (caller holds the lock)."""
        trace = self._traces.pop(trace_id)
        self._spans -= len(trace.spans)
        self._bytes -= trace.size
        decided = self._decided
        decided[trace_id] = None
        if len(decided) > self._decided_max:
            decided.popitem(last=False)
        return trace.spans
