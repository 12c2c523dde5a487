"""Stall findings as log-based events, with the span events beside them (``logs/dup``).

Run: ``.venv/bin/python examples/log_events.py``. An agent runs the same search
every round; each finding is printed once as the run span's event and once as
the log record the Logs API received, in the same run span's context, so a
logs backend can alert on ``event_name = "stall.detected"`` alone. Needs
opentelemetry-api 1.39 or later; on an older one only the span events appear.
"""

from __future__ import annotations

import json

from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import SimpleLogRecordProcessor
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from otel_stall import ProcessorSettings, StallSpanProcessor

try:  # the name since SDK 1.39
    from opentelemetry.sdk._logs.export import InMemoryLogRecordExporter as InMemoryLogs
except ImportError:
    from opentelemetry.sdk._logs.export import InMemoryLogExporter as InMemoryLogs


def main() -> None:
    spans, logs = InMemorySpanExporter(), InMemoryLogs()  # type: ignore[no-untyped-call]
    logger_provider = LoggerProvider()
    logger_provider.add_log_record_processor(SimpleLogRecordProcessor(logs))
    provider = TracerProvider()
    provider.add_span_processor(
        StallSpanProcessor(
            SimpleSpanProcessor(spans),
            settings=ProcessorSettings(event_signal="logs/dup"),
            logger_provider=logger_provider,
        )
    )
    tracer = provider.get_tracer("example")

    agent = {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "researcher"}
    tool = {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": "search",
        "gen_ai.tool.call.arguments": json.dumps({"query": "quarterly revenue"}),
        "gen_ai.tool.call.result": json.dumps({"hits": ["report-2024-q3.pdf"]}),
    }
    with tracer.start_as_current_span("invoke_agent researcher", attributes=agent):
        for _ in range(5):
            with tracer.start_as_current_span("chat", attributes={"gen_ai.operation.name": "chat"}):
                pass
            with tracer.start_as_current_span("execute_tool search", attributes=tool):
                pass

    (run,) = (s for s in spans.get_finished_spans() if s.name == "invoke_agent researcher")
    for event in run.events:
        attributes = event.attributes or {}
        kind, seq = str(attributes["stall.kind"]), str(attributes["stall.seq"])
        print(f"span event  {event.name}: {kind} at seq {seq}")
    for item in logs.get_finished_logs():
        record = item.log_record  # the API record: LogData (SDK 1.30) and ReadableLogRecord have it
        attributes = record.attributes or {}
        kind, seq = str(attributes["stall.kind"]), str(attributes["stall.seq"])
        same_span = record.span_id == run.context.span_id
        print(
            f"log record  {record.event_name}: {kind} at seq {seq}, "
            f"severity {record.severity_text}, run span: {same_span}"
        )


if __name__ == "__main__":
    main()
