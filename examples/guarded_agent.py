"""An agent loop that asks the live gate before each tool call and stops at ``break``.

Run: ``.venv/bin/python examples/guarded_agent.py``. The fake tool always returns
the same page, so the guard refuses the second identical call and the run ends
with a ``break`` verdict instead of burning its budget.
"""

from __future__ import annotations

import json

from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from otel_stall import StallDetected, StallPolicy, StallSpanProcessor
from otel_stall.offline.report import score_explanation
from otel_stall.semconv import StallAttributes


def fetch(url: str) -> dict[str, str]:
    """A tool that keeps returning the same document."""
    return {"url": url, "title": "OpenTelemetry spans", "body": "A span is one operation."}


def main() -> None:
    exporter = InMemorySpanExporter()
    processor = StallSpanProcessor(SimpleSpanProcessor(exporter), policy=StallPolicy())
    provider = TracerProvider()
    provider.add_span_processor(processor)
    tracer = provider.get_tracer("example")
    guard = processor.guard

    told: set[str] = set()
    stopped: StallDetected | None = None
    with tracer.start_as_current_span(
        "invoke_agent researcher", attributes={"gen_ai.operation.name": "invoke_agent"}
    ):
        for turn in range(1, 9):
            with tracer.start_as_current_span("chat", attributes={"gen_ai.operation.name": "chat"}):
                pass
            args = {"url": "https://example.com/spans"}
            refusal = guard.before_call("fetch", args)
            attributes: dict[str, str | bool] = {
                "gen_ai.operation.name": "execute_tool",
                "gen_ai.tool.name": "fetch",
                "gen_ai.tool.call.arguments": json.dumps(args),
            }
            if refusal is not None:
                again = refusal.message in told
                told.add(refusal.message)
                print(f"turn {turn}: refused fetch {json.dumps(args)}", end="")
                print(" again" if again else f" -> {refusal.message}")
                attributes[StallAttributes.REFUSED] = True
                with tracer.start_as_current_span("execute_tool fetch", attributes=attributes):
                    pass
            else:
                result = fetch(args["url"])
                attributes["gen_ai.tool.call.result"] = json.dumps(result)
                with tracer.start_as_current_span("execute_tool fetch", attributes=attributes):
                    pass
                print(f"turn {turn}: ran fetch {json.dumps(args)}")
            try:
                guard.raise_if_stalled()
            except StallDetected as stalled_now:
                stopped = stalled_now
                print(f"stopping: {stalled_now}")
                break
    provider.shutdown()
    run_span = exporter.get_finished_spans()[-1]
    verdict = (run_span.attributes or {}).get(StallAttributes.VERDICT)
    explained = "" if stopped is None else f" ({score_explanation(stopped.report)})"
    print(f"verdict: {verdict}{explained}")


if __name__ == "__main__":
    main()
