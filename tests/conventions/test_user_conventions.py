"""A user's TOML mapping takes a library no built-in convention reads from "no run" to a verdict.

The library is made up ("acme-agents": ``acme.kind`` says run, think or step);
the same mapping file is used by replay (``--conventions``), live
(``conventions=`` and ``OTEL_STALL_CONVENTIONS``) and the gateway.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from gateway_support import export, wait_until
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from otlp_sink import OtlpSink

from otel_stall import Conventions, Replayer, StallSpanProcessor
from otel_stall.cli import main
from otel_stall.conventions.user import MappingError, conventions_from_file, load_conventions
from otel_stall.gateway import Gateway, GatewayConfig
from otel_stall.otlp.encode import proto_to_json

ACME = """
[[convention]]
name = "acme-agents"
roles = { "acme.kind" = { step = "tool", think = "model", run = "agent" } }
tool_name_keys = ["acme.tool"]
arguments_keys = ["acme.args"]
result_events = [["acme.result", "value"]]
content_switch = "ACME_RECORD_CONTENT=1"
"""


def _acme_run(provider: TracerProvider, rounds: int, same: bool) -> None:
    """An acme agent: a think span, then a step whose result is an event, each round."""
    tracer = provider.get_tracer("acme")
    with tracer.start_as_current_span("acme agent", attributes={"acme.kind": "run"}):
        for i in range(rounds):
            with tracer.start_as_current_span("think", attributes={"acme.kind": "think"}):
                pass
            query = "paris" if same else f"page {i}"
            attributes = {"acme.kind": "step", "acme.tool": "lookup", "acme.args": query}
            with tracer.start_as_current_span("acme tool", attributes=attributes) as span:
                span.add_event("acme.result", {"value": f"nothing for {query}"})


def _spans(rounds: int = 6, same: bool = True) -> list[ReadableSpan]:
    memory = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    _acme_run(provider, rounds, same)
    provider.shutdown()
    return list(memory.get_finished_spans())


@pytest.fixture
def mapping(tmp_path: Path) -> Path:
    """The acme mapping file."""
    path = tmp_path / "acme.toml"
    path.write_text(ACME)
    return path


@pytest.fixture
def capture(tmp_path: Path) -> Path:
    """A looping acme run as OTLP/JSON lines."""
    path = tmp_path / "acme.jsonl"
    path.write_text(json.dumps(proto_to_json(encode_spans(_spans()))) + "\n")
    return path


def test_replay_finds_no_run_without_the_mapping(capture: Path) -> None:
    """Built-in conventions alone see nothing in the made-up library's spans, and say so."""
    result = Replayer().analyse([str(capture)])
    assert result.reports == []
    summary = result.summary()
    assert summary["recognised"] == {"tool_calls": 0, "model_calls": 0}
    assert summary["unrecognised_span_names"] == {"acme tool": 6, "acme agent": 1}


def test_replay_with_the_mapping_lists_nothing_unrecognised(capture: Path, mapping: Path) -> None:
    """With the mapping, the same spans are recognised and no longer listed."""
    result = Replayer(conventions=conventions_from_file(mapping)).analyse([str(capture)])
    summary = result.summary()
    assert summary["recognised"] == {"tool_calls": 6, "model_calls": 6}
    assert "unrecognised_span_names" not in summary


@pytest.mark.parametrize(("same", "verdict"), [(True, "break"), (False, "ok")])
def test_replay_with_the_mapping_file_gives_the_verdict(
    tmp_path: Path,
    mapping: Path,
    same: bool,
    verdict: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """``replay --conventions FILE``: one run, six calls, break for the loop and ok for progress."""
    path = tmp_path / "run.jsonl"
    path.write_text(json.dumps(proto_to_json(encode_spans(_spans(same=same)))) + "\n")
    main(["replay", str(path), "--conventions", str(mapping), "--format", "json"])
    runs = json.loads(capsys.readouterr().out)["runs"]
    assert [(r["verdict"], r["tool_calls"]) for r in runs] == [(verdict, 6)]


@pytest.mark.parametrize("how", ["keyword", "environment"])
def test_live_processor_with_the_mapping_breaks_the_loop(mapping: Path, how: str) -> None:
    """Live, ``conventions=`` or ``OTEL_STALL_CONVENTIONS`` gives the run span the verdict."""
    if how == "keyword":
        conventions = conventions_from_file(mapping)
    else:
        conventions = Conventions.from_env({"OTEL_STALL_CONVENTIONS": str(mapping)})
    memory = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(
        StallSpanProcessor(SimpleSpanProcessor(memory), conventions=conventions)
    )
    _acme_run(provider, 6, True)
    provider.shutdown()
    (run,) = [s for s in memory.get_finished_spans() if s.name == "acme agent"]
    assert (run.attributes or {}).get("stall.verdict") == "break"
    assert (run.attributes or {}).get("stall.tool_calls") == 6


def test_gateway_with_the_mapping_enriches_the_run(mapping: Path, sink: OtlpSink) -> None:
    """The gateway given the mapping marks the run span as the replay does."""
    spans = _spans()
    config = GatewayConfig(grpc="127.0.0.1:0", http="off", metrics="off", upstream=sink.endpoint)
    with Gateway(config, conventions=conventions_from_file(mapping)) as gateway:
        assert gateway.grpc_endpoint is not None
        assert export(gateway.grpc_endpoint, spans) == len(spans)
        assert wait_until(lambda: sink.count == len(spans))
    run = next(s for s in sink.spans.values() if s.name == "acme agent")
    assert run.stall.get("stall.verdict") == "break"


BAD: dict[str, tuple[str, str]] = {
    "unknown role": (
        '[[convention]]\nroles = { "k" = { v = "tooling" } }\n',
        "convention[0].roles.k.v",
    ),
    "unknown key": (
        '[[convention]]\nroles = { "k" = { v = "tool" } }\nresults = ["x"]\n',
        "results",
    ),
    "no roles": ('[[convention]]\nname = "x"\n', "convention[0].roles"),
    "not a list": (
        '[[convention]]\nroles = { "k" = { v = "tool" } }\nresult_keys = "x"\n',
        "result_keys",
    ),
    "no table": ('name = "x"\n', "convention"),
    "bad toml": ("[[convention]\n", "(syntax)"),
}


@pytest.mark.parametrize("case", list(BAD))
def test_mapping_errors_name_the_file_key_and_fix(tmp_path: Path, case: str) -> None:
    """Each mistake in a mapping file is reported with the file, the key and a fix."""
    text, key = BAD[case]
    path = tmp_path / "bad.toml"
    path.write_text(text)
    with pytest.raises(MappingError) as raised:
        load_conventions(path)
    message = str(raised.value)
    assert str(path) in message
    assert key in message
    assert "Fix:" in message


def test_cli_reports_a_bad_mapping_as_a_usage_error(
    tmp_path: Path, capture: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--conventions`` with a broken file exits 2 and says which file and key."""
    path = tmp_path / "bad.toml"
    path.write_text('[[convention]]\nroles = { "k" = { v = "tooling" } }\n')
    assert main(["replay", str(capture), "--conventions", str(path)]) == 2
    err = capsys.readouterr().err
    assert "bad.toml" in err
    assert "roles.k.v" in err


def test_compare_reads_runs_through_the_mapping(
    capture: Path, mapping: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``compare --conventions FILE`` finds the made-up library's runs; without it, none."""
    assert main(["compare", str(capture), str(capture)]) == 2
    assert "no run found" in capsys.readouterr().err
    args = ["compare", str(capture), str(capture), "--conventions", str(mapping)]
    main([*args, "--format", "json"])
    doc = json.loads(capsys.readouterr().out)
    assert [s["tool"] for s in doc["shared"]] == ["lookup"]
