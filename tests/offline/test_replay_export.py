"""--export-otlp against real OTLP receivers on loopback: every span arrives, enriched."""

from __future__ import annotations

import contextlib
import json
import socket
import threading
import time
from pathlib import Path

import pytest
from otlp_receiver import GrpcReceiver, HttpReceiver, OtlpReceiver

from otel_stall import Replayer
from otel_stall.cli import main
from otel_stall.conventions import CONTENT_KEYS
from otel_stall.offline.send import OtlpSender
from otel_stall.otlp.decode import spans_from_proto
from otel_stall.otlp.encode import traces_from_json

GOLDEN = Path(__file__).parent.parent / "golden"
SOURCES = [
    GOLDEN / "formats" / "otlp.jsonl",
    GOLDEN / "formats" / "otlp.binpb",
    GOLDEN / "hostile" / "wrong_types.jsonl",
]

pytestmark = pytest.mark.e2e


def _receiver(kind: str) -> GrpcReceiver | HttpReceiver:
    return GrpcReceiver() if kind == "grpc" else HttpReceiver()


def _url(receiver: OtlpReceiver) -> str:
    if isinstance(receiver, HttpReceiver):
        return receiver.traces_url
    assert isinstance(receiver, GrpcReceiver)
    return receiver.endpoint


@pytest.mark.parametrize("kind", ["grpc", "http"])
@pytest.mark.parametrize("source", SOURCES, ids=lambda p: p.name)
def test_every_span_arrives_enriched(kind: str, source: Path) -> None:
    """Every decodable span is delivered once, with the replay's stall.* attributes and events."""
    replayer = Replayer()
    result = replayer.analyse([str(source)])
    decodable = result.spans - sum("spans[" in e.message for e in result.errors)
    with _receiver(kind) as receiver:
        sender = replayer.export(result, [str(source)], _url(receiver))
        received = receiver.wait_for(decodable)
    assert sender.failed == 0
    assert sender.sent == decodable == len(received)
    assert len({(s.trace_id, s.span_id) for s in received}) == decodable
    checked = 0
    for span in received:
        trace = result.traces.get(span.trace_id)
        if trace is None:
            continue
        expected = trace.attributes.get(span.span_id, {})
        assert {k: v for k, v in span.attributes.items() if k.startswith("stall.")} == expected
        events = [e.attributes for e in span.events if e.name == "stall.detected"]
        assert events == [e.attributes for e in trace.events.get(span.span_id, [])]
        checked += bool(expected)
    assert checked >= 10
    assert any(s.attributes.get("stall.verdict") == "break" for s in received)
    assert {s.resource.get("service.name") for s in received} >= {"agents", "tools"}


@pytest.mark.parametrize("kind", ["grpc", "http"])
def test_cli_export_with_redaction(kind: str, capsys: pytest.CaptureFixture[str]) -> None:
    """`replay --export-otlp URL --redact` sends every span without raw arguments or results."""
    source = str(GOLDEN / "formats" / "otlp_zstd_messages.binpb")
    with _receiver(kind) as receiver:
        code = main(
            ["replay", source, "--format", "json", "--export-otlp", _url(receiver), "--redact"]
        )
        received = receiver.wait_for(40)
    assert code == 1  # the dataset holds a stalled run
    assert len(received) == 40
    assert not any(CONTENT_KEYS & s.attributes.keys() for s in received)
    tool_spans = [s for s in received if "stall.signature" in s.attributes]
    assert len(tool_spans) == 16
    assert '"exported": 40' in capsys.readouterr().out


def test_unreachable_endpoint_is_reported_not_raised(capsys: pytest.CaptureFixture[str]) -> None:
    """A dead endpoint makes the export fail loudly (exit 2), after the report is printed."""
    with HttpReceiver() as receiver:
        url = receiver.traces_url
    code = main(["replay", str(SOURCES[0]), "--format", "json", "--export-otlp", url])
    captured = capsys.readouterr()
    assert code == 2
    assert "not delivered" in captured.err
    assert '"runs"' in captured.out


@pytest.mark.parametrize("kind", ["grpc", "http"])
def test_large_messages_are_split_and_nothing_is_lost(kind: str) -> None:
    """Messages above the request size limit are cut per span; every span still arrives once."""
    source = str(GOLDEN / "formats" / "otlp_pretty.json")
    replayer = Replayer()
    result = replayer.analyse([source])
    with _receiver(kind) as receiver:
        url = _url(receiver)
        sender = OtlpSender(url.removeprefix("http://") if kind == "grpc" else url)
        sender.max_request_bytes = 2_000
        for _, message in replayer.enriched(result, [source]):
            sender.add(traces_from_json(message))
        sender.close()
        received = receiver.wait_for(result.spans)
    assert sender.failed == 0
    assert len(receiver.requests) > 5
    assert sorted((s.trace_id, s.span_id) for s in received) == sorted(
        (r.trace_id, r.span_id)
        for data in [traces_from_json(m) for _, m in replayer.enriched(result, [source])]
        for r in spans_from_proto(data)
    )


# -- issue 27: an endpoint that accepts and never answers ----------------------------------


class BlackHole:
    """A loopback TCP server that accepts every connection, reads nothing and never answers."""

    def __init__(self) -> None:
        self.server = socket.create_server(("127.0.0.1", 0))
        self.port = self.server.getsockname()[1]
        self.accepted: list[socket.socket] = []
        self.thread = threading.Thread(target=self._accept, daemon=True)

    def _accept(self) -> None:
        with contextlib.suppress(OSError):
            while True:
                self.accepted.append(self.server.accept()[0])

    def __enter__(self) -> BlackHole:
        self.thread.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self.server.close()
        for sock in self.accepted:
            sock.close()

    def url(self, kind: str) -> str:
        """The black hole as an OTLP endpoint of ``kind``."""
        if kind == "http":
            return f"http://127.0.0.1:{self.port}/v1/traces"
        return f"127.0.0.1:{self.port}"


@pytest.mark.timeout(60)
@pytest.mark.parametrize("kind", ["grpc", "http"])
def test_a_black_hole_endpoint_is_given_up_by_the_deadline(
    kind: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """`--export-otlp` to an endpoint that never answers ends by --export-deadline, exit 2.

    The attack of issue 27: 6 tries x 10 s for every request, hours for a big capture.
    """
    with BlackHole() as hole:
        started = time.monotonic()
        code = main(
            ["replay", str(SOURCES[0]), "--format", "json", "--export-otlp", hole.url(kind),
             "--export-deadline", "2"]
        )  # fmt: skip
        took = time.monotonic() - started
    captured = capsys.readouterr()
    assert code == 2
    assert f"gave up on {hole.url(kind)}" in captured.err
    assert "--export-deadline" in captured.err
    assert took < 30  # not 6 x 10 s: the deadline bounds every wait
    assert json.loads(captured.out)["summary"]["exported"] == 0


@pytest.mark.timeout(60)
def test_the_sender_gives_up_after_one_requests_retries() -> None:
    """Ten requests to a black hole: only the first is tried (six times), the rest not sent."""
    data = traces_from_json(json.loads(SOURCES[0].read_text().splitlines()[0]), lambda e: None)
    per_request = sum(len(ss.spans) for rs in data.resource_spans for ss in rs.scope_spans)
    with BlackHole() as hole:
        sender = OtlpSender(hole.url("http"), timeout=0.2, max_request_bytes=data.ByteSize())
        for _ in range(10):
            sender.add(data)
        sender.close()
        attempts = len(hole.accepted)
    assert attempts == 6
    assert sender.sent == 0
    assert sender.failed == 10 * per_request
    assert sender.gave_up is not None
    assert f"{9 * per_request:,} more spans not sent" in sender.errors[-1]


def test_a_bad_deadline_is_refused_naming_the_flag(capsys: pytest.CaptureFixture[str]) -> None:
    """`--export-deadline 0` is bad usage: exit 2, the flag named, nothing sent."""
    assert main(["replay", str(SOURCES[0]), "--export-otlp", "x:1", "--export-deadline", "0"]) == 2
    assert "--export-deadline: expected seconds above 0" in capsys.readouterr().err
