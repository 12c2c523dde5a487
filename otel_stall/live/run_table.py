"""The live processor's shared state: open runs, span ancestry, and their bounds.

:class:`otel_stall.live.processor.StallSpanProcessor` decides *what* a span means
(its role, its call, its findings); this module remembers *where* it belongs:
what a starting span inherits from its parent, the node it leaves for its
children, and which run a tool or model span feeds. Keeping the two apart lets
the table's locking and memory bounds be read and changed in one place, and
gives :class:`otel_stall.live.guard.StallGuard` the run state without the processor.

:class:`RunTable` owns one lock, held only around its dict operations. It never
touches a detector, a downstream processor or a user callback: a run evicted by
the TTL or the ``max_runs`` bound is handed to the ``on_evict`` callback after
the lock is released, and finishing it is the processor's business.
"""

from __future__ import annotations

import threading
import weakref
from collections import OrderedDict, deque
from collections.abc import Callable, Hashable
from typing import Any, Final

from opentelemetry.sdk.trace import ReadableSpan, Span
from opentelemetry.trace import SpanContext

from otel_stall.conventions import Role
from otel_stall.core.detector import RunDetector
from otel_stall.core.records import (
    Finding,
    RunReport,
    Status,
    handoff_run_key,
    session_run_key,
)

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
        self, trace_id: int, span_id: int | None, span: Span | None, session: str | None = None
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
            self.run_key = (
                format(trace_id, "032x"),
                None if span_id is None else format(span_id, "016x"),
            )
        """The same run key :class:`otel_stall.offline.analysis.TraceAnalyzer` uses."""
        self._span: weakref.ref[Span] | None = None
        self.span = span
        self.context = None if span is None else span.get_span_context()
        """The run span's context, if seen here: what log-based events are correlated with."""
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
    def span(self) -> Span | None:
        """The live run span (agent span or trace root) while it is open, if seen here.

        Held weakly: a span its application dropped without ending it can never end,
        and must not be kept alive here (some 3 KB each, with a few attributes).
        """
        ref = self._span
        return None if ref is None else ref()

    @span.setter
    def span(self, span: Span | None) -> None:
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
        "run",
        "shared",
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
        self.owner: Span | None = None
        """On a tool span's child node: the tool span, which becomes a run span if a model
        call starts inside it (an agent used as a tool)."""
        self.role = role
        """The role the span had at its start (tool, model or agent); ``None``: a plain span."""
        self.owned = owned
        """The run this span is the run span of (agent spans)."""
        self.shared = role is None
        """A plain span's node: its children inherit this very node."""
        self.child = None if self.shared else child
        """What a child of a tracked span stores; ``None``: children need no entry."""

    def inherited(self) -> Node | None:
        """What a child of this span inherits."""
        return self if self.shared else self.child


class RunTable:
    """The open runs (LRU order), the ancestry of open spans and the trace roots.

    ``on_evict`` is called outside the lock, once for each run the TTL, the
    ``max_runs`` bound or the byte bound removed, so the owner can finish its
    detector. An evicted run leaves no entry behind: its agent span's entry and
    its trace root's go with it (the ids are remembered a while, as ended ones).

    ``max_bytes`` bounds the estimated bytes of the whole state: spans and roots
    get at most a quarter of it (their entries are small and alike), runs the rest
    (a run's bytes grow with its calls, up to ``call_cap`` calls; ``None``: no cap).
    """

    def __init__(
        self,
        *,
        max_runs: int,
        ttl: float,
        max_spans: int,
        clock: Callable[[], float],
        on_evict: Callable[[Run], None],
        max_bytes: int = 1 << 62,
        call_cap: int | None = None,
    ) -> None:
        self.max_runs = max_runs
        self.ttl = ttl
        self.max_bytes = max_bytes
        self.max_spans = max(1, min(max_spans, max_bytes // (4 * SPAN_BYTES)))
        """The span count bound, and the spans' quarter of the byte bound, in entries."""
        self.call_cap = call_cap
        self.clock = clock
        self.on_evict = on_evict
        self.lock = threading.Lock()
        self.runs: OrderedDict[Hashable, Run] = OrderedDict()
        """Registered runs by key, least recently used first."""
        self.spans: dict[int, Node] = {}
        """Tracked open spans by span id."""
        self.roots: dict[int, weakref.ref[Span] | Run] = {}
        """Open trace roots by trace id: the root span (held weakly, as a run's span is), or
        its trace run once created (an agent root's own run: every span of its trace is
        inside it)."""
        self.ended: OrderedDict[int, None] = OrderedDict()
        """Trace ids of recently ended roots (oldest first), bounded by ``ENDED_ROOTS``."""
        self.ended_agents: OrderedDict[int, None] = OrderedDict()
        """Span ids of recently ended agent spans (oldest first), bounded by ``ENDED_ROOTS``."""
        self.finished = 0
        self.evicted = 0
        self.forgotten = 0
        self.run_bytes = 0
        """The estimated bytes of the registered runs: the sum of their ``charged``."""

    # -- counts --------------------------------------------------------------

    @property
    def active_runs(self) -> int:
        """Runs currently registered."""
        return len(self.runs)

    def counts(self) -> tuple[int, int, int, int, int, int]:
        """One snapshot: active runs, tracked spans, finished, evicted, forgotten, bytes held."""
        with self.lock:
            return (
                len(self.runs),
                len(self.spans) + len(self.roots),
                self.finished,
                self.evicted,
                self.forgotten,
                self._bytes(),
            )

    def _bytes(self) -> int:
        """Under the lock: the estimated bytes of every run, span and root entry."""
        return self.run_bytes + (len(self.spans) + len(self.roots)) * SPAN_BYTES

    def _charge(self, run: Run) -> None:
        """Under the lock: count a registered run for its estimated bytes, a little ahead.

        It is charged for four or a quarter more calls than it has made, whichever
        is more, so a busy run takes the lock again only every so many calls; past
        ``call_cap`` its memory no longer grows, and neither does its charge.
        """
        if run.calls < run.charged_calls:
            return
        cap = self.call_cap
        ahead = max(run.calls + 4, run.calls * 5 // 4)
        calls = ahead if cap is None else min(ahead, cap)
        bytes_now = RUN_BYTES + CALL_BYTES * max(0, calls - 1)
        detector = run.detector  # its caches (seen items, digests, chant windows) count too
        if detector is not None:
            bytes_now = max(bytes_now, detector.nbytes)
        self.run_bytes += bytes_now - run.charged
        run.charged = bytes_now
        run.charged_calls = ahead if cap is None or ahead < cap else 1 << 62

    # -- ancestry ------------------------------------------------------------

    def started(self, span: Span) -> Node | None:
        """At a span's start: what it inherits from its tracked parent; a root is remembered."""
        parent = span.parent
        if parent is None:
            self.root_started(span)
            return None
        if not self.spans:
            return None  # no agent activity in flight: no parent to look up (reading an id costs)
        node = self.spans.get(parent.span_id)
        return None if node is None else node.inherited()

    def tool_started(self, span: Span, inherit: Node | None) -> None:
        """Track a tool span: its children are nested calls, the same call seen again."""
        run, nested = (None, False) if inherit is None else (inherit.run, inherit.nested)
        if nested:
            child = inherit
        else:
            child = Node(run, True)
            child.owner = span
        self.track(span.get_span_context().span_id, Node(run, nested, Role.TOOL, None, child))

    def model_started(self, span: Span, inherit: Node | None) -> Run | None:
        """Track a model span; the run it belongs to (``None``: its trace's run).

        Inside a tool span with no agent span between, the tool span is an agent
        used as a tool: it becomes the run span of the calls made inside it.
        """
        if inherit is not None:
            self.adopt(inherit)
        run, nested = (None, False) if inherit is None else (inherit.run, inherit.nested)
        child = Node(run, nested, in_model=True)
        node = Node(run, nested, Role.MODEL, None, child, inherit is not None and inherit.in_model)
        self.track(span.get_span_context().span_id, node)
        return run

    @staticmethod
    def adopt(node: Node) -> None:
        """A model call inside a tool span's node: the tool span is an agent used as a tool.

        It becomes the run span of the calls made inside it. The node is shared by
        the plain spans between, so their children see the run too.
        """
        owner = node.owner
        if node.nested and owner is not None:
            ctx = owner.get_span_context()
            node.run, node.nested, node.owner = Run(ctx.trace_id, ctx.span_id, owner), False, None

    def agent_started(self, span: Span, inherit: Node | None) -> None:
        """Track an agent span: it opens its own run, which its descendants belong to."""
        run, nested = (None, False) if inherit is None else (inherit.run, inherit.nested)
        ctx = span.get_span_context()
        agent = Run(ctx.trace_id, ctx.span_id, span)
        self.track(ctx.span_id, Node(run, nested, Role.AGENT, agent, Node(agent, False)))
        if span.parent is None:
            self.agent_root(ctx.trace_id, agent)

    def span_ended(self, span: ReadableSpan) -> Node | None:
        """Forget an ended span's ancestry; its node, if it was tracked."""
        if not self.spans:
            return None  # no agent activity in flight: nothing to forget (reading an id costs)
        ctx = span.context
        return None if ctx is None else self.spans.pop(ctx.span_id, None)

    def untracked(self, span: ReadableSpan) -> Node:
        """Where an ended span that was not tracked (or was forgotten) belongs, as a plain node.

        Inside its parent's run if the parent is tracked, else in the trace's run.
        """
        parent = span.parent
        parent_node = None if parent is None else self.spans.get(parent.span_id)
        inherit = None if parent_node is None else parent_node.inherited()
        if inherit is None:
            return Node(None, False)
        return Node(inherit.run, inherit.nested, in_model=inherit.in_model)

    def root_started(self, span: Span) -> None:
        """Remember an open trace root: it becomes the run span if its trace run is created."""
        ctx = span.context
        if ctx is None:
            return
        roots = self.roots
        roots[ctx.trace_id] = weakref.ref(span)
        if len(roots) + len(self.spans) > self.max_spans:
            self._forget_oldest(roots)

    def agent_root(self, trace_id: int, run: Run) -> None:
        """The trace's root is an agent span: its run is the trace's run.

        A span of this trace whose ancestry is unknown (it started after the agent
        span's entry went, or its ancestors were forgotten) then belongs to the agent's
        run, as in the batch analysis, instead of to a trace run of its own that the
        root's end would never finish.
        """
        root = self.roots.get(trace_id)
        if isinstance(root, weakref.ref) and root() is run.span:
            self.roots[trace_id] = run

    def track(self, span_id: int, node: Node) -> None:
        """Remember an open span's ancestry until it ends."""
        spans = self.spans
        spans[span_id] = node
        if len(spans) + len(self.roots) > self.max_spans:
            self._forget_oldest(spans)

    def root_ended(self, trace_id: int) -> Run | None:
        """Forget an ended trace root; its trace run, if one was created."""
        with self.lock:
            found = self.roots.pop(trace_id, None)
            _remember(self.ended, trace_id)
            if isinstance(found, Run):
                return found
            return self.runs.get((trace_id, None))

    def run_for(self, ctx: SpanContext) -> Run | None:
        """The run a call made inside the span ``ctx`` belongs to, if it has state."""
        node = self.spans.get(ctx.span_id)
        inherit = None if node is None else node.inherited()
        if inherit is not None and inherit.run is not None:
            return inherit.run.handed or inherit.run
        with self.lock:
            root = self.roots.get(ctx.trace_id)
            run = root if isinstance(root, Run) else self.runs.get((ctx.trace_id, None))
            return None if run is None else run.handed or run

    def trace_run(self, trace_id: int) -> Run | None:
        """The trace's own run, if it was made (never creates one)."""
        with self.lock:
            root = self.roots.get(trace_id)
            if isinstance(root, Run):
                return root
            return self.runs.get((trace_id, None))

    def _forget_oldest(self, table: dict[int, Any]) -> None:
        """Keep ancestry bounded: spans that never end must not leak.

        Trims ``table`` (the one that just grew) first, oldest first, then the other.
        """
        with self.lock:
            # Trim a little below the bound so a full map does not lock on every span.
            limit = self.max_spans - self.max_spans // 16
            other: dict[int, Any] = self.roots if table is self.spans else self.spans
            for trimmed in (table, other):
                excess = len(self.spans) + len(self.roots) - limit
                while excess > 0 and trimmed:
                    try:
                        oldest = next(iter(trimmed))
                    except StopIteration:
                        break
                    except RuntimeError:  # resized by another thread mid-iteration: retry
                        continue
                    if trimmed.pop(oldest, None) is not None:
                        self.forgotten += 1
                    excess -= 1

    # -- runs ----------------------------------------------------------------

    def use(
        self,
        run: Run | None,
        trace_id: int,
        parent: SpanContext | None,
        session: str | None = None,
    ) -> Run | None:
        """The run a tool or model call feeds, registered and touched.

        ``run`` is the span's run if known, else ``None``: the run of ``session``
        if the call names one (see ``Conventions.session``), else the trace's run,
        created if needed. ``None`` when the run already ended or was evicted
        (possibly by this very call), and for a span with no known run begun under
        an agent span that has ended (``parent``): its run is over, and the
        trace's is not its run.
        """
        now = self.clock()
        if run is None:
            if parent is not None and parent.span_id in self.ended_agents:
                return None
            run = self._known_run(trace_id, session)
        if run is not None and run.handed is not None:
            run = run.handed  # after a handoff, the receiving agent's run
        if (
            run is not None
            and run.registered
            and not run.evicted
            and now - run.last < TOUCH
            and run.calls < run.charged_calls
        ):
            return run  # touched within the last second and charged: nothing to update
        evicted: list[Run] = []
        with self.lock:
            runs = self.runs
            if run is None and session is not None:
                run = runs.get(session_run_key(session)) or Run(trace_id, None, None, session)
            elif run is None:
                run = self._trace_run(trace_id)
                if run is None:
                    return None
            run = run.handed or run
            if run.evicted:
                return None
            if run.registered:
                runs.move_to_end(run.key)
            else:
                runs[run.key] = run
                run.registered = True
            run.last = now
            self._charge(run)
            first = next(iter(runs.values()))
            if (
                len(runs) > self.max_runs
                or now - first.last > self.ttl
                or self._bytes() > self.max_bytes
            ):
                evicted = self._pop_evictable(now)
        for old in evicted:
            self.on_evict(old)
        return None if run.evicted else run  # the bound may have evicted this very run

    def _known_run(self, trace_id: int, session: str | None) -> Run | None:
        """The session's run, or else the trace's, if it exists (read without the lock)."""
        if session is not None:
            return self.runs.get(session_run_key(session))
        found = self.roots.get(trace_id)
        return found if isinstance(found, Run) else self.runs.get((trace_id, None))

    def end_run(self, run: Run) -> bool:
        """Remove a run whose run span ended; false if it was never used (nothing to finish).

        An agent span's id is remembered a while: see :meth:`use`.
        """
        if run.span_id is not None:
            with self.lock:
                _remember(self.ended_agents, run.span_id)
        if not run.registered:
            # Never used (an agent span with no tool or model call): nothing to remove.
            run.evicted = True
            if not run.registered:
                return False
        with self.lock:
            if run.registered and self.runs.get(run.key) is run:
                del self.runs[run.key]
                self.run_bytes -= run.charged
                self.finished += 1
            run.evicted = True
        return True

    def hand_over(self, run: Run, agent: str) -> None:
        """A handoff call of ``run`` ended: the calls that follow in it are ``agent``'s run.

        That run has no span of its own; it ends with the run it was handed from
        (see :meth:`receivers_ended`). A handoff back to an agent that had the
        run before goes on with that agent's run.
        """
        with self.lock:
            base = run.owner or run
            receivers = base.receivers
            if receivers is None:
                receivers = base.receivers = {}
            receiver = receivers.get(agent)
            if receiver is None:
                receiver = receivers[agent] = Run(base.trace_id, None, None)
                receiver.key = receiver.run_key = handoff_run_key(base.run_key, agent)
                receiver.owner = base
                receiver.context = base.context
            base.handed = receiver

    def receivers_ended(self, run: Run) -> list[Run]:
        """``run`` ended: remove the runs its handoffs gave away; those used, to finish."""
        with self.lock:
            receivers = list((run.receivers or {}).values())
            run.receivers = run.handed = None
            used = []
            for receiver in receivers:
                if receiver.registered and self.runs.get(receiver.key) is receiver:
                    del self.runs[receiver.key]
                    self.run_bytes -= receiver.charged
                    self.finished += 1
                    used.append(receiver)
                receiver.evicted = True
        return used

    def end_session(self, session: str) -> Run | None:
        """Remove a session's run, which no span ends: the caller finishes it; ``None``: none.

        A later call of the session opens a new run.
        """
        with self.lock:
            run = self.runs.pop(session_run_key(session), None)
            if run is None:
                return None
            self.run_bytes -= run.charged
            self.finished += 1
            run.evicted = True
        return run

    def evict_expired(self) -> int:
        """Evict runs idle for longer than the TTL now; returns how many."""
        with self.lock:
            evicted = self._pop_evictable(self.clock())
        for run in evicted:
            self.on_evict(run)
        return len(evicted)

    def clear(self) -> list[Run]:
        """Forget everything; the runs that were registered, marked evicted, to finish."""
        with self.lock:
            runs = list(self.runs.values())
            self._empty()
            for run in runs:
                run.evicted = True
        return runs

    def reset_after_fork(self) -> None:
        """In a forked child: start empty, with a new lock.

        The child has only the thread that forked. The lock may have been held
        by another thread at the fork, and would then never be released; the
        runs are the parent's, half-updated perhaps, and their locks may be held
        too. So the child forgets them, as the SDK's batch processor drops the
        parent's queue. No lock is taken here: the old one may be held forever.
        """
        self.lock = threading.Lock()
        self._empty()
        self.finished = self.evicted = self.forgotten = 0

    def _empty(self) -> None:
        """Clear every table, under the lock or alone (in a forked child)."""
        self.runs.clear()
        self.run_bytes = 0
        self.spans.clear()
        self.roots.clear()
        self.ended.clear()
        self.ended_agents.clear()

    def _trace_run(self, trace_id: int) -> Run | None:
        """Under the lock: the trace's run, created on first use; ``None`` if it ended."""
        roots = self.roots
        root = roots.get(trace_id)
        if isinstance(root, Run):
            return root
        span = None if root is None else root()  # None too if dropped without ending
        run = self.runs.get((trace_id, None))
        if run is None:
            if root is None and trace_id in self.ended:
                return None  # a span that ended after its trace's root: as after eviction
            run = Run(trace_id, None, span)
        elif run.span is None and span is not None:
            run.span = span  # created by a remote-parented span before this root started
            run.context = span.get_span_context()
        if root is not None:
            roots[trace_id] = run
        return run

    def _pop_evictable(self, now: float) -> list[Run]:
        """Under the lock: pop runs over the count or byte bound or idle past the TTL."""
        runs = self.runs
        out: list[Run] = []
        deadline = now - self.ttl
        while runs:
            first = next(iter(runs.values()))
            if (
                len(runs) <= self.max_runs
                and first.last >= deadline
                and self._bytes() <= self.max_bytes
            ):
                break
            runs.popitem(last=False)
            first.evicted = True
            self.run_bytes -= first.charged
            self._drop_entries(first)
            out.append(first)
        self.evicted += len(out)
        return out

    def _drop_entries(self, run: Run) -> None:
        """Under the lock: forget an evicted run's agent span and trace root entries.

        Their ids are remembered as ended, so that a late span of the run passes
        through instead of opening a run of its trace (see :meth:`use`). The
        trace's plain root goes too if its application dropped it unended.
        """
        if run.span_id is not None:
            node = self.spans.get(run.span_id)
            if node is not None and node.owned is run:
                del self.spans[run.span_id]
            _remember(self.ended_agents, run.span_id)
        root = self.roots.get(run.trace_id)
        if root is run:
            del self.roots[run.trace_id]
            _remember(self.ended, run.trace_id)
        elif isinstance(root, weakref.ref) and root() is None:
            del self.roots[run.trace_id]  # a root dropped without ending: it never will


def _remember(ended: OrderedDict[int, None], key: int) -> None:
    """Under the table lock: note ``key`` as ended, forgetting the oldest past ``ENDED_ROOTS``."""
    ended[key] = None
    if len(ended) > ENDED_ROOTS:
        ended.popitem(last=False)


__all__ = [
    "CALL_BYTES",
    "ENDED_ROOTS",
    "PENDING_FINDINGS",
    "RUN_BYTES",
    "SPAN_BYTES",
    "TOUCH",
    "Node",
    "Run",
    "RunTable",
]
