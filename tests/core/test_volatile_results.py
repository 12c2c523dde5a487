"""Timings, per-call ids and per-run temp folders inside results do not make a result new."""

from __future__ import annotations

import json
from typing import Any

import pytest
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from otlp_receiver import GrpcReceiver, ReceivedSpan
from stall_pipeline import STYLES, Agent, Call

from otel_stall import StallPolicy, StallSpanProcessor
from otel_stall.core.config import ConfigError
from otel_stall.core.records import Status
from otel_stall.core.signing import Normaliser, Signer

pytestmark = pytest.mark.e2e

PAGE = "Install with pip install otel-stall, then add the processor."


def _fetch_loop(results: list[Any], policy: StallPolicy | None = None) -> list[ReceivedSpan]:
    """The same page fetched once a round, through the SDK, the OTLP/gRPC exporter, loopback."""
    with GrpcReceiver() as receiver:
        exporter = OTLPSpanExporter(endpoint=receiver.endpoint, insecure=True)
        provider = TracerProvider()
        provider.add_span_processor(StallSpanProcessor(BatchSpanProcessor(exporter), policy=policy))
        agent = Agent(provider.get_tracer("volatile"), STYLES[0])
        with agent.run():
            for result in results:
                agent.round(Call("fetch_page", {"url": "https://docs.example/install"}, result))
        provider.force_flush()
        provider.shutdown()
        return receiver.wait_for(2 * len(results) + 1)


def _outcome(spans: list[ReceivedSpan]) -> tuple[str, list[str]]:
    """The run's verdict and the kinds of its findings, in order."""
    (run,) = [s for s in spans if s.name.startswith("invoke_agent")]
    kinds = [e.attributes["stall.kind"] for e in run.events if e.name == "stall.detected"]
    return str(run.attributes["stall.verdict"]), kinds


def _timed(n: int) -> dict[str, Any]:
    return {"content": PAGE, "durationMs": 40 + 7 * n, "messageId": f"msg_{n:04x}"}


def test_a_page_fetched_again_with_a_fresh_duration_is_a_repeat() -> None:
    """A loop over the same page with a fresh durationMs and messageId each time breaks."""
    verdict, kinds = _outcome(_fetch_loop([_timed(n) for n in range(5)]))
    assert verdict == "break"
    assert "repeat" in kinds


def test_a_field_that_is_no_timing_still_makes_the_result_new() -> None:
    """The same loop with a changing view count is no repeat: only timings and ids are noise."""
    results = [{"content": PAGE, "views": 100 + n} for n in range(5)]
    _, kinds = _outcome(_fetch_loop(results))
    assert "repeat" not in kinds


def test_a_policy_can_keep_a_timing_for_one_tool() -> None:
    """``result_volatile_keys`` removing durationMs for the tool makes each result new again."""
    policy = StallPolicy(result_volatile_keys={"fetch_page": ("-duration_ms", "-message_id")})
    _, kinds = _outcome(_fetch_loop([_timed(n) for n in range(5)], policy))
    assert "repeat" not in kinds


# -- the signer --------------------------------------------------------------------

SPELLINGS = [
    ("durationMs", "duration_ms", "duration-ms", "DurationMS"),
    ("elapsed", "elapsedSeconds", "elapsed_time", "latency_ms", "latencyUs", "response_time"),
    ("requestId", "request-id", "x-request-id", "messageId", "message_id", "runId", "run-id"),
]


@pytest.mark.parametrize("native", [True, False])
@pytest.mark.parametrize("names", SPELLINGS)
def test_timings_and_ids_in_results_are_volatile_in_every_spelling(
    names: tuple[str, ...], native: bool
) -> None:
    """Each spelling is dropped from results at any depth, so the results sign the same."""
    sign = Signer(Normaliser(native=native)).sign
    digests = {
        sign("t", "{}", json.dumps({"ok": 1, "meta": {name: n}}), Status.OK).result_digest
        for n, name in enumerate(names)
    }
    assert len(digests) == 1
    assert sign("t", "{}", '{"ok":2,"meta":{}}', Status.OK).result_digest not in digests


@pytest.mark.parametrize("native", [True, False])
def test_the_same_names_in_arguments_are_facts(native: bool) -> None:
    """``wait(duration=5)`` and ``wait(duration=10)`` are two calls, ``get_run`` of two runs too."""
    sign = Signer(Normaliser(native=native)).sign
    for key in ("duration", "runId", "durationMs"):
        one = sign("t", json.dumps({key: 5}), "{}", Status.OK)
        other = sign("t", json.dumps({key: 10}), "{}", Status.OK)
        assert one.call_signature != other.call_signature


RUN_FOLDERS = [
    ("/tmp/tmpab12cd", "/tmp/tmpzz9x8q"),
    ("/tmp/tmp.Xa81kQ0pLm/work", "/tmp/tmp.Q2aa0zPLmk/work"),
    ("/tmp/pytest-of-ana/pytest-12/test_a0", "/tmp/pytest-of-bob/pytest-7/test_a0"),
    ("/var/tmp/xyz123/out.txt", "/var/tmp/qrs987/out.txt"),
    ("/private/var/folders/ab/cd/T/job-2024a1 ok", "/tmp/job-2025b7 ok"),
]


@pytest.mark.parametrize("native", [True, False])
@pytest.mark.parametrize(("one", "other"), RUN_FOLDERS)
def test_per_run_temp_folders_in_results_are_one(one: str, other: str, native: bool) -> None:
    """A result naming its per-run folder (a cwd) is the same result; in arguments, two folders."""
    sign = Signer(Normaliser(native=native)).sign
    first = sign("sh", "{}", json.dumps({"cwd": one}), Status.OK)
    second = sign("sh", "{}", json.dumps({"cwd": other}), Status.OK)
    assert first.result_digest == second.result_digest
    if "pytest-of" not in one:  # pytest's own folders fold in arguments too, as before
        apart = sign("sh", json.dumps({"cwd": one}), "{}", Status.OK).call_signature
        assert apart != sign("sh", json.dumps({"cwd": other}), "{}", "ok").call_signature


@pytest.mark.parametrize("native", [True, False])
def test_named_temp_files_stay_apart(native: bool) -> None:
    """Names no temp-folder maker writes (``report.txt``, ``abc``, ``x12``) stay as they are."""
    sign = Signer(Normaliser(native=native)).sign
    names = ["/tmp/report.txt", "/tmp/notes.txt", "/tmp/abc", "/tmp/x12", "/tmp/abcdefgh"]
    digests = {sign("t", "{}", json.dumps({"path": p}), "ok").result_digest for p in names}
    assert len(digests) == len(names)


def test_policy_edits_apply_per_tool_globs_first() -> None:
    """``*`` adds a key for every tool; a tool's own entry can take it away again."""
    policy = StallPolicy.from_env(
        {"OTEL_STALL_RESULT_VOLATILE_KEYS": "*=+took;search=-took,+hits_total"}
    )
    sign = policy.signer.sign

    def same(tool: str, a: dict[str, Any], b: dict[str, Any]) -> bool:
        one, other = (sign(tool, "{}", json.dumps(r), "ok").result_digest for r in (a, b))
        return one == other

    assert same("fetch", {"took": 1}, {"took": 2})
    assert not same("search", {"took": 1}, {"took": 2})
    assert same("search", {"hits_total": 1}, {"hitsTotal": 2})
    assert not same("fetch", {"hits_total": 1}, {"hits_total": 2})


@pytest.mark.parametrize("spec", ["search", "search=", "=+took", "search=+"])
def test_bad_result_keys_say_how_to_fix_them(spec: str) -> None:
    """A malformed OTEL_STALL_RESULT_VOLATILE_KEYS names the variable and the form."""
    with pytest.raises(ConfigError, match="RESULT_VOLATILE_KEYS"):
        StallPolicy.from_env({"OTEL_STALL_RESULT_VOLATILE_KEYS": spec})
