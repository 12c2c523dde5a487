"""Replay throughput against the cost of just parsing the same files, measured side by side.

Generates a span file (default 100k spans: agent, chat, tool and plain HTTP
spans) as length-prefixed protobuf and as OTLP/JSON lines in a temp dir, then
prints spans/s for:

- the floor: ``TracesData.ParseFromString`` plus reading every field the
  replay needs (binary), and ``orjson.loads`` plus a walk over the same
  fields (JSON);
- ``Replayer.analyse`` (the whole first pass: decode, conventions, hashing,
  run resolution, detection), as ``otel-stall replay FILE`` runs it (report
  only), and as the first pass of ``--out`` runs it (also building every
  span's ``stall.*`` attributes);

- a user's own 40-line orjson + xxhash loop finder (``bench/ledger.py``) on the
  OTLP/JSON file, which the replay must beat;

and the ratio replay/floor (budgets in ``budgets.py``: OTLP/JSON and binary),
in the process's CPU time (``time.process_time``), steadier than the wall clock
on a shared machine, and in instructions (callgrind, one process counting each
pass in its own window, on a smaller file). It
also times the second pass (``--out``) and the two ways to re-export to an OTLP
endpoint (the protobuf messages directly vs. rebuilding SDK spans for the
SDK's OTLP exporter), against a gRPC receiver on loopback.

``--rss N`` measures the peak RSS of replaying an N-span file in a fresh
subprocess (``VmHWM``), e.g. ``--rss 164000`` (the budget's capture size).
Prints a markdown section;
``--quick`` replays 20k spans, best of 3.
"""

from __future__ import annotations

import argparse
import importlib
import io
import json
import resource
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import callgrind
import orjson
from budgets import BUDGETS, record
from ledger import ledger
from opentelemetry.proto.trace.v1.trace_pb2 import TracesData

from otel_stall import Replayer
from otel_stall.otlp.encode import proto_to_json, python_to_any_value

SPANS_PER_MESSAGE = 512
BASELINE = (
    "import otel_stall; otel_stall.Replayer; "
    "print([l.split()[1] for l in open('/proc/self/status') if l.startswith('VmHWM')][0])"
)
PAYLOAD_KEYS = frozenset({"gen_ai.tool.call.arguments", "gen_ai.tool.call.result"})
# Realistic text: no trailing or doubled whitespace (which sends the normaliser down
# its slower canonicalising walk; bench_detector.py's noisy mix times that case).
ARGS = {"query": " ".join(["how do I configure the collector file exporter"] * 5), "limit": 10}
RESULT = {
    "hits": [
        {"title": f"doc {i}", "text": " ".join(["lorem ipsum dolor sit amet"] * 6)}
        for i in range(5)
    ]
}


def _span(
    data: Any, trace: int, index: int, parent: int | None, name: str, attrs: dict[str, Any]
) -> None:
    rs = data.resource_spans[0]
    span = rs.scope_spans[0].spans.add()
    span.trace_id = trace.to_bytes(16, "big")
    span.span_id = (trace * 1000 + index).to_bytes(8, "big")
    if parent is not None:
        span.parent_span_id = (trace * 1000 + parent).to_bytes(8, "big")
    span.name = name
    span.kind = 1
    span.start_time_unix_nano = 1_700_000_000_000_000_000 + trace * 10**9 + index * 10**6
    span.end_time_unix_nano = span.start_time_unix_nano + 500_000
    for key, value in attrs.items():
        python_to_any_value(value, span.attributes.add(key=key).value)


def _trace_spans(data: Any, trace: int) -> int:
    """One agent trace of 20 spans: agent, 6 chat, 6 tool (4 of them repeats), 7 HTTP."""
    _span(
        data,
        trace,
        0,
        None,
        "invoke_agent a",
        {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "a"},
    )
    index = 1
    for round_ in range(6):
        _span(
            data,
            trace,
            index,
            0,
            "chat m",
            {"gen_ai.operation.name": "chat", "gen_ai.request.model": "m"},
        )
        index += 1
        args = dict(ARGS, page=min(round_, 2))
        _span(
            data,
            trace,
            index,
            0,
            "execute_tool search",
            {
                "gen_ai.operation.name": "execute_tool",
                "gen_ai.tool.name": "search",
                "gen_ai.tool.call.arguments": json.dumps(args),
                "gen_ai.tool.call.result": json.dumps(RESULT),
            },
        )
        tool = index
        index += 1
        _span(
            data,
            trace,
            index,
            tool,
            "GET",
            {
                "http.request.method": "GET",
                "http.response.status_code": 200,
                "url.full": "https://example.com/search?q=x",
            },
        )
        index += 1
    _span(
        data,
        trace,
        index,
        None,
        "GET /health",
        {"http.request.method": "GET", "http.route": "/health"},
    )
    return index + 1


def generate(directory: Path, spans: int) -> tuple[Path, Path]:
    """Write ``spans`` spans as length-prefixed protobuf and OTLP/JSON lines."""
    binary, jsonl = directory / f"spans-{spans}.binpb", directory / f"spans-{spans}.jsonl"
    written = 0
    trace = 1
    with binary.open("wb") as fb, jsonl.open("wb") as fj:
        while written < spans:
            data = TracesData()
            rs = data.resource_spans.add()
            python_to_any_value("bench", rs.resource.attributes.add(key="service.name").value)
            rs.scope_spans.add().scope.name = "bench"
            count = 0
            while count < SPANS_PER_MESSAGE and written + count < spans:
                count += _trace_spans(data, trace)
                trace += 1
            written += count
            payload = data.SerializeToString()
            fb.write(len(payload).to_bytes(4, "big") + payload)
            fj.write(orjson.dumps(proto_to_json(data)) + b"\n")
    return binary, jsonl


def floor_binary(path: Path) -> int:
    """ParseFromString plus reading the fields the replay needs."""
    n = 0
    with path.open("rb") as f:
        while prefix := f.read(4):
            data = TracesData.FromString(f.read(int.from_bytes(prefix, "big")))
            for rs in data.resource_spans:
                for ss in rs.scope_spans:
                    for span in ss.spans:
                        _ = (
                            span.trace_id.hex(),
                            span.span_id.hex(),
                            span.parent_span_id.hex(),
                            span.name,
                        )
                        _ = (span.start_time_unix_nano, span.end_time_unix_nano, span.status.code)
                        for kv in span.attributes:
                            value = kv.value
                            _ = (
                                kv.key,
                                getattr(value, value.WhichOneof("value") or "string_value"),
                            )
                        n += 1
    return n


def floor_json(path: Path) -> int:
    """orjson.loads plus a walk over the same fields."""
    n = 0
    with path.open("rb") as f:
        for line in f:
            obj = orjson.loads(line)
            for rs in obj["resourceSpans"]:
                for ss in rs["scopeSpans"]:
                    for span in ss["spans"]:
                        _ = (
                            span["traceId"],
                            span["spanId"],
                            span.get("parentSpanId"),
                            span["name"],
                        )
                        _ = (
                            int(span["startTimeUnixNano"]),
                            int(span["endTimeUnixNano"]),
                            span.get("status"),
                        )
                        for kv in span.get("attributes", ()):
                            _ = (kv["key"], next(iter(kv["value"].values())))
                        n += 1
    return n


def floor_binary_payloads(path: Path) -> int:
    """The binary floor plus parsing each tool span's JSON arguments and result (orjson)."""
    n = 0
    with path.open("rb") as f:
        while prefix := f.read(4):
            data = TracesData.FromString(f.read(int.from_bytes(prefix, "big")))
            for rs in data.resource_spans:
                for ss in rs.scope_spans:
                    for span in ss.spans:
                        _ = (span.trace_id.hex(), span.span_id.hex(), span.parent_span_id.hex())
                        _ = (span.name, span.start_time_unix_nano, span.end_time_unix_nano)
                        _ = span.status.code
                        for kv in span.attributes:
                            value = kv.value
                            item = getattr(value, value.WhichOneof("value") or "string_value")
                            if kv.key in PAYLOAD_KEYS:
                                orjson.loads(item)
                        n += 1
    return n


def floor_json_payloads(path: Path) -> int:
    """The JSON floor plus parsing each tool span's JSON arguments and result (orjson)."""
    n = 0
    with path.open("rb") as f:
        for line in f:
            obj = orjson.loads(line)
            for rs in obj["resourceSpans"]:
                for ss in rs["scopeSpans"]:
                    for span in ss["spans"]:
                        _ = (span["traceId"], span["spanId"], span.get("parentSpanId"))
                        _ = (span["name"], span.get("status"))
                        _ = (int(span["startTimeUnixNano"]), int(span["endTimeUnixNano"]))
                        for kv in span.get("attributes", ()):
                            item = next(iter(kv["value"].values()))
                            if kv["key"] in PAYLOAD_KEYS:
                                orjson.loads(item)
                        n += 1
    return n


def decode_only(path: Path) -> int:
    """Our decoding alone (protobuf or JSON to SpanRecord), without detection.

    Internal API: a checkout that moved it gives 0 spans, and the column shows a dash.
    """
    try:
        from otel_stall.core.errors import InputError
        from otel_stall.offline.readers import read_units
        from otel_stall.otlp.decode import spans_from_json, spans_from_proto
    except ImportError:
        return 0

    errors: list[InputError] = []
    n = 0
    with path.open("rb") as f:
        for unit in read_units(str(path), f, errors):
            if unit.proto is not None:
                n += sum(1 for _ in spans_from_proto(TracesData.FromString(unit.proto)))
            else:
                n += sum(1 for _ in spans_from_json(unit.json))
    return n


def replay_pass(path: Path) -> int:
    """``otel-stall replay FILE``: the report only (no --out, so no stall.* attributes kept)."""
    result = Replayer(pause_gc=True).analyse([str(path)], keep_enrichment=False)
    assert not result.errors, result.errors[:3]
    return result.spans


def replay_keep_pass(path: Path) -> int:
    """The first pass of ``--out`` and ``--export-otlp``: also builds the stall.* attributes."""
    result = Replayer(pause_gc=True).analyse([str(path)])
    assert not result.errors, result.errors[:3]
    return result.spans


def ledger_pass(path: Path) -> int:
    """The user's own script (``bench/ledger.py``) on the OTLP/JSON file."""
    return ledger(str(path))[0]


def out_pass(path: Path) -> int:
    replayer = Replayer(pause_gc=True)
    result = replayer.analyse([str(path)])
    return replayer.write_json_lines(result, [str(path)], io.BytesIO())


def best(fn: Callable[[Path], int], path: Path, repeat: int) -> tuple[float, int]:
    times = []
    count = 0
    for _ in range(repeat):
        start = time.process_time()
        count = fn(path)
        times.append(time.process_time() - start)
    return min(times), count


def interleaved(
    fns: list[Callable[[Path], int]], path: Path, repeat: int
) -> list[tuple[float, int]]:
    """Best time of each function, run in turns so that machine noise hits them alike."""
    times: list[list[float]] = [[] for _ in fns]
    counts = [0] * len(fns)
    for _ in range(repeat):
        for i, fn in enumerate(fns):
            start = time.process_time()
            counts[i] = fn(path)
            times[i].append(time.process_time() - start)
    return [(min(t), c) for t, c in zip(times, counts, strict=True)]


def export_comparison(path: Path, limit: int) -> None:
    """Direct protobuf export vs. rebuilding SDK spans for the SDK's gRPC exporter."""
    sys.path.insert(0, str(Path(__file__).parent.parent / "tests"))
    from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import ReadableSpan
    from opentelemetry.sdk.util.instrumentation import InstrumentationScope
    from opentelemetry.trace import SpanContext, SpanKind, TraceFlags

    from otel_stall.offline.send import OtlpSender
    from otel_stall.otlp.decode import attributes_from_proto

    messages = []
    with path.open("rb") as f:
        total = 0
        while (prefix := f.read(4)) and total < limit:
            data = TracesData.FromString(f.read(int.from_bytes(prefix, "big")))
            messages.append(data)
            total += sum(len(ss.spans) for rs in data.resource_spans for ss in rs.scope_spans)

    def direct(url: str) -> int:
        sender = OtlpSender(url)
        for data in messages:
            sender.add(data)
        sender.close()
        return sender.sent

    def sdk(url: str) -> int:
        exporter = OTLPSpanExporter(endpoint=url.split("://")[1], insecure=True)
        sent = 0
        for data in messages:
            batch = []
            for rs in data.resource_spans:
                resource = Resource(attributes_from_proto(rs.resource.attributes))
                for ss in rs.scope_spans:
                    scope = InstrumentationScope(ss.scope.name, ss.scope.version)
                    for s in ss.spans:
                        ctx = SpanContext(
                            int.from_bytes(s.trace_id, "big"),
                            int.from_bytes(s.span_id, "big"),
                            True,
                            TraceFlags(1),
                        )
                        parent = (
                            SpanContext(
                                int.from_bytes(s.trace_id, "big"),
                                int.from_bytes(s.parent_span_id, "big"),
                                True,
                            )
                            if s.parent_span_id
                            else None
                        )
                        batch.append(
                            ReadableSpan(
                                name=s.name,
                                context=ctx,
                                parent=parent,
                                resource=resource,
                                attributes=attributes_from_proto(s.attributes),
                                kind=SpanKind(s.kind - 1 if s.kind else 0),
                                start_time=s.start_time_unix_nano,
                                end_time=s.end_time_unix_nano,
                                instrumentation_scope=scope,
                            )
                        )
            exporter.export(batch)
            sent += len(batch)
        exporter.shutdown()
        return sent

    receivers: Any = importlib.import_module("otlp_receiver")  # tests/otlp_receiver.py
    with receivers.GrpcReceiver() as receiver:
        results = {}
        for name, fn in (
            ("direct protobuf", direct),
            ("SDK exporter", sdk),
            ("direct protobuf ", direct),
        ):
            start = time.perf_counter()
            count = fn(receiver.endpoint)
            results[name.strip()] = count / (time.perf_counter() - start)
        ratio = results["direct protobuf"] / results["SDK exporter"]
        print(
            f"\nRe-export of {total:,} replayed spans to a gRPC receiver on loopback: the "
            f"decoded messages sent directly (what `--export-otlp` does) "
            f"{results['direct protobuf']:,.0f} spans/s; rebuilding SDK spans for the SDK's "
            f"`OTLPSpanExporter` {results['SDK exporter']:,.0f} spans/s ({ratio:.1f}x slower)."
        )


def _peak_kib() -> int:
    """Peak RSS of this process: VmHWM, since ru_maxrss is inherited from the forking parent."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


def rss_child(path: str, keep: bool) -> None:
    result = Replayer(pause_gc=True).analyse([path], keep_enrichment=keep)
    peak = _peak_kib()
    print(json.dumps({"spans": result.spans, "runs": len(result.reports), "peak_rss_kib": peak}))


def measure_rss(spans: int, directory: Path) -> None:
    """Peak RSS of the replay of a ``spans``-span binary capture, each way in a fresh process."""
    binary, jsonl = generate(directory, spans)
    jsonl.unlink()
    baseline = subprocess.run(
        [sys.executable, "-c", BASELINE], capture_output=True, check=True, text=True
    )
    for keep, what in ((False, "report only"), (True, "with --out/--export enrichment kept")):
        proc = subprocess.run(
            [sys.executable, __file__, "--rss-child", str(binary), *(["--keep"] if keep else [])],
            capture_output=True,
            check=True,
            text=True,
        )
        info = json.loads(proc.stdout)
        mb = binary.stat().st_size / 1e6
        peak = info["peak_rss_kib"] * 1024 / 1e6
        budget = BUDGETS["replay.rss"]
        within = f" (budget {budget.text}: {'within' if budget.met(peak) else 'over'})"
        print(
            f"\nPeak RSS replaying {info['spans']:,} spans ({mb:.0f} MB binary, "
            f"{info['runs']:,} runs) in a fresh process, {what}: "
            f"**{peak:.0f} MB**{'' if keep else within} "
            f"(the interpreter and imports alone: {int(baseline.stdout) * 1024 / 1e6:.0f} MB)."
        )
        if not keep:
            record("replay.rss", value=peak, spans=info["spans"])


def compare_to_floor(
    key: str, path: Path, floor: Callable[[Path], int], spans: int, repeat: int
) -> tuple[str, float]:
    """One table row for one format: the floor, our decoding, the replay and the ratio.

    Also the ledger script's time over the floor's, for OTLP/JSON (0 for binary).
    """
    payloads = floor_binary_payloads if floor is floor_binary else floor_json_payloads
    fns = [floor, decode_only, replay_pass, replay_keep_pass, payloads]
    if floor is floor_json:
        fns.append(ledger_pass)
    timed = interleaved(fns, path, repeat)
    (floor_s, n), (decode_s, d), (replay_s, m), (keep_s, k), (payload_s, _) = timed[:5]
    assert n == m == k == spans, (n, m, k)
    ratio = replay_s / floor_s
    budget = BUDGETS[key]
    verdict = "within" if budget.met(ratio) else "over"
    user = timed[5][0] / floor_s if len(timed) > 5 else 0.0
    record(key, value=ratio, micros_span=(replay_s - floor_s) / spans * 1e6, ledger=user or None)
    decoding = f"{n / decode_s:,.0f} ({decode_s / floor_s:.2f}x)" if d else DASH
    return (
        f"| {n / floor_s:,.0f} | {decoding} "
        f"| {m / replay_s:,.0f} | **{ratio:.2f}x** | {budget.text} | {verdict} "
        f"| {keep_s / floor_s:.2f}x | {replay_s / payload_s:.2f}x "
        f"| {f'{user:.2f}x' if user else DASH} |"
    ), user


DASH = "\N{EN DASH}"
COUNTED = (
    ("binary floor", floor_binary, "binary"),
    ("binary replay", replay_pass, "binary"),
    ("OTLP/JSON floor", floor_json, "json"),
    ("OTLP/JSON replay", replay_pass, "json"),
    ("the user's script", ledger_pass, "json"),
)
"""The passes counted under callgrind, each in its window, in one process."""


def count_child(binary: str, jsonl: str) -> None:
    """Under callgrind: each counted pass once, in its own window."""
    files = {"binary": Path(binary), "json": Path(jsonl)}
    for _, fn, kind in COUNTED:
        with callgrind.window():
            fn(files[kind])


def instructions(directory: Path, spans: int) -> None:
    """The replay over its floor in instructions, on a ``spans``-span file of each format."""
    if not callgrind.available():
        print("\nvalgrind is not installed here: no instruction counts.")
        return
    print(f"replay: callgrind on {spans:,} spans", file=sys.stderr, flush=True)
    small = directory / "counted"
    small.mkdir()
    binary, jsonl = generate(small, spans)
    counts = dict(
        zip(
            (name for name, _, _ in COUNTED),
            callgrind.count(
                [sys.executable, __file__, "--count-child", str(binary), str(jsonl)], len(COUNTED)
            ),
            strict=True,
        )
    )
    binary_ratio = counts["binary replay"] / counts["binary floor"]
    json_ratio = counts["OTLP/JSON replay"] / counts["OTLP/JSON floor"]
    script = counts["the user's script"]
    user = script / counts["OTLP/JSON floor"]
    print(
        f"\nIn instructions (callgrind, {spans:,} spans, each pass counted in one process): "
        f"binary floor {counts['binary floor'] / spans / 1000:.1f}k per span, replay "
        f"{counts['binary replay'] / spans / 1000:.1f}k, **{binary_ratio:.2f}x**; OTLP/JSON "
        f"floor {counts['OTLP/JSON floor'] / spans / 1000:.1f}k, replay "
        f"{counts['OTLP/JSON replay'] / spans / 1000:.1f}k, **{json_ratio:.2f}x**; the "
        f"user's script {script / spans / 1000:.1f}k, "
        f"{user:.2f}x."
    )
    record("replay.binary", instructions=binary_ratio)
    record("replay.json", instructions=json_ratio, instructions_ledger=user)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true", help="20k spans, best of 3")
    parser.add_argument("--spans", type=int, default=None)
    parser.add_argument("--repeat", type=int, default=None)
    parser.add_argument("--rss", type=int, metavar="N", help="also measure peak RSS for N spans")
    parser.add_argument("--rss-child", help=argparse.SUPPRESS)
    parser.add_argument("--count-child", nargs=2, help=argparse.SUPPRESS)
    parser.add_argument("--counted", type=int, default=None, help="spans counted by callgrind")
    parser.add_argument("--keep", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--skip-export", action="store_true")
    args = parser.parse_args()
    if args.rss_child:
        rss_child(args.rss_child, args.keep)
        return 0
    if args.count_child:
        count_child(*args.count_child)
        return 0
    spans = args.spans or (20_000 if args.quick else 100_000)
    repeat = args.repeat or (3 if args.quick else 5)
    with tempfile.TemporaryDirectory(prefix="otel-stall-bench-") as tmp:
        directory = Path(tmp)
        binary, jsonl = generate(directory, spans)
        print("## Replay: throughput against the parse floor\n")
        print(
            f"{spans:,} spans (traces of 20: one `invoke_agent`, 6 `chat`, 6 `execute_tool` "
            "with about 0.3 KB of arguments and 1.1 KB of result, 7 plain HTTP spans; 512 "
            f"spans per message) as length-prefixed protobuf ({binary.stat().st_size / 1e6:.0f} "
            f"MB) and OTLP/JSON lines ({jsonl.stat().st_size / 1e6:.0f} MB), best of {repeat} "
            "interleaved runs, by CPU time. The floor is parsing the file and reading every field"
            " the replay needs (`ParseFromString`, or `orjson.loads` and a dict walk). The replay"
            " is what `otel-stall replay FILE` runs: the whole first pass, decoding, conventions,"
            " signing, run resolution and detection, for the report. Also given, as multiples of "
            "the floor's time: the first pass of `--out`, which also keeps every tool span's "
            "`stall.*` attributes, the replay against a floor that also parses the tool "
            "payloads' JSON, and a user's own 40-line script (`bench/ledger.py`: orjson, sorted "
            "keys, xxhash, a ledger per trace) on the same OTLP/JSON file.\n"
        )
        print(
            "| format | floor, spans/s | our decoding alone, spans/s | replay, spans/s "
            "| replay / floor | budget | | with `stall.*` kept for `--out` "
            "| replay / floor with payload JSON | the user's script / floor |"
        )
        print("|---|---:|---:|---:|---:|---:|---|---:|---:|---:|")
        for label, key, path, floor in (
            ("binary", "replay.binary", binary, floor_binary),
            ("OTLP/JSON", "replay.json", jsonl, floor_json),
        ):
            print(f"replay: {label}", file=sys.stderr, flush=True)
            line, _ = compare_to_floor(key, path, floor, spans, repeat)
            print(f"| {label} {line}", flush=True)
        out_s, written = best(out_pass, binary, 1)
        print(
            f"\n`replay --out` (both passes, binary in, OTLP/JSON out): "
            f"{written / out_s:,.0f} spans/s."
        )
        if not args.skip_export:
            export_comparison(binary, min(spans, 20_000))
        instructions(directory, args.counted or (2_000 if args.quick else 5_000))
        if args.rss:
            print("replay: peak RSS", file=sys.stderr, flush=True)
            measure_rss(args.rss, directory)
        print()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
