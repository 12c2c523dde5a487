"""Generate the golden replay inputs: one agent dataset in every stored format, plus hostile files.

Run ``python tests/golden/make_golden.py [DIR]`` (default: next to this script).
The output is deterministic (fixed ids, times and shuffling; gzip mtime 0), so
a test can check that the committed files are exactly what this script writes.

The dataset holds four interleaved traces, split across several messages, two
resources and two scopes, with spans listed out of order:

- ``researcher`` (GenAI conventions) fetches the same page again and again: it
  breaks;
- ``librarian`` (OpenInference) passes structured kvlist arguments and makes
  progress: ok;
- a trace with no agent span whose OpenLLMetry tool keeps failing: escalate;
- a trace of plain HTTP spans: no run at all.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import random
import sys
from pathlib import Path
from typing import Any

import orjson
import zstandard
from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans, Span, Status, TracesData

from otel_stall.otlp.encode import proto_to_json, python_to_any_value

BASE_NS = 1_700_000_000_000_000_000
PAGE = {"url": "https://docs.example.com/otel/spans", "text": "Spans describe one operation."}


def _hex(label: str, size: int) -> str:
    return hashlib.sha256(label.encode()).hexdigest()[: size * 2]


class TraceBuilder:
    """Builds one trace's spans on a simple timeline (children inside parents)."""

    def __init__(self, label: str, start_ns: int) -> None:
        self.trace_id = _hex(label, 16)
        self.label = label
        self.now = start_ns
        self.spans: list[Span] = []
        self._open: dict[str, Span] = {}

    def open(self, name: str, parent: str | None, attrs: dict[str, Any], kind: int = 1) -> str:
        span = Span(
            trace_id=bytes.fromhex(self.trace_id),
            span_id=bytes.fromhex(_hex(f"{self.label}/{len(self.spans)}", 8)),
            parent_span_id=bytes.fromhex(parent) if parent else b"",
            name=name,
            kind=kind,  # type: ignore[arg-type]
            start_time_unix_nano=self.now,
        )
        for key, value in attrs.items():
            python_to_any_value(value, span.attributes.add(key=key).value)
        self.spans.append(span)
        self.now += 1_000_000
        span_id: str = span.span_id.hex()
        self._open[span_id] = span
        return span_id

    def close(self, span_id: str, attrs: dict[str, Any] | None = None, error: bool = False) -> None:
        span = self._open.pop(span_id)
        for key, value in (attrs or {}).items():
            python_to_any_value(value, span.attributes.add(key=key).value)
        if error:
            span.status.code = Status.STATUS_CODE_ERROR
            span.status.message = "tool failed"
        span.end_time_unix_nano = self.now
        self.now += 1_000_000

    def leaf(self, name: str, parent: str | None, attrs: dict[str, Any], kind: int = 3) -> str:
        span_id = self.open(name, parent, attrs, kind)
        self.close(span_id)
        return span_id


def researcher() -> TraceBuilder:
    b = TraceBuilder("researcher", BASE_NS)
    agent = b.open(
        "invoke_agent researcher",
        None,
        {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "researcher"},
    )
    calls: list[tuple[str, dict[str, Any], Any]] = [
        ("search", {"query": "otel span basics"}, {"hits": [PAGE["url"]]})
    ]
    calls += [("fetch", {"url": PAGE["url"]}, PAGE)] * 6
    for tool, args, result in calls:
        b.leaf("chat demo-model", agent, {"gen_ai.operation.name": "chat"})
        span = b.open(
            f"execute_tool {tool}",
            agent,
            {
                "gen_ai.operation.name": "execute_tool",
                "gen_ai.tool.name": tool,
                "gen_ai.tool.call.arguments": json.dumps(args),
            },
        )
        b.leaf("GET", span, {"http.request.method": "GET", "http.response.status_code": 200})
        b.close(span, {"gen_ai.tool.call.result": json.dumps(result)})
    b.leaf("chat demo-model", agent, {"gen_ai.operation.name": "chat"})
    b.close(agent)
    return b


def librarian() -> TraceBuilder:
    b = TraceBuilder("librarian", BASE_NS + 500_000)
    agent = b.open(
        "librarian", None, {"openinference.span.kind": "AGENT", "gen_ai.agent.name": "librarian"}
    )
    for page in range(1, 5):
        b.leaf("llm", agent, {"openinference.span.kind": "LLM", "llm.model_name": "m"})
        span = b.open(
            "lookup",
            agent,
            {
                "openinference.span.kind": "TOOL",
                "tool.name": "lookup",
                # Structured (kvlist) arguments, which only OTLP can carry.
                "input.value": {"shelf": page, "tags": ["a", "b"], "exact": True},
                "sample.ratio": 0.5,
                "sample.blob": b"\x00\x01",
            },
        )
        b.close(span, {"output.value": json.dumps({"books": [f"book-{page}"]})})
    b.close(agent)
    return b


def flaky_tool() -> TraceBuilder:
    b = TraceBuilder("flaky", BASE_NS + 250_000)
    root = b.open("POST /agent", None, {"http.request.method": "POST"}, kind=2)
    for attempt in range(5):
        span = b.open(
            "deploy.tool",
            root,
            {
                "traceloop.span.kind": "tool",
                "traceloop.entity.name": "deploy",
                "traceloop.entity.input": json.dumps({"service": "api", "try": attempt}),
            },
        )
        b.close(span, {"traceloop.entity.output": "{}"}, error=True)
    b.close(root)
    return b


def plain_http() -> TraceBuilder:
    b = TraceBuilder("plain", BASE_NS + 750_000)
    root = b.open("GET /health", None, {"http.request.method": "GET"}, kind=2)
    b.leaf("SELECT 1", root, {"db.system": "postgresql"})
    b.close(root, {"http.response.status_code": 200})
    return b


def messages() -> list[TracesData]:
    """The dataset as export messages: interleaved traces, spans out of order."""
    rng = random.Random(4)
    spans = [s for b in (researcher(), librarian(), flaky_tool(), plain_http()) for s in b.spans]
    rng.shuffle(spans)
    out = []
    for index in range(0, len(spans), 9):
        data = TracesData()
        chunk = spans[index : index + 9]
        for service in ("agents", "tools"):
            rs: ResourceSpans = data.resource_spans.add()
            python_to_any_value(service, rs.resource.attributes.add(key="service.name").value)
            ss = rs.scope_spans.add()
            ss.scope.name = f"golden.{service}"
            ss.scope.version = "1.0"
            half = chunk[: len(chunk) // 2] if service == "agents" else chunk[len(chunk) // 2 :]
            ss.spans.extend(half)
        out.append(data)
    return out


def json_lines(msgs: list[TracesData]) -> bytes:
    return b"".join(orjson.dumps(proto_to_json(m)) + b"\n" for m in msgs)


def length_prefixed(msgs: list[TracesData], compress: bool = False) -> bytes:
    out = io.BytesIO()
    zstd = zstandard.ZstdCompressor(level=3)
    for m in msgs:
        payload = m.SerializeToString(deterministic=True)
        if compress:
            payload = zstd.compress(payload)
        out.write(len(payload).to_bytes(4, "big"))
        out.write(payload)
    return out.getvalue()


def pretty_document(msgs: list[TracesData]) -> bytes:
    merged = TracesData()
    for m in msgs:
        merged.resource_spans.extend(m.resource_spans)
    return json.dumps(proto_to_json(merged), indent=2).encode() + b"\n"


def tool_calls() -> bytes:
    """The researcher's calls in the reference's JSONL tool-call format."""
    lines: list[dict[str, Any]] = []
    calls: list[tuple[str, dict[str, Any], Any]] = [
        ("search", {"query": "otel span basics"}, {"hits": [PAGE["url"]]})
    ]
    calls += [("fetch", {"url": PAGE["url"]}, PAGE)] * 6
    for seq, (tool, args, result) in enumerate(calls, 1):
        lines.append({"type": "model_call"})
        lines.append(
            {
                "type": "tool_call",
                "seq": seq,
                "tool": tool,
                "args": args,
                "result": result,
                "status": "ok",
            }
        )
    lines.append({"type": "model_call"})
    return b"".join(orjson.dumps(line) + b"\n" for line in lines)


def hostile(msgs: list[TracesData]) -> dict[str, bytes]:
    """Each file: the whole dataset plus one kind of damage (or variation)."""
    lines = json_lines(msgs).splitlines(keepends=True)
    binary = length_prefixed(msgs)
    files: dict[str, bytes] = {}
    # The last line cut in half, as when a collector is killed mid-write.
    extra = orjson.dumps(proto_to_json(msgs[0]))
    files["truncated_last_line.jsonl"] = b"".join(lines) + extra[: len(extra) // 2]
    # Valid messages, then a length prefix claiming far more bytes than remain.
    files["corrupt_length_prefix.binpb"] = binary + b"\x7f\xff\xff\xf0" + b"\x0a\x02garbage"
    # A framed message whose payload is not protobuf; framing goes on after it.
    garbage = b"\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff"
    first = len(msgs[0].SerializeToString(deterministic=True)) + 4
    files["corrupt_payload.binpb"] = (
        binary[:first] + len(garbage).to_bytes(4, "big") + garbage + binary[first:]
    )
    # One line with bytes that are not UTF-8 inside a string.
    bad = b'{"resourceSpans":[{"scopeSpans":[{"spans":[{"name":"caf\xe9","traceId":""}]}]}]}\n'
    files["invalid_utf8.jsonl"] = lines[0] + bad + b"".join(lines[1:])
    # Wrong types: a bad timestamp, attributes that are not a list, a span that
    # is not an object, and resourceSpans that is not a list.
    tid = _hex("wrong", 16)
    wrong = [
        {
            "resourceSpans": [
                {
                    "scopeSpans": [
                        {
                            "spans": [
                                {
                                    "traceId": tid,
                                    "spanId": _hex("w1", 8),
                                    "startTimeUnixNano": "soon",
                                },
                                {"traceId": tid, "spanId": _hex("w2", 8), "attributes": "none"},
                                "not a span",
                            ]
                        }
                    ]
                }
            ]
        },
        {"resourceSpans": "none"},
        [1, 2, 3],
    ]
    files["wrong_types.jsonl"] = b"".join(
        lines[:2] + [orjson.dumps(w) + b"\n" for w in wrong]
    ) + b"".join(lines[2:])
    # Spans with empty ids next to the good ones.
    empty = {
        "resourceSpans": [
            {
                "scopeSpans": [
                    {
                        "spans": [
                            {"traceId": "", "spanId": _hex("e1", 8), "name": "no trace id"},
                            {"traceId": _hex("e", 16), "spanId": "", "name": "no span id"},
                        ]
                    }
                ]
            }
        ]
    }
    files["empty_ids.jsonl"] = b"".join(lines) + orjson.dumps(empty) + b"\n"
    # Upper-case hex ids and snake_case keys: valid, and the same data.
    upper = [_upper_ids(proto_to_json(m)) for m in msgs]
    files["uppercase_ids.jsonl"] = b"".join(orjson.dumps(u) + b"\n" for u in upper)
    files["snake_case.jsonl"] = b"".join(
        orjson.dumps(_snake(proto_to_json(m))) + b"\n" for m in msgs
    )
    return files


def _upper_ids(obj: dict[str, Any]) -> dict[str, Any]:
    for rs in obj["resourceSpans"]:
        for ss in rs["scopeSpans"]:
            for span in ss["spans"]:
                for key in ("traceId", "spanId", "parentSpanId"):
                    if key in span:
                        span[key] = span[key].upper()
    return obj


def _snake(value: Any) -> Any:
    if isinstance(value, dict):
        out = {}
        for key, item in value.items():
            snake = "".join(f"_{c.lower()}" if c.isupper() else c for c in key)
            # int64 as JSON numbers, too (OTLP/JSON allows both).
            numeric = snake.endswith("_unix_nano") or snake == "int_value"
            out[snake] = int(item) if numeric else _snake(item)
        return out
    if isinstance(value, list):
        return [_snake(v) for v in value]
    return value


def _gzip(data: bytes) -> bytes:
    """Gzip with a fixed header: ``gzip.compress`` writes a different OS byte on 3.10."""
    out = io.BytesIO()
    with gzip.GzipFile(fileobj=out, mode="wb", mtime=0) as f:
        f.write(data)
    return out.getvalue()


def build() -> dict[str, bytes]:
    """Every golden file, by relative path."""
    msgs = messages()
    jsonl = json_lines(msgs)
    binary = length_prefixed(msgs)
    files = {
        "formats/otlp.jsonl": jsonl,
        "formats/otlp_pretty.json": pretty_document(msgs),
        "formats/otlp.binpb": binary,
        "formats/otlp_zstd_messages.binpb": length_prefixed(msgs, compress=True),
        "formats/otlp.jsonl.gz": _gzip(jsonl),
        "formats/otlp.binpb.zst": zstandard.ZstdCompressor(level=3).compress(binary),
        # Whole-file compression is found by magic bytes, not by the name.
        "formats/gzip_without_extension.dat": _gzip(binary),
        "tool_calls/researcher.jsonl": tool_calls(),
    }
    files.update({f"hostile/{name}": data for name, data in hostile(msgs).items()})
    return files


def main(argv: list[str]) -> int:
    root = Path(argv[1]) if len(argv) > 1 else Path(__file__).parent
    for rel, data in build().items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
