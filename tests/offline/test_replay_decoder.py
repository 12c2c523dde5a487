"""The one OTLP decoder: protobuf and OTLP/JSON alike, plain spans as links, same runs as add().

A replay hands plain spans to its analyzers as parent links only. Each case
is analysed twice: by the replay, and by ``TraceAnalyzer.add`` on every span's
full record. Both must give the same runs and the same ``stall.*`` attributes,
whatever the span order and the format. The hand-picked cases below each once
found a bug in an earlier, separate fast path.
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from opentelemetry.proto.trace.v1.trace_pb2 import TracesData

from otel_stall import (
    Conventions,
    CustomConvention,
    Replayer,
    ReplayResult,
    Role,
    SpanRecord,
    StallPolicy,
    TraceAnalyzer,
    TraceResult,
    analyse_spans,
)
from otel_stall.conventions import ROLE_KEYS
from otel_stall.offline.report import run_json
from otel_stall.otlp.decode import (
    DecodeError,
    decode_json,
    decode_proto,
    spans_from_json,
    spans_from_proto,
)
from otel_stall.otlp.encode import proto_to_json, python_to_any_value

POLICY = StallPolicy(warn_at=2, break_at=4)
SEARCH = {"gen_ai.tool.call.arguments": json.dumps({"q": "same"}), "gen_ai.tool.call.result": "[]"}
Attrs = dict[str, Any]


def _tool(name: str, **extra: Any) -> Attrs:
    return {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": name, **SEARCH, **extra}


def _trace_spans(trace: int, conventions_key: str | None = None) -> list[tuple[Any, ...]]:
    """``(index, parent index, name, attributes)`` of one trace with every kind of span.

    An agent under an HTTP root; tool spans directly under the agent, under a
    plain span, and an MCP client span nested in a tool span; chat spans; a
    second agent named ``invoke_agent`` without attributes; a plain second root.
    """
    spans: list[tuple[Any, ...]] = [
        (0, None, "POST /chat", {"http.request.method": "POST", "http.response.status_code": 200}),
        (
            1,
            0,
            "invoke_agent a",
            {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "a"},
        ),
        (2, 1, "workflow step", {"code.function": "step"}),
        (3, 1, "invoke_agent", {}),
    ]
    index = 4
    for round_ in range(4):
        spans.append((index, 1, "chat m", {"gen_ai.operation.name": "chat", "x.n": round_}))
        # Alternately directly under the agent and under the plain "workflow step" span.
        spans.append((index + 1, 1 if round_ % 2 else 2, "execute_tool search", _tool("search")))
        spans.append(
            (index + 2, index + 1, "tools/call search", {"mcp.method.name": "tools/call", **SEARCH})
        )
        spans.append((index + 3, index + 1, "GET", {"http.response.status_code": 200}))
        spans.append((index + 4, 3, "execute_tool poll", _tool("poll", **{"error.type": "x"})))
        index += 5
    spans.append((index, None, "GET /health", {"http.route": "/health"}))
    if conventions_key is not None:
        for i in range(3):
            spans.append((index + 1 + i, 1, "lookup", {conventions_key: "tool", **SEARCH}))
    return spans


def _traces_data(
    traces: int, seed: int, custom_key: str | None = None, per_message: int = 17
) -> Iterator[TracesData]:
    """A few messages of shuffled spans from interleaved traces."""
    rng = random.Random(seed)
    everything = []
    for trace in range(1, traces + 1):
        for index, parent, name, attrs in _trace_spans(trace, custom_key):
            everything.append((trace, index, parent, name, attrs))
    rng.shuffle(everything)
    for start in range(0, len(everything), per_message):
        data = TracesData()
        scope = data.resource_spans.add().scope_spans.add()
        for trace, index, parent, name, attrs in everything[start : start + per_message]:
            span = scope.spans.add()
            span.trace_id = trace.to_bytes(16, "big")
            span.span_id = (trace * 1000 + index).to_bytes(8, "big")
            if parent is not None:
                span.parent_span_id = (trace * 1000 + parent).to_bytes(8, "big")
            span.name = name
            span.start_time_unix_nano = 1_700_000_000_000_000_000 + index * 1000
            span.end_time_unix_nano = span.start_time_unix_nano + 500 + (index % 3)
            for key, value in attrs.items():
                python_to_any_value(value, span.attributes.add(key=key).value)
        yield data


def _write(tmp_path: Path, fmt: str, messages: list[TracesData]) -> Path:
    if fmt == "binary":
        path = tmp_path / "spans.binpb"
        path.write_bytes(
            b"".join(
                len(m.SerializeToString()).to_bytes(4, "big") + m.SerializeToString()
                for m in messages
            )
        )
    else:
        path = tmp_path / "spans.jsonl"
        path.write_bytes(b"".join(orjson.dumps(proto_to_json(m)) + b"\n" for m in messages))
    return path


def _records(fmt: str, path: Path) -> list[SpanRecord]:
    if fmt == "binary":
        data = path.read_bytes()
        out: list[SpanRecord] = []
        while data:
            size = int.from_bytes(data[:4], "big")
            out += spans_from_proto(TracesData.FromString(data[4 : 4 + size]))
            data = data[4 + size :]
        return out
    return [
        s for line in path.read_bytes().splitlines() for s in spans_from_json(orjson.loads(line))
    ]


def _runs(reports: Any) -> list[dict[str, Any]]:
    return sorted(
        (run_json(r) for r in reports), key=lambda r: (r["trace_id"], str(r["run_span_id"]))
    )


def _by_span(traces: dict[str, TraceResult]) -> dict[tuple[str, str], Any]:
    return {
        (t, span_id): attrs
        for t, result in traces.items()
        for span_id, attrs in result.attributes.items()
    }


@pytest.mark.parametrize("fmt", ["binary", "json"])
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_replay_finds_what_add_finds(tmp_path: Path, fmt: str, seed: int) -> None:
    """Shuffled, interleaved traces: same runs and attributes as full records through add()."""
    path = _write(tmp_path, fmt, list(_traces_data(4, seed)))
    result = Replayer(POLICY).analyse([str(path)])
    expected = analyse_spans(_records(fmt, path), POLICY)
    assert result.errors == []
    assert result.spans == 4 * len(_trace_spans(1))
    assert _runs(result.reports) == _runs(r for t in expected.values() for r in t.reports)
    assert _by_span(result.traces) == _by_span(expected)
    # Each trace has two agent runs (the tool under the plain span still belongs to "a").
    assert sorted(str(r["agent"]) for r in _runs(result.reports)) == ["None"] * 4 + ["a"] * 4
    assert all(r["tool_calls"] == 4 for r in _runs(result.reports))


@pytest.mark.parametrize("fmt", ["binary", "json"])
def test_custom_role_key_spans_are_not_taken_as_plain(tmp_path: Path, fmt: str) -> None:
    """A custom convention's role key keeps a span from being taken as plain."""
    conventions = Conventions(
        custom=(CustomConvention("my.kind", tool_value="tool", tool_name_keys=("my.name",)),)
    )
    path = _write(tmp_path, fmt, list(_traces_data(2, 7, custom_key="my.kind")))
    result = Replayer(POLICY, conventions).analyse([str(path)])
    expected = analyse_spans(_records(fmt, path), POLICY, conventions)
    assert _runs(result.reports) == _runs(r for t in expected.values() for r in t.reports)
    agent_runs = [r for r in _runs(result.reports) if r["agent"] == "a"]
    assert [r["tool_calls"] for r in agent_runs] == [7, 7]


class _NamedTools(Conventions):
    """Classifies by an attribute no built-in convention reads: a subclass's own rule."""

    def role(self, attributes: Any) -> Role:
        return Role.TOOL if attributes.get("kind") == "t" else super().role(attributes)


def test_a_conventions_subclass_classifies_every_span(tmp_path: Path) -> None:
    """A subclass that overrides role() is asked about every span (no key-based shortcut)."""
    data = TracesData()
    scope = data.resource_spans.add().scope_spans.add()
    for i in range(5):
        span = scope.spans.add()
        span.trace_id = b"\x01" * 16
        span.span_id = (i + 1).to_bytes(8, "big")
        span.name = "fetch page"
        span.start_time_unix_nano = span.end_time_unix_nano = 10 + i
        python_to_any_value("t", span.attributes.add(key="kind").value)
        python_to_any_value('{"url": "x"}', span.attributes.add(key="input.value").value)
    path = _write(tmp_path, "binary", [data])
    result = Replayer(POLICY, _NamedTools()).analyse([str(path)])
    expected = analyse_spans(_records("binary", path), POLICY, _NamedTools())
    assert [r.tool_calls for r in result.reports] == [5]  # no span was taken as plain
    assert _runs(result.reports) == _runs(r for t in expected.values() for r in t.reports)


@pytest.mark.parametrize(
    ("bad", "reason"),
    [
        ({"intValue": "twelve"}, "expected an integer"),
        ({"boolValue": "yes"}, "expected true or false"),
        ({"doubleValue": "many"}, "expected a number"),
    ],
)
def test_bad_value_on_a_plain_span_is_still_reported(
    tmp_path: Path, bad: dict[str, Any], reason: str
) -> None:
    """A plain span's attribute values are not kept, but a bad one is reported as before."""
    result = _replay_with_bad_value(tmp_path, "GET /health", bad, reason, "after")
    assert len(result.reports) == 2  # the trace's other spans are still analysed


def _replay_with_bad_value(
    tmp_path: Path, span_name: str, bad: dict[str, Any], reason: str, where: str
) -> ReplayResult:
    """Replay a message whose span ``span_name`` has a bad value; check the one error."""
    (message,) = _traces_data(1, 0, per_message=100)
    obj = proto_to_json(message)
    spans = obj["resourceSpans"][0]["scopeSpans"][0]["spans"]
    target = next(i for i, s in enumerate(spans) if s["name"] == span_name)
    odd = {"key": "odd", "value": bad}
    attributes = spans[target]["attributes"]
    spans[target]["attributes"] = [odd, *attributes] if where == "before" else [*attributes, odd]
    path = tmp_path / "bad.jsonl"
    path.write_bytes(orjson.dumps(obj) + b"\n")
    result = Replayer(POLICY).analyse([str(path)])
    assert result.spans == len(spans)
    assert [(e.path, e.line) for e in result.errors] == [(str(path), 1)]
    assert f"spans[{target}].attributes['odd']" in result.errors[0].message
    assert reason in result.errors[0].message
    return result


def _chain(ids: dict[str, str]) -> list[SpanRecord]:
    """Agent <- plain <- plain <- three identical tool calls, parents listed after children."""
    agent = {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "x"}
    records = [
        SpanRecord("t", ids[f"tool{i}"], ids["mid2"], "execute_tool s", 10 + i, 11 + i, _tool("s"))
        for i in range(3)
    ]
    records += [
        SpanRecord("t", ids["mid2"], ids["mid1"], "step", 5, 20, {}),
        SpanRecord("t", ids["mid1"], ids["agent"], "step", 4, 21, {"http.route": "/"}),
        SpanRecord("t", ids["agent"], None, "agent", 1, 30, agent),
    ]
    return records


@pytest.mark.parametrize(
    "style",
    ["hex", "upper", "words", "zero-parent"],
)
def test_runs_resolve_through_plain_spans_with_any_id_spelling(style: str) -> None:
    """Hand-made records with non-hex or upper-case ids resolve ancestry like hex ones."""
    names = ["agent", "mid1", "mid2", "tool0", "tool1", "tool2"]
    if style == "hex":
        ids = {n: f"{i + 1:016x}" for i, n in enumerate(names)}
    elif style == "upper":
        ids = {n: f"{i + 0xA1:016X}" for i, n in enumerate(names)}
    elif style == "words":
        ids = {n: n for n in names}
    else:
        ids = {n: f"{i:016x}" for i, n in enumerate(names)}  # the agent's id is all zeros
    result = analyse_spans(_chain(ids), POLICY)["t"]
    (report,) = result.reports
    assert report.attributes["run_span_id"] == ids["agent"]
    assert report.attributes["agent"] == "x"
    assert report.tool_calls == 3
    assert set(result.attributes) == {ids["agent"], ids["tool0"], ids["tool1"], ids["tool2"]}


def test_upper_case_ids_do_not_alias_lower_case_ones() -> None:
    """An upper-case parent id is another span than its lower-case spelling (as before)."""
    ids = {n: f"{i + 0xA1:016x}" for i, n in enumerate(["agent", "mid1", "mid2", "t0", "t1", "t2"])}
    records = _chain({**ids, "tool0": ids["t0"], "tool1": ids["t1"], "tool2": ids["t2"]})
    records[3] = SpanRecord("t", ids["mid2"], ids["mid1"].upper(), "step", 5, 20, {})
    # Under a plain root: an agent root's run is its trace's run too (as live), which
    # would hide whether the tools found their agent.
    root = f"{0xFF:016x}"
    records[5].parent_span_id = root
    records.append(SpanRecord("t", root, None, "POST /run", 0, 40, {}))
    (report,) = analyse_spans(records, POLICY)["t"].reports
    assert report.attributes["agent"] is None  # the trace's run: the agent is not found
    assert report.attributes["run_span_id"] == root  # the trace's root


def _as_result(reports: ReplayResult) -> list[dict[str, Any]]:
    return _runs(reports.reports)


def test_report_only_mode_matches_full_mode(tmp_path: Path) -> None:
    """keep_enrichment=False (no stall.* attributes built) reports the very same runs."""
    path = _write(tmp_path, "json", list(_traces_data(3, 5)))
    lean = Replayer(POLICY).analyse([str(path)], keep_enrichment=False)
    full = Replayer(POLICY).analyse([str(path)])
    assert lean.traces == {}
    assert _as_result(lean) == _as_result(full)
    assert any(r["findings"] for r in _as_result(full))


@pytest.mark.parametrize("where", ["before", "after"])
@pytest.mark.parametrize(
    ("bad", "reason"),
    [({"intValue": "twelve"}, "expected an integer"), ({"boolValue": "yes"}, "expected true")],
)
def test_bad_value_on_a_tool_span_is_still_reported(
    tmp_path: Path, where: str, bad: dict[str, Any], reason: str
) -> None:
    """A bad value before or after a tool span's role key is reported as by the full decoder."""
    result = _replay_with_bad_value(tmp_path, "execute_tool search", bad, reason, where)
    agent_run = next(r for r in result.reports if r.attributes["agent"] == "a")
    assert agent_run.tool_calls == 3  # the bad span is left out, its siblings are not


@pytest.mark.parametrize("order", ["reversed", "shuffled"])
def test_role_attributes_anywhere_in_the_list(tmp_path: Path, order: str) -> None:
    """Role attributes listed last or anywhere: same runs and attributes as the full decoder."""
    rng = random.Random(11)
    lines = []
    for message in _traces_data(3, 4):
        obj = proto_to_json(message)
        for span in obj["resourceSpans"][0]["scopeSpans"][0]["spans"]:
            attributes = span.get("attributes", [])
            if order == "reversed":
                attributes.reverse()
            else:
                rng.shuffle(attributes)
        lines.append(orjson.dumps(obj) + b"\n")
    path = tmp_path / "spans.jsonl"
    path.write_bytes(b"".join(lines))
    result = Replayer(POLICY).analyse([str(path)])
    expected = analyse_spans(_records("json", path), POLICY)
    assert result.errors == []
    assert _runs(result.reports) == _runs(r for t in expected.values() for r in t.reports)
    assert _by_span(result.traces) == _by_span(expected)
    assert sum(r["tool_calls"] for r in _runs(result.reports)) == 3 * 8  # MCP spans nest


class _Calls:
    """A decoder sink that lists what it was handed, in order."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, Any]] = []

    def add(self, record: SpanRecord) -> None:
        self.calls.append(("span", record))

    def add_link(self, trace_id: str, link: bytes) -> None:
        self.calls.append(("link", (trace_id, link)))


_IDS = st.sampled_from([b"", bytes(8), bytes.fromhex("00f1e2d3c4b5a697")])
_VALUES = st.recursive(
    st.one_of(
        st.text(max_size=8),
        st.booleans(),
        st.integers(min_value=-(2**63), max_value=2**63 - 1),
        st.floats(allow_nan=False),
        st.binary(max_size=4),
    ),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3)
    ),
    max_leaves=6,
)
_ROLE_VALUES = st.sampled_from(["chat", "execute_tool", "invoke_agent", "TOOL", "LLM", "tool", "x"])
# Role keys get text: Conventions.role() raises on a list there (a conventions matter).
_ATTRIBUTES = st.lists(
    st.tuples(st.sampled_from(sorted(ROLE_KEYS)), _ROLE_VALUES)
    | st.tuples(st.sampled_from(["gen_ai.tool.name", "http.route", "x"]), _VALUES),
    max_size=4,
)
_SPANS = st.lists(
    st.tuples(
        st.sampled_from([b"", bytes(16), bytes.fromhex("0af7651916cd43dd8448eb211c80319c")]),
        _IDS,
        _IDS,
        st.sampled_from(["GET", "invoke_agent", "invoke_agent a", "invoke_agents", "chat m"]),
        _ATTRIBUTES,
        st.integers(min_value=0, max_value=2),
    ),
    max_size=6,
)


def _message(spans: list[tuple[Any, ...]]) -> TracesData:
    data = TracesData()
    scope = data.resource_spans.add().scope_spans.add()
    for trace_id, span_id, parent, name, attributes, code in spans:
        span = scope.spans.add(trace_id=trace_id, span_id=span_id, parent_span_id=parent, name=name)
        span.start_time_unix_nano, span.end_time_unix_nano = 5, 2**63 + 1
        span.status.code = code
        for key, value in attributes:
            python_to_any_value(value, span.attributes.add(key=key).value)
    return data


class _Analyses:
    """A decoder sink that analyses each trace, as the replay does."""

    def __init__(self) -> None:
        self.analyzers: dict[str, TraceAnalyzer] = {}

    def _analyzer(self, trace_id: str) -> TraceAnalyzer:
        return self.analyzers.setdefault(trace_id, TraceAnalyzer(trace_id, POLICY))

    def add(self, record: SpanRecord) -> None:
        if record.trace_id and record.span_id:
            self._analyzer(record.trace_id).add(record)

    def add_link(self, trace_id: str, link: bytes) -> None:
        self._analyzer(trace_id).add_link(link)

    def results(self) -> list[tuple[Any, ...]]:
        out = []
        for trace_id, analyzer in sorted(self.analyzers.items()):
            result = analyzer.analyse()
            out.append((trace_id, _runs(result.reports), result.attributes, result.events))
        return out


@settings(max_examples=100, deadline=None)
@given(_SPANS)
def test_proto_and_its_json_form_decode_alike(spans: list[tuple[Any, ...]]) -> None:
    """A message and its OTLP/JSON form give the same records, and the same analysis."""
    message = _message(spans)
    as_json = proto_to_json(message)
    records = list(spans_from_proto(message))
    assert records == list(spans_from_json(as_json))
    assert len(records) == len(spans)
    from_proto, from_json, from_records = _Analyses(), _Analyses(), _Analyses()
    decode_proto(message, from_proto, _raise, ROLE_KEYS)
    decode_json(as_json, from_json, _raise, ROLE_KEYS)
    for record in records:
        from_records.add(record)
    assert from_proto.results() == from_json.results() == from_records.results()


def _raise(error: DecodeError) -> None:
    raise error


@pytest.mark.parametrize("fmt", ["binary", "json"])
def test_only_plain_spans_become_links(fmt: str) -> None:
    """Links only for spans with a parent, no role key and no agent name; the rest whole."""
    (message,) = _traces_data(1, 0, per_message=100)
    sink = _Calls()
    if fmt == "binary":
        decode_proto(message, sink, _raise, ROLE_KEYS)
    else:
        decode_json(proto_to_json(message), sink, _raise, ROLE_KEYS)
    linked = sorted(int.from_bytes(c[1][1][:8], "big") % 1000 for c in sink.calls if c[0] == "link")
    plain = [
        index
        for index, parent, name, attributes in _trace_spans(1)
        if parent is not None and not ROLE_KEYS & set(attributes) and name != "invoke_agent"
    ]
    assert linked == plain
    assert len(sink.calls) == len(_trace_spans(1))
