"""#27 item 2, as the attack: a never-ending run whose calls return new list items.

Before, the seen-items set grew 2.6 MB a call while ``stats().bytes_held`` said
0.02 MiB, so the run was never evicted. Now every per-run cache counts in the
detector's byte estimate, which the live run table charges against
``max_state_bytes``, and the items are bounded on their own.
"""

from __future__ import annotations

import gc
import json
import tracemalloc

from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from stall_pipeline import STYLES, Agent, Call

from otel_stall.core.detector import RunDetector
from otel_stall.core.policy import StallPolicy
from otel_stall.core.records import ToolCall
from otel_stall.live.processor import StallSpanProcessor
from otel_stall.live.settings import ProcessorSettings

GENAI = STYLES[0]
ITEMS = 2_000


def _page(call: int) -> list[dict[str, object]]:
    """One result: ``ITEMS`` list items never seen before in the run."""
    return [{"id": f"doc-{call}-{i}", "title": f"result {i} of page {call}"} for i in range(ITEMS)]


def test_a_never_ending_list_run_is_evicted_within_the_bound() -> None:
    """Calls returning new items push the open run past max_state_bytes: it is evicted."""
    bound = 1 << 20  # the least max_state_bytes takes
    exporter = InMemorySpanExporter()
    processor = StallSpanProcessor(
        SimpleSpanProcessor(exporter), settings=ProcessorSettings(max_state_bytes=bound)
    )
    provider = TracerProvider()
    provider.add_span_processor(processor)
    tracer = provider.get_tracer("attack")
    agent = Agent(tracer, GENAI, "lister")
    name, attributes = GENAI.agent(agent.name)
    span = tracer.start_span(name, attributes=attributes)  # never ends
    gc.collect()
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        peak_held = 0
        for call in range(30):
            with trace.use_span(span):
                agent.round(Call("search", {"page": call}, _page(call)))
            exporter.clear()
            peak_held = max(peak_held, processor.stats().bytes_held)
        gc.collect()
        grown = tracemalloc.get_traced_memory()[0] - base
    finally:
        tracemalloc.stop()
    stats = processor.stats()
    assert stats.evicted_runs >= 1
    assert peak_held <= bound
    # What stays is within the bound (the evicted run's state is gone), not 78 MB.
    assert grown < 2 * bound
    assert stats.errors == 0


def test_the_estimate_follows_measured_memory_for_item_results() -> None:
    """The detector's byte estimate is within 15% of tracemalloc's for a list run of 10 calls."""
    policy = StallPolicy()
    # Decoded results (as from an OTLP kvlist): signed without the signer's text cache,
    # so the run owns its item digests, as a live run does once the span is gone.
    calls = [ToolCall("search", {"page": c}, _page(c)) for c in range(10)]
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        run = RunDetector(policy, keep=1000)
        for call in calls:
            run.tool_call(call)
        gc.collect()
        measured = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert abs(run.nbytes - measured) <= 0.15 * measured, (run.nbytes, measured)


def test_remembered_items_stay_bounded() -> None:
    """Items beyond twice ``max_remembered_calls`` are forgotten at once, not calls later."""
    policy = StallPolicy(max_remembered_calls=1_000)
    run = RunDetector(policy)
    sizes = []
    for c in range(20):
        call = ToolCall("search", {"page": c}, json.dumps(_page(c)))
        assert run.tool_call(call).row.new_fact
        sizes.append(run.nbytes)
    assert max(sizes) < 2 * 1_000 * 86 + 200_000
