"""The order live would have seen a trace's spans start and end in, for the run model.

The batch analysis has every span of a trace at once, in any order;
:class:`LiveOrder` replays their starts and ends into a driver
(:class:`~otel_stall.offline.batch.BatchRuns`) as the live processor would have
met them: a span starts after its parent and ends after its children; among the
spans free to go, the earliest time goes first, and at one time a tool call's
end before a model call's start (as the detector's feed has it). A span with no
tool, model or agent span above it waits for the trace's root, which ends last:
the batch counts every call of the trace, however late its clock.

Only tool, model and agent spans (and the root) are ordered: a plain span
between them is transparent to the run model, as live, where it inherits its
parent's node. Every walk is linear: each span's nearest tool, model or agent
ancestor is memoised as the walk passes it, and a parent cycle is cut where it
is met (the spans on it hold no call: live, no span can be its own ancestor).
"""

from __future__ import annotations

import heapq
from typing import Final

from otel_stall.core.run_state import Role
from otel_stall.offline.batch import BatchRuns, TraceSpans

_WALKING: Final = "\x00walking"
"""Memo mark of a span on the walk under way: meeting it again is a cycle."""
_START_CODE: Final = {Role.TOOL: -1, Role.AGENT: -1, Role.OTHER: -1, Role.MODEL: 1}
_END_CODE: Final = {Role.TOOL: 0, Role.MODEL: 2, Role.AGENT: 3, Role.OTHER: 4}
"""Ties at one time: a tool call's end, a model call's start, its end, a run's end."""
_WALKED: Final = 0
_LEADS: Final = 1
_CYCLE: Final = 2
_OTHER: Final = Role.OTHER
_TOOL: Final = Role.TOOL
_MODEL: Final = Role.MODEL

_Fact = tuple[Role, "str | None", int, int]
"""A tool, model or agent span (or the plain root) to order: role, parent, start, end."""


class LiveOrder:
    """One trace's spans ordered as live would see them start and end, fed to a driver."""

    __slots__ = ("facts", "links", "memo", "odd_links", "plain", "root", "up")

    def __init__(
        self, spans: TraceSpans, links: bytearray, odd_links: dict[str, str] | None
    ) -> None:
        self.links = links
        """Plain spans' parent links: 8 bytes of span id, then 8 of parent id."""
        self.odd_links = odd_links
        """Links whose ids are not 16 lower-case hex digits (hand-made records)."""
        self.root = None if spans.root is None else spans.root[0]
        facts: dict[str, _Fact] = {}
        for span_id, (start_ns, parent, model) in spans.models.items():
            facts[span_id] = (_MODEL, parent, start_ns, model.end_ns)
        for span_id, (call, _, parent, _) in spans.tools.items():
            facts[span_id] = (_TOOL, parent, call.start_ns, call.end_ns)
        for span_id, (_, end_ns, parent, start_ns) in spans.agents.items():
            facts[span_id] = (Role.AGENT, parent, start_ns, end_ns)
        if spans.root is not None and spans.root[0] not in facts:
            root_id, start_ns, end_ns = spans.root
            facts[root_id] = (_OTHER, None, start_ns, end_ns)
        self.facts = facts
        self.plain: dict[bytes, bytes] | None = None
        self.memo: dict[str, str | None] = {}
        """Plain spans: the nearest tool, model or agent span above each."""
        self.up: dict[str, str | None] = {}
        """Tool, model and agent spans: the nearest such span above each (``None``: none)."""

    def replay(self, driver: BatchRuns) -> None:
        """Feed every start and end to ``driver``, each span after its parent, children first."""
        facts, up = self.facts, self.up
        for span_id, fact in facts.items():
            up[span_id] = self._above(fact[1])
        root = self.root
        children = self._children(root)
        ready = [(facts[s][2], _START_CODE[facts[s][0]], s, False) for s in children.pop(None, ())]
        heapq.heapify(ready)
        waiting = {s: len(kids) for s, kids in children.items()}
        start, end, push, pop = driver.start, driver.end, heapq.heappush, heapq.heappop
        while ready:
            _, _, span_id, ends = pop(ready)
            role, _, _, end_ns = facts[span_id]
            if not ends:
                start(span_id, role, up[span_id])
                for kid in children.get(span_id, ()):
                    push(ready, (facts[kid][2], _START_CODE[facts[kid][0]], kid, False))
                if not waiting.get(span_id):
                    push(ready, (end_ns, _END_CODE[role], span_id, True))
                continue
            end(span_id, role, up[span_id])
            above = up[span_id] if up[span_id] is not None or span_id == root else root
            if above is not None and above in waiting:
                waiting[above] -= 1
                if not waiting[above]:
                    push(ready, (facts[above][3], _END_CODE[facts[above][0]], above, True))

    def _children(self, root: str | None) -> dict[str | None, list[str]]:
        """Each span's children in the order (``None``: the first to start).

        A span with no tool, model or agent span above it waits for the trace's
        root, which ends last (as the batch counts every call of the trace). Spans
        on a parent cycle are left out: none of them can start first.
        """
        up = self.up
        state: dict[str, int] = {}
        """Per span: ``_WALKED`` while walked, then ``_LEADS`` (up to a start) or ``_CYCLE``."""
        for span_id in up:
            path: list[str] = []
            node: str | None = span_id
            while node is not None and node not in state:
                state[node] = _WALKED
                path.append(node)
                node = up[node]
            if node is not None and state[node] == _WALKED:  # a cycle: cut it out
                cut = path.index(node)
                for inside in path[cut:]:
                    state[inside] = _CYCLE
                del path[cut:]
            if path and node is not None and state[node] == _CYCLE:
                up[path[-1]] = None  # below the cycle: as if its parent were unknown
            for walked in path:
                state[walked] = _LEADS
        children: dict[str | None, list[str]] = {}
        for span_id, known in state.items():
            if known != _LEADS:
                continue
            above = up[span_id]
            if above is None and span_id != root:
                above = root
            children.setdefault(above, []).append(span_id)
        return children

    def _above(self, parent: str | None) -> str | None:
        """The nearest tool, model or agent span at or above ``parent``, memoised."""
        facts, memo = self.facts, self.memo
        path: list[str] = []
        found: str | None = None
        while parent is not None:
            if parent in facts:
                found = parent
                break
            known = memo.get(parent, _WALKING)
            if parent in memo:
                found = None if known is _WALKING else known
                break
            memo[parent] = _WALKING
            path.append(parent)
            parent = self._plain_parent(parent)
        for span_id in path:
            memo[span_id] = found
        return found

    def _plain_parent(self, span_id: str) -> str | None:
        odd = self.odd_links
        if odd is not None and span_id in odd:
            return odd[span_id]
        if len(span_id) != 16:
            return None
        try:
            key = bytes.fromhex(span_id)
        except ValueError:
            return None
        if key.hex() != span_id:
            return None  # "AB..." is not the span "ab...": only canonical ids are in the links
        plain = self.plain
        if plain is None:
            data = bytes(self.links)
            plain = self.plain = {
                data[i : i + 8]: data[i + 8 : i + 16] for i in range(0, len(data), 16)
            }
        found = plain.get(key)
        return None if found is None else found.hex()


__all__ = ["LiveOrder"]
