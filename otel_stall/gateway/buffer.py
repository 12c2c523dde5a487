"""Per-trace buffering, as the collector's tail sampler does it, bounded in bytes.

Spans of one trace arrive in several batches and in any order (a tool span
usually before its agent span). A trace is held until its root span arrives
(the run is over) or ``decision_wait`` has passed since its first span, then
it is handed out whole for detection.

Only what detection may need is held, and only as bytes: a tool or agent
span keeps its own encoding and a shared envelope (:class:`~otel_stall.gateway.wire.Held`),
a model span its place in time, a plain span a 16-byte parent link. Plain
and model spans are forwarded at once: nothing is ever added to them.

Everything is bounded: traces, entries and bytes (each entry counts its
encoding plus a fixed allowance for the objects that hold it). A group that
does not fit, or that belongs to a trace already decided (it came too late),
is handed back to be forwarded un-enriched: never dropped, always counted.
The lock guards only the dictionaries; detection and forwarding happen
outside it.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Final

from otel_stall.gateway.wire import Envelope

__all__ = [
    "ENTRY_BYTES",
    "LINK_BYTES",
    "TRACE_BYTES",
    "Entry",
    "Group",
    "Held",
    "Intake",
    "Ready",
    "TraceBuffer",
]

ENTRY_BYTES: Final = 200
"""Allowance per entry for its object, its ids and its list slot (measured: about 170)."""
LINK_BYTES: Final = 16
"""A plain span's parent link: its span id and its parent's, raw."""
TRACE_BYTES: Final = 600
"""Allowance per held trace: its record, dictionary slot and link array (measured: about 500)."""

TOOL: Final = 1
"""Entry kinds, as :meth:`Conventions.role` names them; ``FULL``: only the full decoder can tell."""
MODEL: Final = 2
AGENT: Final = 3
ROOT: Final = 4
"""A plain span without a parent: it may carry a trace-level run's attributes."""
FULL: Final = 5


@dataclass(frozen=True, slots=True)
class Held:
    """A span kept past the request it came in: its own encoding and its envelope."""

    data: bytes
    envelope: Envelope


@dataclass(slots=True)
class Entry:
    """One span detection reads, in arrival order: a tool, model, agent, root or other span."""

    kind: int
    span_id: bytes
    parent: bytes
    start_ns: int
    end_ns: int
    source: Any = None
    """The span itself while its request is being handled, a :class:`Held` once it is kept."""
    marked: bool = True
    """Its bytes may hold ``stall.*`` (enriched upstream): enrichment must look before adding."""
    scope: Any = None
    """The ``ScopeSpans`` holding the span while it is in its request (to re-encode if enriched)."""
    outcome: Any = None
    """A model span's reading (its call: outcome, usage, output hashes), taken as it went on."""


@dataclass(slots=True)
class Group:
    """One request's spans of one trace."""

    entries: list[Entry] = field(default_factory=list)
    links: bytearray = field(default_factory=bytearray)
    spans: int = 0
    """Spans of the trace in the request, forwarded at once or not."""
    held: int = 0
    """Of those, spans that are kept (cut out of the request) if the group is stored."""
    has_root: bool = False
    size: int = 0
    """Bytes the group takes once held (see :data:`ENTRY_BYTES`)."""
    cuts: list[tuple[Any, Any, int]] = field(default_factory=list)
    """Where its held spans sit: ``(resource_spans, scope_spans, index)``, to cut them out."""


@dataclass(slots=True)
class _Trace:
    first_seen: float
    entries: list[Entry] = field(default_factory=list)
    links: bytearray = field(default_factory=bytearray)
    spans: int = 0
    size: int = TRACE_BYTES


@dataclass(slots=True)
class Ready:
    """A decided trace: everything held for it, plus the group that completed it."""

    trace_id: bytes
    entries: list[Entry]
    links: bytearray

    @property
    def held(self) -> int:
        """Spans kept for it that are still to be forwarded (the others went on at once)."""
        return sum(1 for e in self.entries if isinstance(e.source, Held))


@dataclass(slots=True)
class Intake:
    """What one :meth:`TraceBuffer.add` call decided, group by group."""

    ready: list[Ready] = field(default_factory=list)
    """Traces whose root span arrived: detect now."""
    stored: list[Group] = field(default_factory=list)
    """Groups now held: cut their held spans out of the request."""
    overflow: list[Group] = field(default_factory=list)
    """Groups that did not fit: forward un-enriched (``buffer_full``)."""
    late: list[Group] = field(default_factory=list)
    """Groups of traces already decided: forward un-enriched (``late``)."""


class TraceBuffer:
    """Traces in flight, bounded by count, entries and bytes."""

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
        """Spans held now (links and places included)."""
        return self._spans

    @property
    def traces(self) -> int:
        """Traces held now."""
        return len(self._traces)

    @property
    def size(self) -> int:
        """Bytes held now, allowances included."""
        return self._bytes

    def add(self, groups: dict[bytes, Group]) -> Intake:
        """Take one request's groups, by trace id."""
        out = Intake()
        now = self._clock()
        with self._lock:
            for trace_id, group in groups.items():
                self._add(trace_id, group, now, out)
        return out

    def _add(self, trace_id: bytes, group: Group, now: float, out: Intake) -> None:
        if trace_id in self._decided:
            out.late.append(group)
            return
        trace = self._traces.get(trace_id)
        if group.has_root:
            # Decided now: nothing of this group is held, so it always fits.
            if trace is None:
                self._remember(trace_id)
                out.ready.append(Ready(trace_id, group.entries, group.links))
                return
            ready = self._ready(trace_id)
            ready.entries.extend(group.entries)
            ready.links += group.links
            out.ready.append(ready)
            return
        size = group.size + (TRACE_BYTES if trace is None else 0)
        kept = len(group.entries) + len(group.links) // LINK_BYTES
        fits = (
            self._spans + kept <= self.max_spans
            and self._bytes + size <= self.max_bytes
            and (trace is not None or len(self._traces) < self.max_traces)
        )
        if not fits:
            out.overflow.append(group)
            return
        if trace is None:
            trace = self._traces[trace_id] = _Trace(now)
            self._bytes += TRACE_BYTES
        trace.entries.extend(group.entries)
        trace.links += group.links
        trace.spans += kept
        trace.size += group.size
        self._spans += kept
        self._bytes += group.size
        out.stored.append(group)

    def _ready(self, trace_id: bytes) -> Ready:
        """Remove a trace, remember it was decided (caller holds the lock)."""
        trace = self._traces.pop(trace_id)
        self._spans -= trace.spans
        self._bytes -= trace.size
        self._remember(trace_id)
        return Ready(trace_id, trace.entries, trace.links)

    def _remember(self, trace_id: bytes) -> None:
        decided = self._decided
        decided[trace_id] = None
        if len(decided) > self._decided_max:
            decided.popitem(last=False)

    def expired(self, *, everything: bool = False) -> list[Ready]:
        """Traces held for ``decision_wait`` or longer (all of them on shutdown)."""
        deadline = self._clock() - self.decision_wait
        out: list[Ready] = []
        with self._lock:
            # Insertion order is arrival order of each trace's first span.
            while self._traces:
                trace_id, trace = next(iter(self._traces.items()))
                if not everything and trace.first_seen > deadline:
                    break
                out.append(self._ready(trace_id))
        return out
