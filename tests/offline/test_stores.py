"""Replay of what trace stores hand out: Jaeger JSON, Tempo, wrapped OTLP, Phoenix (issue 29).

The store files are written here in each store's documented shape from the
golden OTLP/JSON traces (a loop that breaks, a healthy run that is ok, one
that escalates), so each shape must give the verdicts the OTLP file gives.
"""

from __future__ import annotations

import base64
import datetime as dt
import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest

from otel_stall import Replayer, replay
from otel_stall.cli import main
from otel_stall.offline.stores import Ids
from otel_stall.otlp.decode import attributes_from_json

GOLDEN = Path(__file__).parent.parent / "golden" / "formats" / "otlp.jsonl"
KINDS = {1: "internal", 2: "server", 3: "client", 4: "producer", 5: "consumer"}
Shape = Callable[[], Any]


def _golden() -> Iterator[tuple[dict[str, Any], dict[str, Any], dict[str, Any]]]:
    """(resource, scope, span) of every golden span."""
    for line in GOLDEN.read_bytes().splitlines():
        for rs in orjson.loads(line)["resourceSpans"]:
            for ss in rs["scopeSpans"]:
                for span in ss["spans"]:
                    yield rs["resource"], ss.get("scope", {}), span


def _plain(value: Any) -> Any:
    """A decoded attribute as JSON; maps and lists as JSON text, as Jaeger and Phoenix hold them."""
    if isinstance(value, dict | list):
        return json.dumps(value)
    if isinstance(value, bytes):
        return base64.b64encode(value).decode()
    return value


def _tag(key: str, value: Any) -> dict[str, Any]:
    if isinstance(value, bool):
        kind = "bool"
    elif isinstance(value, int):
        kind = "int64"
    elif isinstance(value, float):
        kind = "float64"
    else:
        kind = "string"
    return {"key": key, "type": kind, "value": value}


def _b64(hex_id: str) -> str:
    return base64.b64encode(bytes.fromhex(hex_id)).decode()


def _iso(nanos: int) -> str:
    seconds, rest = divmod(int(nanos), 1_000_000_000)
    when = dt.datetime.fromtimestamp(seconds, dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S")
    return f"{when}.{rest // 1000:06d}+00:00"


def jaeger(ref_type: str = "CHILD_OF", error_tag: bool = False) -> dict[str, Any]:
    """The query API's ``{"data": [trace]}``: typed tags, references, processes, microseconds."""
    traces: dict[str, dict[str, Any]] = {}
    for resource, scope, span in _golden():
        trace = traces.setdefault(
            span["traceId"], {"traceID": span["traceId"], "spans": [], "processes": {}}
        )
        service = attributes_from_json(resource.get("attributes"))
        trace["processes"]["p1"] = {
            "serviceName": service.pop("service.name"),
            "tags": [_tag(k, _plain(v)) for k, v in service.items()],
        }
        attrs = attributes_from_json(span.get("attributes"))
        tags = [_tag(k, _plain(v)) for k, v in attrs.items()]
        tags += [_tag("span.kind", KINDS[span["kind"]]), _tag("otel.scope.name", scope["name"])]
        if span.get("status", {}).get("code") == 2:
            tags.append(_tag("error", True) if error_tag else _tag("otel.status_code", "ERROR"))
        start = int(span["startTimeUnixNano"]) // 1000
        parent = span.get("parentSpanId")
        trace["spans"].append(
            {
                "traceID": span["traceId"],
                "spanID": span["spanId"],
                "operationName": span["name"],
                "references": (
                    [{"refType": ref_type, "traceID": span["traceId"], "spanID": parent}]
                    if parent
                    else []
                ),
                "startTime": start,
                "duration": int(span["endTimeUnixNano"]) // 1000 - start,
                "tags": tags,
                "logs": [
                    {
                        "timestamp": int(e.get("timeUnixNano", 0)) // 1000,
                        "fields": [_tag("event", e["name"])]
                        + [
                            _tag(k, _plain(v))
                            for k, v in attributes_from_json(e.get("attributes")).items()
                        ],
                    }
                    for e in span.get("events", [])
                ],
                "processID": "p1",
                "warnings": None,
            }
        )
    return {"data": list(traces.values()), "total": 0, "limit": 0, "offset": 0, "errors": None}


def _base64_otlp() -> list[dict[str, Any]]:
    """The golden resource spans with base64 ids, as Tempo writes them."""
    out = []
    for line in GOLDEN.read_bytes().splitlines():
        for rs in orjson.loads(line)["resourceSpans"]:
            for ss in rs["scopeSpans"]:
                for span in ss["spans"]:
                    for key in ("traceId", "spanId", "parentSpanId"):
                        if span.get(key):
                            span[key] = _b64(span[key])
            out.append(rs)
    return out


def tempo() -> dict[str, Any]:
    """Tempo's ``/api/traces/<id>``: ``batches`` of OTLP/JSON with base64 ids."""
    return {"batches": _base64_otlp()}


def wrapped_trace() -> dict[str, Any]:
    """Tempo's v2 API: ``{"trace": {"resourceSpans": ...}}``, base64 ids."""
    return {"trace": {"resourceSpans": _base64_otlp()}}


def wrapped_result() -> dict[str, Any]:
    """Jaeger's v3 API: ``{"result": {"resourceSpans": ...}}``, hex ids."""
    lines = GOLDEN.read_bytes().splitlines()
    return {
        "result": {
            "resourceSpans": [rs for ln in lines for rs in orjson.loads(ln)["resourceSpans"]]
        }
    }


def _nested(flat: dict[str, Any]) -> dict[str, Any]:
    """Dotted keys nested, as Phoenix stores attributes."""
    out: dict[str, Any] = {}
    for key, value in flat.items():
        *parents, last = key.split(".")
        node = out
        for part in parents:
            node = node.setdefault(part, {})
        node[last] = value
    return out


def phoenix() -> dict[str, Any]:
    """Phoenix's span export: ``context``, ``parent_id``, ISO times, nested attributes."""
    spans = []
    for _, _, span in _golden():
        attrs = {k: _plain(v) for k, v in attributes_from_json(span.get("attributes")).items()}
        code = span.get("status", {}).get("code", 0)
        spans.append(
            {
                "id": "U3BhbjozNg==",
                "name": span["name"],
                "context": {"trace_id": span["traceId"], "span_id": span["spanId"]},
                "span_kind": attrs.get("openinference.span.kind", "UNKNOWN"),
                "parent_id": span.get("parentSpanId"),
                "start_time": _iso(span["startTimeUnixNano"]),
                "end_time": _iso(span["endTimeUnixNano"]),
                "status_code": {0: "UNSET", 1: "OK", 2: "ERROR"}[code],
                "status_message": "",
                "attributes": _nested(attrs),
                "events": [
                    {
                        "name": e["name"],
                        "timestamp": _iso(e.get("timeUnixNano", 0)),
                        "attributes": {},
                    }
                    for e in span.get("events", [])
                ],
            }
        )
    return {"data": spans, "next_cursor": None}


SHAPES: dict[str, Shape] = {
    "jaeger": jaeger,
    "jaeger-follows-from": lambda: jaeger("FOLLOWS_FROM"),
    "jaeger-error-tag": lambda: jaeger(error_tag=True),
    "jaeger-list-of-traces": lambda: jaeger()["data"],
    "tempo": tempo,
    "wrapped-trace": wrapped_trace,
    "wrapped-result": wrapped_result,
    "phoenix": phoenix,
}
FORMATS = {"jaeger": "jaeger-json", "tempo": "tempo-json", "wrapped": "otlp-json-wrapped"}


def _verdicts(paths: list[str]) -> dict[str, tuple[str, int]]:
    result = Replayer().analyse(paths)
    assert result.errors == []
    return {str(r.attributes["trace_id"]): (r.verdict.value, r.tool_calls) for r in result.reports}


@pytest.mark.parametrize("pretty", [True, False], ids=["pretty", "one-line"])
@pytest.mark.parametrize("shape", list(SHAPES))
def test_each_store_shape_gives_the_verdicts_of_its_otlp(
    shape: str, pretty: bool, tmp_path: Path
) -> None:
    """Each store's export replays with no error, and its loop breaks and its healthy run is ok."""
    path = tmp_path / f"{shape}.json"
    doc = SHAPES[shape]()
    path.write_bytes(orjson.dumps(doc, option=orjson.OPT_INDENT_2 if pretty else 0))
    got = _verdicts([str(path)])
    assert got == _verdicts([str(GOLDEN)])
    assert {v for v, _ in got.values()} == {"ok", "break", "escalate"}


def test_a_bare_jaeger_trace_is_read(tmp_path: Path) -> None:
    """One trace object (``{"traceID", "spans", "processes"}``) on its own, as a UI download."""
    expected = _verdicts([str(GOLDEN)])
    got: dict[str, tuple[str, int]] = {}
    for i, trace in enumerate(jaeger()["data"]):
        path = tmp_path / f"trace-{i}.json"
        path.write_bytes(orjson.dumps(trace))
        got |= _verdicts([str(path)])
    assert got == expected


@pytest.mark.parametrize("shape", ["jaeger", "tempo", "wrapped-trace", "phoenix"])
def test_out_writes_every_span_of_a_store_file(
    shape: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--out`` of a store file writes OTLP/JSON lines, one span out for each span in."""
    source = tmp_path / "in.json"
    source.write_bytes(orjson.dumps(SHAPES[shape]()))
    out = tmp_path / "out.jsonl"
    assert main(["replay", str(source), "--out", str(out), "--format", "json"]) != 2
    summary = json.loads(capsys.readouterr().out)["summary"]
    assert summary["written"] == summary["spans"]
    again = replay(str(out))
    assert again.errors == []
    assert again.spans == replay(str(GOLDEN)).spans
    assert {r.verdict.value for r in again.reports} == {"ok", "break", "escalate"}


def test_base64_ids_are_decided_once_per_file(tmp_path: Path) -> None:
    """A base64 file gives no error per span; a span whose id does not fit is the one error."""
    doc = tempo()
    spans = doc["batches"][0]["scopeSpans"][0]["spans"]
    spans[0]["spanId"] = "not an id"
    path = tmp_path / "tempo.json"
    path.write_bytes(orjson.dumps(doc))
    result = Replayer().analyse([str(path)])
    assert result.spans == replay(str(GOLDEN)).spans
    assert len(result.errors) == 1
    assert "spanId" in result.errors[0].message


def test_jaeger_64_bit_ids_are_padded() -> None:
    """Jaeger writes a 64-bit trace id as 16 digits; OTLP's is 32, zero-padded on the left."""
    ids = Ids()
    assert ids.convert("00000000000000AB", 32) == "0" * 30 + "ab"
    assert ids.convert("ab", 16) == "0" * 14 + "ab"
    assert ids.base64 is False


@pytest.mark.parametrize(
    ("doc", "named"),
    [
        ({"name": "agent", "version": "1.0.0"}, "'name', 'version'"),
        ({"data": [{"id": 1, "value": 2}]}, "'data' items have keys 'id', 'value'"),
        ({"data": None, "errors": [{"code": 404, "msg": "trace not found"}]}, "trace not found"),
    ],
    ids=["other-json", "unknown-data", "jaeger-error"],
)
def test_an_unknown_shape_exits_2_naming_what_was_found_and_what_is_read(
    doc: Any, named: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A JSON file of no known shape: exit 2, naming its keys (or error) and the formats read."""
    path = tmp_path / "unknown.json"
    path.write_bytes(orjson.dumps(doc, option=orjson.OPT_INDENT_2))
    assert main(["replay", str(path), "--format", "json"]) == 2
    err = capsys.readouterr().err
    assert named in err
    assert "Jaeger JSON" in err
    assert "Phoenix" in err
