"""The processor's overhead in the wiring its issue gives: a batch processor and OTLP/gRPC.

Pipeline A: TracerProvider -> BatchSpanProcessor -> OTLP/gRPC exporter -> a receiver.
Pipeline B: the same, with StallSpanProcessor wrapped around the batch processor.

``bench_processor.py`` times the cheapest pipelines there are, so its ratios are the
highest; this one times what an application actually runs. The receiver is
otel-stall's loopback sink in a process of its own, so that receiving is not
counted. The batch processor exports on its own thread, so each repetition runs
the workload and then ``force_flush()``, and what is compared is this process's
CPU time over both: every thread's (the application's, the batch worker's, gRPC's).
A and B run alternately, and the medians are compared. The workloads are
``bench_processor``'s. At the end the sink's span count must equal what both
pipelines sent, or the script fails: a lost span would flatter the ratio.

Run: ``.venv/bin/python bench/bench_processor_wiring.py [--quick]``.
"""

from __future__ import annotations

import gc
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Sequence

from bench_processor import TOOLS_PER_RUN, looping, non_tool, tool
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.trace import SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from opentelemetry.trace import Tracer

from otel_stall.live.processor import StallSpanProcessor

SINK = """
import sys
sys.path.insert(0, "tests")
from otlp_sink import OtlpSink
with OtlpSink(keep=False) as sink:
    print(sink.port, flush=True)
    sys.stdin.read()  # until the bench closes it
print(sink.count, flush=True)
"""
"""The receiver's process: prints its port, then, once its input closes, the spans it got."""


def provider(port: int, stall: bool) -> TracerProvider:
    """Pipeline A (``stall`` false) or B, exporting to the sink on ``port``."""
    batch: SpanProcessor = BatchSpanProcessor(
        OTLPSpanExporter(endpoint=f"127.0.0.1:{port}", insecure=True)
    )
    made = TracerProvider()
    made.add_span_processor(StallSpanProcessor(batch) if stall else batch)
    return made


def measure(
    port: int, work: Callable[[Tracer, int], None], size: int, reps: int
) -> tuple[float, float, float]:
    """Median CPU ns per repetition of A and of B, and their ratio."""
    pipelines = [provider(port, False), provider(port, True)]
    tracers = [p.get_tracer("bench") for p in pipelines]
    for made, tracer in zip(pipelines, tracers, strict=True):  # warm up both
        work(tracer, size)
        made.force_flush()
    times: list[list[int]] = [[], []]
    gc.collect()
    gc.disable()
    try:
        for i in range(reps):
            for side in (0, 1) if i % 2 == 0 else (1, 0):
                start = time.process_time_ns()
                work(tracers[side], size)
                pipelines[side].force_flush()
                times[side].append(time.process_time_ns() - start)
            if i % 20 == 19:
                gc.collect()
    finally:
        gc.enable()
        for made in pipelines:
            made.shutdown()
    a, b = statistics.median(times[0]), statistics.median(times[1])
    return a, b, b / a


def main(argv: Sequence[str]) -> int:
    reps = 41 if "--quick" in argv else 201
    rows: list[tuple[str, Callable[[Tracer, int], None], int, int, float | None]] = [
        ("non-tool spans", non_tool, 20, 10, 1.05),
        ("tool spans, 1.4 KB payload", tool, 2, TOOLS_PER_RUN + 1, 1.5),
        ("  same, a looping run", looping, 2, TOOLS_PER_RUN + 1, None),
    ]
    sink = subprocess.Popen(
        [sys.executable, "-c", SINK], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    assert sink.stdin is not None
    assert sink.stdout is not None
    port = int(sink.stdout.readline())
    sent = 0
    print("wiring: TracerProvider -> [StallSpanProcessor ->] BatchSpanProcessor -> OTLP/gRPC")
    print(f"{'workload':<30} {'plain cpu us':>13} {'stall cpu us':>13} {'ratio':>7} {'target':>7}")
    try:
        for name, work, size, spans_per_unit, target in rows:
            ma, mb, ratio = measure(port, work, size, reps)
            spans = size * spans_per_unit
            sent += 2 * (reps + 1) * spans
            verdict = "(info)" if target is None else "ok" if ratio <= target else "MISSED"
            print(
                f"{name:<30} {ma / spans / 1000:>13.2f} {mb / spans / 1000:>13.2f} "
                f"{ratio:>7.3f} {'' if target is None else '<=' + str(target):>7} {verdict}",
                flush=True,
            )
    finally:
        sink.stdin.close()
        received = int(sink.stdout.readline() or -1)
        sink.wait()
    print(f"spans sent {sent}, received by the sink {received}")
    return 0 if received == sent else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
