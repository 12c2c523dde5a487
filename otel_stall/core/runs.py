"""The one run model: which run a call feeds and when a run ends, from span facts.

Live, replay and the gateway all drive this model. The live processor feeds it
from ``on_start`` and ``on_end`` as spans come; the batch analysis
(:mod:`otel_stall.offline.analysis`) replays a trace's span starts and ends in the
order live would have seen them. So where a call goes is decided once, here:

* a run is the nearest ancestor agent span, else the trace, whose root span
  then plays the run span; outside every agent span, a call that names a
  session feeds the session's run (no span spans it);
* a tool span nested inside another tool span is the same call seen twice:
  only the outermost one counts (its failure is the outer call's);
* a model span inside another model span is the same call too;
* a tool span holding a model call with no agent span between is an agent
  used as a tool: it becomes the run span of the calls inside it;
* after a handoff call, the run's later calls are the receiving agent's run,
  which ends with the run it was handed from;
* a role learnt only at a span's end (attributes set after its start) counts
  from then on.

The model knows no OpenTelemetry: spans are ids (ints live, hex text offline)
plus an opaque handle and context the driver hands in and gets back. It holds
the open runs (LRU order), the ancestry of open spans and the trace roots, with
their bounds (count, bytes, TTL). :class:`RunTable` owns one lock, held only
around its dict operations. It never touches a detector, a downstream processor
or a user callback: a run evicted by the TTL or the ``max_runs`` bound is handed
to the ``on_evict`` callback after the lock is released, and finishing it is the
driver's business.
"""

from __future__ import annotations

import threading
import weakref
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Any

from otel_stall.core.records import handoff_run_key, session_run_key
from otel_stall.core.run_state import (
    CALL_BYTES,
    ENDED_ROOTS,
    RUN_BYTES,
    SPAN_BYTES,
    TOUCH,
    KeyOf,
    Node,
    Role,
    Run,
    SpanId,
    hex_run_key,
)


class RunTable:
    """The open runs (LRU order), the ancestry of open spans and the trace roots.

    ``on_evict`` is called outside the lock, once for each run the TTL, the
    ``max_runs`` bound or the byte bound removed, so the owner can finish its
    detector. An evicted run leaves no entry behind: its agent span's entry and
    its trace root's go with it (the ids are remembered a while, as ended ones).

    ``max_bytes`` bounds the estimated bytes of the whole state: spans and roots
    get at most a quarter of it (their entries are small and alike), runs the rest
    (a run's bytes grow with its calls, up to ``call_cap`` calls; ``None``: no cap).
    ``key_of`` spells a run's key from its ids (:func:`hex_run_key` for int ids).
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
        key_of: KeyOf = hex_run_key,
    ) -> None:
        self.max_runs = max_runs
        self.ttl = ttl
        self.max_bytes = max_bytes
        self.max_spans = max(1, min(max_spans, max_bytes // (4 * SPAN_BYTES)))
        """The span count bound, and the spans' quarter of the byte bound, in entries."""
        self.call_cap = call_cap
        self.clock = clock
        self.on_evict = on_evict
        self.key_of = key_of
        self.lock = threading.Lock()
        self.runs: OrderedDict[Hashable, Run] = OrderedDict()
        """Registered runs by key, least recently used first."""
        self.spans: dict[SpanId, Node] = {}
        """Tracked open spans by span id."""
        self.roots: dict[SpanId, tuple[weakref.ref[Any] | None, Any] | Run] = {}
        """Open trace roots by trace id: the root span (held weakly, as a run's span is, with
        its context), or its trace run once created (an agent root's own run: every span of
        its trace is inside it)."""
        self.ended: OrderedDict[SpanId, None] = OrderedDict()
        """Trace ids of recently ended roots (oldest first), bounded by ``ENDED_ROOTS``."""
        self.ended_agents: OrderedDict[SpanId, None] = OrderedDict()
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

    def inherit(self, parent_id: SpanId) -> Node | None:
        """What a span started under ``parent_id`` inherits from its tracked parent."""
        node = self.spans.get(parent_id)
        return None if node is None else node.inherited()

    def start(
        self,
        role: Role,
        trace_id: SpanId,
        span_id: SpanId,
        inherit: Node | None,
        handle: Any = None,
        context: Any = None,
        root: bool = False,
    ) -> tuple[bool, Run | None]:
        """Track a started span by its role (``root``: the trace's root).

        For a model span: whether its round opens now (a model span inside
        another is the same call), and the run it belongs to (``None``: its
        trace's or its session's, see :meth:`use`).
        """
        if role is Role.TOOL:
            return self._tool_started(trace_id, span_id, inherit, handle, context)
        if role is Role.MODEL:
            run = self._model_started(span_id, inherit)
            return inherit is None or not inherit.in_model, run
        if role is Role.AGENT:
            self._agent_started(trace_id, span_id, inherit, handle, context, root)
        elif inherit is not None:
            self.track(span_id, inherit)
        return False, None

    def _tool_started(
        self, trace_id: SpanId, span_id: SpanId, inherit: Node | None, handle: Any, context: Any
    ) -> tuple[bool, Run | None]:
        """Track a tool span: its children are nested calls, the same call seen again.

        Inside a model span, after its earlier tool calls ended: whether it opens a round
        of its own (the model was asked again in between, inside the same span).
        """
        run, nested = (None, False) if inherit is None else (inherit.run, inherit.nested)
        if nested:
            child = inherit
        else:
            child = Node(run, True)
            child.owner = (trace_id, span_id, handle, context)
        node = Node(run, nested, Role.TOOL, None, child)
        opens = False
        if inherit is not None and inherit.in_model and not nested:
            opens = inherit.tools_done > 0 and inherit.tools_open == 0
            inherit.tools_open += 1
            node.round_of = inherit
        self.track(span_id, node)
        return opens, run

    def _model_started(self, span_id: SpanId, inherit: Node | None) -> Run | None:
        """Track a model span; the run it belongs to (``None``: its trace's run).

        Inside a tool span with no agent span between, the tool span is an agent
        used as a tool: it becomes the run span of the calls made inside it.
        """
        if inherit is not None:
            self.adopt(inherit)
        run, nested = (None, False) if inherit is None else (inherit.run, inherit.nested)
        child = Node(run, nested, in_model=True)
        node = Node(run, nested, Role.MODEL, None, child, inherit is not None and inherit.in_model)
        self.track(span_id, node)
        return run

    def adopt(self, node: Node) -> None:
        """A model call inside a tool span's node: the tool span is an agent used as a tool.

        It becomes the run span of the calls made inside it. The node is shared by
        the plain spans between, so their children see the run too.
        """
        owner = node.owner
        if node.nested and owner is not None:
            trace_id, span_id, handle, context = owner
            run = Run(trace_id, span_id, handle, context, run_key=self.key_of(trace_id, span_id))
            node.run, node.nested, node.owner = run, False, None

    def _agent_started(
        self,
        trace_id: SpanId,
        span_id: SpanId,
        inherit: Node | None,
        handle: Any,
        context: Any,
        root: bool,
    ) -> None:
        """Track an agent span: it opens its own run, which its descendants belong to."""
        run, nested = (None, False) if inherit is None else (inherit.run, inherit.nested)
        agent = Run(trace_id, span_id, handle, context, run_key=self.key_of(trace_id, span_id))
        self.track(span_id, Node(run, nested, Role.AGENT, agent, Node(agent, False)))
        if root:
            self._agent_root(trace_id, agent)

    def span_ended(self, span_id: SpanId) -> Node | None:
        """Forget an ended span's ancestry; its node, if it was tracked."""
        node = self.spans.pop(span_id, None) if self.spans else None
        if node is not None and node.round_of is not None:
            counts = node.round_of
            counts.tools_open -= 1
            counts.tools_done += 1
        return node

    def untracked(self, parent_id: SpanId | None) -> Node:
        """Where an ended span that was not tracked (or was forgotten) belongs, as a plain node.

        Inside its parent's run if the parent is tracked, else in the trace's run.
        """
        parent_node = None if parent_id is None else self.spans.get(parent_id)
        inherit = None if parent_node is None else parent_node.inherited()
        if inherit is None:
            return Node(None, False)
        return Node(inherit.run, inherit.nested, in_model=inherit.in_model)

    def closing(self, node: Node, trace_id: SpanId, span_id: SpanId, root: bool) -> Run | None:
        """The run an ended span is the run span of, if any.

        An agent span's own run; a tool span's if it became an agent used as a
        tool; the trace root's: its trace's run, if one was made (the root is
        forgotten either way).
        """
        run = node.owned
        child = node.child
        if (
            run is None
            and child is not None
            and child.run is not None
            and child.run.span_id == span_id
        ):
            run = child.run  # an agent used as a tool: its run ends with it
        if root:
            trace_run = self.root_ended(trace_id)
            run = trace_run if run is None else run
        return run

    def close(self, run: Run) -> tuple[list[Run], bool]:
        """A run span ended: the runs its handoffs gave away, and whether it was used.

        The receivers are finished first; an unused run has nothing to finish.
        """
        receivers = self.receivers_ended(run) if run.receivers else []
        return receivers, self.end_run(run)

    def delegate_parent(self, node: Node, trace_id: SpanId) -> Run | None:
        """The run a sub-agent's run reports its end to: the one its agent span sits in."""
        return node.run if node.run is not None else self.trace_run(trace_id)

    def root_started(self, trace_id: SpanId, handle: Any = None, context: Any = None) -> None:
        """Remember an open trace root: it becomes the run span if its trace run is created."""
        roots = self.roots
        roots[trace_id] = (None if handle is None else weakref.ref(handle), context)
        if len(roots) + len(self.spans) > self.max_spans:
            self._forget_oldest(roots)

    def _agent_root(self, trace_id: SpanId, run: Run) -> None:
        """The trace's root is an agent span: its run is the trace's run.

        A span of this trace whose ancestry is unknown (it started after the agent
        span's entry went, or its ancestors were forgotten) then belongs to the agent's
        run instead of to a trace run of its own that the root's end would never finish.
        """
        root = self.roots.get(trace_id)
        if isinstance(root, tuple) and root[1] == run.context:
            self.roots[trace_id] = run

    def track(self, span_id: SpanId, node: Node) -> None:
        """Remember an open span's ancestry until it ends."""
        spans = self.spans
        spans[span_id] = node
        if len(spans) + len(self.roots) > self.max_spans:
            self._forget_oldest(spans)

    def root_ended(self, trace_id: SpanId) -> Run | None:
        """Forget an ended trace root; its trace run, if one was created."""
        with self.lock:
            found = self.roots.pop(trace_id, None)
            _remember(self.ended, trace_id)
            if isinstance(found, Run):
                return found
            return self.runs.get((trace_id, None))

    def run_for(self, trace_id: SpanId, span_id: SpanId) -> Run | None:
        """The run a call made inside the span ``span_id`` belongs to, if it has state."""
        node = self.spans.get(span_id)
        inherit = None if node is None else node.inherited()
        if inherit is not None and inherit.run is not None:
            return inherit.run.handed or inherit.run
        with self.lock:
            root = self.roots.get(trace_id)
            run = root if isinstance(root, Run) else self.runs.get((trace_id, None))
            return None if run is None else run.handed or run

    def trace_run(self, trace_id: SpanId) -> Run | None:
        """The trace's own run, if it was made (never creates one)."""
        with self.lock:
            root = self.roots.get(trace_id)
            if isinstance(root, Run):
                return root
            return self.runs.get((trace_id, None))

    def _forget_oldest(self, table: dict[Any, Any]) -> None:
        """Keep ancestry bounded: spans that never end must not leak.

        Trims ``table`` (the one that just grew) first, oldest first, then the other.
        """
        with self.lock:
            # Trim a little below the bound so a full map does not lock on every span.
            limit = self.max_spans - self.max_spans // 16
            other: dict[Any, Any] = self.roots if table is self.spans else self.spans
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
        trace_id: SpanId,
        parent_id: SpanId | None,
        session: str | None = None,
    ) -> Run | None:
        """The run a tool or model call feeds, registered and touched.

        ``run`` is the span's run if known, else ``None``: the run of ``session``
        if the call names one (see ``Conventions.session``), else the trace's run,
        created if needed. ``None`` when the run already ended or was evicted
        (possibly by this very call), and for a span with no known run begun under
        an agent span that has ended (``parent_id``): its run is over, and the
        trace's is not its run.
        """
        now = self.clock()
        if run is None:
            if parent_id is not None and parent_id in self.ended_agents:
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
                run = runs.get(session_run_key(session)) or Run(trace_id, None, session=session)
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

    def _known_run(self, trace_id: SpanId, session: str | None) -> Run | None:
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
                receiver = receivers[agent] = Run(base.trace_id, None)
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

    def _trace_run(self, trace_id: SpanId) -> Run | None:
        """Under the lock: the trace's run, created on first use; ``None`` if it ended."""
        roots = self.roots
        root = roots.get(trace_id)
        if isinstance(root, Run):
            return root
        ref, context = (None, None) if root is None else root
        span = None if ref is None else ref()  # None too if dropped without ending
        run = self.runs.get((trace_id, None))
        if run is None:
            if root is None and trace_id in self.ended:
                return None  # a span that ended after its trace's root: as after eviction
            run = Run(trace_id, None, span, context, run_key=self.key_of(trace_id, None))
        elif run.span is None and span is not None:
            run.span = span  # created by a remote-parented span before this root started
            run.context = context
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
        elif isinstance(root, tuple) and root[0] is not None and root[0]() is None:
            del self.roots[run.trace_id]  # a root dropped without ending: it never will


def _remember(ended: OrderedDict[SpanId, None], key: SpanId) -> None:
    """Under the table lock: note ``key`` as ended, forgetting the oldest past ``ENDED_ROOTS``."""
    ended[key] = None
    if len(ended) > ENDED_ROOTS:
        ended.popitem(last=False)


__all__ = ["RunTable"]
