"""The run model's records: a run's state, a tracked span's ancestry, their sizes.

:class:`~otel_stall.core.runs.RunTable` holds these and decides with them; they
live here so the table's module stays the place where decisions are read.
"""

from __future__ import annotations

import enum
import threading
import weakref
from collections import deque
from collections.abc import Callable, Hashable
from typing import Any, Final

from otel_stall.core.detector import RunDetector
from otel_stall.core.records import Finding, RunReport, Status, session_run_key


class Role(enum.IntEnum):
    """What a span is to the run model and the detector."""

    OTHER = 0
    TOOL = 1
    MODEL = 2
    AGENT = 3


SpanId = Hashable
"""A span's or trace's id as its driver spells it: an int live, hex text offline."""
KeyOf = Callable[[Any, Any], tuple[str | None, ...]]
"""Makes a run's key (trace id, run span id) in the detector's spelling: hex text."""


def hex_run_key(trace_id: Any, span_id: Any) -> tuple[str | None, ...]:
    """The run key of int ids (live): the same hex text the batch analysis uses."""
    return (format(trace_id, "032x"), None if span_id is None else format(span_id, "016x"))


def text_run_key(trace_id: Any, span_id: Any) -> tuple[str | None, ...]:
    """The run key of ids that are hex text already (replay, gateway)."""
    return (trace_id, span_id)


TOUCH: Final = 1.0
"""Seconds within which a run is not moved in the LRU order again (saves a lock)."""
ENDED_ROOTS: Final = 4096
"""How many ended trace roots (and agent spans) are remembered, so late spans do not reopen
their trace (or open a trace run in place of their agent's)."""
PENDING_FINDINGS: Final = 128
"""Findings a run keeps for its span's copy when they could not go on the open span."""
RUN_BYTES: Final = 4096
"""Estimated bytes of a registered run with one call: its ``Run``, detector, first row and
signatures (measured with ``tracemalloc``: about 3.7 KB)."""
CALL_BYTES: Final = 512
"""Estimated bytes each further call adds to its run until the run's bounds hold it
(measured: about 0.5 KB a new call while its rows and remembered calls grow)."""
SPAN_BYTES: Final = 512
"""Estimated bytes of one tracked span or trace root entry: an agent span's (its nodes and
unused ``Run``) is about 0.55 KB, a tool span's about 0.25 KB, a plain span's less."""


class Run:
    """One run's live state: its detector, its run span and bookkeeping."""

    __slots__ = (
        "_span",
        "calls",
        "charged",
        "charged_calls",
        "closed",
        "context",
        "detector",
        "evicted",
        "handed",
        "key",
        "last",
        "lock",
        "owner",
        "pending",
        "pending_dropped",
        "receivers",
        "registered",
        "report",
        "run_key",
        "session",
        "span_id",
        "trace_id",
    )

    def __init__(
        self,
        trace_id: SpanId,
        span_id: SpanId | None,
        span: Any = None,
        context: Any = None,
        session: str | None = None,
        run_key: tuple[str | None, ...] | None = None,
    ) -> None:
        self.trace_id = trace_id
        """The run's trace; a session run's: the trace of its first call (for exemplars)."""
        self.span_id = span_id
        """The agent span's id, or ``None`` when the trace (or a session) is the run."""
        self.session = session
        """The session a session run is (no span spans it: it ends idle, by bound or
        :meth:`RunTable.end_session`); ``None`` for a span's run."""
        self.owner: Run | None = None
        """On a run a handoff gave to another agent: the run it was handed from."""
        self.handed: Run | None = None
        """On a run that handed off: the run its later calls feed (the receiving agent's)."""
        self.receivers: dict[str, Run] | None = None
        """On a run that handed off: the receiving agents' runs, by agent name."""
        self.key: Hashable
        self.run_key: tuple[str | None, ...]
        if session is not None:
            self.key = self.run_key = session_run_key(session)
        else:
            self.key = (trace_id, span_id)
            self.run_key = run_key or text_run_key(trace_id, span_id)
        """The detector's run key: the same live and offline."""
        self._span: weakref.ref[Any] | None = None
        self.span = span
        self.context = context
        """The run span's context (the driver's), if seen: what log-based events correlate with."""
        self.lock = threading.Lock()
        self.detector: RunDetector | None = None
        self.registered = False
        self.evicted = False
        """Removed from the table (ended or evicted); set under the table lock."""
        self.closed = False
        """The detector is finished; set under the run lock."""
        self.last = 0.0
        self.pending: deque[tuple[int, Finding]] | None = None
        """Findings (with the time they fired) that could not go on the open run span, or
        may not have (it ended as they were added): its copy gets those it lacks. The
        newest are kept; made on first use."""
        self.pending_dropped = 0
        """Findings that did not fit in ``pending``: counted as dropped events on the copy."""
        self.report: RunReport | None = None
        self.calls = 0
        """Calls fed to its detector (counted under the run lock): they estimate its bytes."""
        self.charged = 0
        """The bytes this run is counted for in its table's total; set under the table lock."""
        self.charged_calls = 0
        """The calls ``charged`` covers: beyond them the run is charged again (table lock)."""

    @property
    def spanless(self) -> bool:
        """No span is this run's run span (a session's run, a handoff's receiving agent's)."""
        return self.session is not None or self.owner is not None

    @property
    def span(self) -> Any:
        """The live run span (agent span or trace root) while it is open, if seen here.

        Held weakly: a span its application dropped without ending it can never end,
        and must not be kept alive here (some 3 KB each, with a few attributes).
        """
        ref = self._span
        return None if ref is None else ref()

    @span.setter
    def span(self, span: Any) -> None:
        self._span = None if span is None else weakref.ref(span)

    def release(self) -> None:
        """Drop what a finished, evicted run holds: nothing of it outlives its eviction.

        A span of the run that is still open may keep this object; it is then a few
        hundred bytes, with no detector, report, pending findings or span.
        """
        with self.lock:
            self.detector = None
            self.report = None
            self.pending = None
            self.span = None

    def keep_pending(self, when: int, finding: Finding) -> None:
        """Under the run lock: keep a finding for the run span's copy (the newest fit)."""
        pending = self.pending
        if pending is None:
            pending = self.pending = deque(maxlen=PENDING_FINDINGS)
        elif len(pending) == PENDING_FINDINGS:
            self.pending_dropped += 1
        pending.append((when, finding))


class Node:
    """The ancestry of one tracked open span: its run, and what its children inherit.

    ``run`` ``None`` means the trace run. A plain span's node (``role`` ``None``)
    is shared: a plain span under a tracked parent stores its parent's ``child``
    node, which its own children inherit in turn, so tracking it allocates
    nothing. A shared node does not point at itself: a node in a reference
    cycle, and the run it holds, would outlive the span until the cycle
    collector ran, instead of being freed when the span ends.
    """

    __slots__ = (
        "child",
        "in_model",
        "inner_failure",
        "nested",
        "owned",
        "owner",
        "role",
        "round_of",
        "run",
        "shared",
        "tools_done",
        "tools_open",
    )

    def __init__(
        self,
        run: Run | None,
        nested: bool,
        role: Role | None = None,
        owned: Run | None = None,
        child: Node | None = None,
        in_model: bool = False,
    ) -> None:
        self.run = run
        self.nested = nested
        """Inside a tool span: the outer tool span is the call, this one is not."""
        self.in_model = in_model
        """Inside a model span: a model span here is the same call (a wrapper's client call)."""
        self.inner_failure: Status | None = None
        """On a tool span's child node: how a nested span of the same call failed (an MCP
        server span under its client span), for the outer call to report."""
        self.owner: tuple[SpanId, SpanId, Any, Any] | None = None
        """On a tool span's child node: the tool span (trace id, span id, handle, context),
        which becomes a run span if a model call starts inside it (an agent used as a tool)."""
        self.role = role
        """The role the span had at its start (tool, model or agent); ``None``: a plain span."""
        self.owned = owned
        """The run this span is the run span of (agent spans)."""
        self.shared = role is None
        """A plain span's node: its children inherit this very node."""
        self.child = None if self.shared else child
        """What a child of a tracked span stores; ``None``: children need no entry."""
        self.tools_open = 0
        self.tools_done = 0
        """On a model span's child node: its tool calls open and ended so far. A tool call
        starting when none is open and one has ended is a round of its own (a client that
        runs the tool loop inside one model span: Google GenAI's automatic function calling)."""
        self.round_of: Node | None = None
        """On a tool span's node: the model span's child node whose counts it is in."""

    def inherited(self) -> Node | None:
        """What a child of this span inherits."""
        return self if self.shared else self.child


__all__ = [
    "CALL_BYTES",
    "ENDED_ROOTS",
    "PENDING_FINDINGS",
    "RUN_BYTES",
    "SPAN_BYTES",
    "TOUCH",
    "KeyOf",
    "Node",
    "Role",
    "Run",
    "SpanId",
    "hex_run_key",
    "text_run_key",
]
