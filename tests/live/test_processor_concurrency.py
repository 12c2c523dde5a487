"""Many runs ending spans on many threads at once."""

from __future__ import annotations

import sys
import threading
from collections import Counter, defaultdict
from concurrent.futures import ThreadPoolExecutor

import pytest
from opentelemetry import context, trace
from opentelemetry.sdk.trace import SpanLimits
from stall_pipeline import (
    STYLES,
    Agent,
    Call,
    Pipeline,
    events,
    make_pipeline,
    stall,
    stall_values,
)

from otel_stall.core.stall_attributes import is_escalation
from otel_stall.semconv import StallAttributes as S
from otel_stall.semconv import StallEventAttributes as E

RUNS = 200
THREADS = 32


def _calls(i: int) -> int:
    return 1 + i % 6


def _expected_verdict(k: int) -> str:
    # 1-2 identical calls: ok (a refusal is not a stall); 3-4: repeat warn; 5+: repeat break.
    return "ok" if k <= 2 else "break" if k >= 5 else "warn"


def test_concurrent_runs_lose_nothing_and_do_not_bleed() -> None:
    """32 threads x 200 runs: every span exported, each run's ledger is its own, state empties."""
    pipe = make_pipeline()

    def run(i: int) -> None:
        agent = Agent(pipe.tracer, STYLES[0], f"agent-{i}")
        with agent.run():
            for _ in range(_calls(i)):
                agent.round(Call("search", {"run": i}, {"hits": [i]}))

    with ThreadPoolExecutor(THREADS) as pool:
        list(pool.map(run, range(RUNS)))

    spans = pipe.spans()
    assert len(spans) == sum(1 + 2 * _calls(i) for i in range(RUNS))
    tools: dict[int, list[dict[str, object]]] = defaultdict(list)
    runs = {}
    for span in spans:
        trace_id = span.context.trace_id
        if span.name == "execute_tool search":
            tools[trace_id].append(stall_values(span))
        elif span.name.startswith("invoke_agent"):
            runs[trace_id] = (int(span.name.rsplit("-", 1)[1]), stall(span))
    assert len(runs) == RUNS
    signatures = set()
    for trace_id, (i, run_attrs) in runs.items():
        k = _calls(i)
        rows = tools[trace_id]
        assert [r[S.SEQ] for r in rows] == list(range(1, k + 1))
        assert [r[S.REPEAT_COUNT] for r in rows] == list(range(1, k + 1))
        assert len({r[S.SIGNATURE] for r in rows}) == 1
        signatures.add(rows[0][S.SIGNATURE])
        assert run_attrs[S.TOOL_CALLS] == k
        assert run_attrs[S.ROUNDS] == k
        assert run_attrs[S.VERDICT] == _expected_verdict(k)
    assert len(signatures) == RUNS
    stats = pipe.processor.stats()
    assert stats.active_runs == 0
    assert stats.tracked_spans == 0
    assert stats.finished_runs == RUNS
    assert stats.errors == 0
    assert pipe.metric_total("stall.runs") == RUNS


def test_parallel_tool_calls_of_one_run_from_many_threads() -> None:
    """Tool spans of one run ended concurrently are all counted once, seq 1..n."""
    pipe = make_pipeline()
    agent = Agent(pipe.tracer, STYLES[0])
    n = 256
    with agent.run():
        agent.model()
        parent = context.get_current()

        def call(j: int) -> None:
            token = context.attach(parent)  # worker threads do not inherit the context
            try:
                agent.tool(Call("read", {"doc": j}, {"text": j}))
            finally:
                context.detach(token)

        with ThreadPoolExecutor(THREADS) as pool:
            list(pool.map(call, range(n)))
    rows = [stall(s) for s in pipe.named("execute_tool read")]
    assert len(rows) == n
    assert sorted(r[S.SEQ] for r in rows) == list(range(1, n + 1))
    assert {r[S.ROUND] for r in rows} == {1}
    assert stall(pipe.one("invoke_agent researcher"))[S.TOOL_CALLS] == n
    assert pipe.processor.stats().tracked_spans == 0


def _race_one_run(workers: int, calls: int) -> tuple[Pipeline, int]:
    """An agent span that ends on this thread while tool spans of its run end on others.

    Returns the pipeline and the number of tool spans made. Every call is the same,
    so findings fire on every call: some while the run span is open, some as it ends.
    """
    pipe = make_pipeline(span_limits=SpanLimits(max_events=100_000))  # room for every finding
    agent = Agent(pipe.tracer, STYLES[0])
    name, attributes = agent.style.agent(agent.name)
    run_span = pipe.tracer.start_span(name, attributes=attributes)
    inside = trace.set_span_in_context(run_span)
    midway = threading.Event()

    def work() -> None:
        token = context.attach(inside)
        try:
            for i in range(calls):
                agent.tool(Call("search", {"q": "same"}, {"hits": [1]}))
                if i == 1:
                    midway.set()
        finally:
            context.detach(token)

    threads = [threading.Thread(target=work) for _ in range(workers)]
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # threads take turns within a span's end, not after many
    try:
        for thread in threads:
            thread.start()
        assert midway.wait(timeout=60), "no worker got two calls in"
        run_span.end()  # while the workers' tool spans are ending
        for thread in threads:
            thread.join()
    finally:
        sys.setswitchinterval(interval)
    return pipe, workers * calls


@pytest.mark.parametrize("attempt", range(40))
def test_a_run_span_ending_amid_its_tool_spans_keeps_the_books_straight(attempt: int) -> None:
    """Counted calls are seq 1..n, and each escalation delivered is on the run span exactly once."""
    pipe, made = _race_one_run(workers=4, calls=30)
    tools = pipe.named("execute_tool search")
    assert len(tools) == made  # every span exported, counted or not
    rows = [stall(s) for s in tools]
    seqs = sorted(int(r[S.SEQ]) for r in rows if S.SEQ in r)
    assert all(r == {} for r in rows if S.SEQ not in r)  # ended after the run: unchanged
    run_span = pipe.one("invoke_agent researcher")
    run_attrs = stall(run_span)
    assert seqs == list(range(1, run_attrs[S.TOOL_CALLS] + 1))
    on_span = Counter((e[E.KIND], e[E.SEQ]) for e in events(run_span))
    delivered = Counter((f.kind.value, f.seq) for f in pipe.findings if is_escalation(f))
    assert on_span == delivered
    assert pipe.processor.stats().active_runs == 0
    assert pipe.processor.stats().errors == 0
