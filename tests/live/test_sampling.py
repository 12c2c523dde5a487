"""RecordAllSampler: every run is detected; the wrapped sampler still decides what is exported."""

from __future__ import annotations

from collections.abc import Callable
from importlib.metadata import entry_points
from typing import Any

import pytest
from opentelemetry.sdk.trace.sampling import (
    ALWAYS_OFF,
    ALWAYS_ON,
    Decision,
    ParentBased,
    ParentBasedTraceIdRatio,
    Sampler,
    SamplingResult,
    TraceIdRatioBased,
)
from opentelemetry.trace.span import TraceState
from stall_pipeline import STYLES, Agent, Call, Pipeline, make_pipeline

from otel_stall import ConfigError, Finding, RecordAllSampler
from otel_stall.live.sampler import BY_NAME, parent_based_ratio, ratio, sampler_from_env

SEARCH = Call("search", {"q": 1}, {"hits": [1]})
SAMPLED = Decision.RECORD_AND_SAMPLE
ROUNDS = 5


def looping_run(pipe: Pipeline) -> None:
    """One agent run that repeats the same search every round."""
    agent = Agent(pipe.tracer, STYLES[0])
    with agent.run():
        for _ in range(ROUNDS):
            agent.round(SEARCH)


def identity(finding: Finding) -> tuple[str, str, int]:
    """What a finding is, without its run's ids (which differ between pipelines)."""
    return finding.kind.value, finding.action.value, finding.seq


@pytest.mark.parametrize(
    ("inner", "exported"),
    [
        (ALWAYS_OFF, False),
        (ParentBased(ALWAYS_OFF), False),
        (TraceIdRatioBased(0.0), False),
        (ParentBasedTraceIdRatio(0.0), False),
        (ALWAYS_ON, True),
    ],
    ids=["always_off", "parentbased_always_off", "ratio 0", "parentbased ratio 0", "always_on"],
)
def test_every_run_is_detected_whatever_is_exported(inner: Sampler, exported: bool) -> None:
    """Findings, verdict and metrics are those of a fully sampled run; export follows ``inner``."""
    reference = make_pipeline()
    looping_run(reference)
    pipe = make_pipeline(sampler=RecordAllSampler(inner))
    looping_run(pipe)
    assert [identity(f) for f in pipe.findings] == [identity(f) for f in reference.findings]
    assert pipe.findings
    assert pipe.metrics() == reference.metrics()
    assert len(pipe.spans()) == (len(reference.spans()) if exported else 0)


def test_the_sampled_choice_is_the_wrapped_samplers() -> None:
    """Whole traces are exported exactly when the wrapped ratio sampler samples their trace id."""
    pipe = make_pipeline(sampler=RecordAllSampler(ParentBasedTraceIdRatio(0.5)))
    judge = TraceIdRatioBased(0.5)
    trace_ids = []
    for _ in range(40):
        with pipe.tracer.start_as_current_span("GET /") as root:
            trace_ids.append(root.get_span_context().trace_id)
            for _ in range(2):
                with pipe.tracer.start_as_current_span("SELECT"):
                    pass
    chosen = {t for t in trace_ids if judge.should_sample(None, t, "GET /").decision is SAMPLED}
    sent: dict[int, int] = {}
    for span in pipe.spans():
        assert span.context is not None
        sent[span.context.trace_id] = sent.get(span.context.trace_id, 0) + 1
    assert set(sent) == chosen
    assert set(sent.values()) <= {3}  # a trace is exported whole or not at all


class DropWithState(Sampler):
    """Drops every span, and puts sampling data in the trace state, as consistent samplers do."""

    STATE = TraceState([("ot", "th:fd70a4")])

    def should_sample(self, *args: Any, **kwargs: Any) -> SamplingResult:
        return SamplingResult(Decision.DROP, None, self.STATE)

    def get_description(self) -> str:
        return "DropWithState"


def test_a_recorded_span_keeps_its_own_attributes_and_the_wrapped_trace_state() -> None:
    """Samplers leave attributes out of a drop; the recorded span still has those it began with."""
    sampler = RecordAllSampler(DropWithState())
    pipe = make_pipeline(sampler=sampler)
    span = pipe.tracer.start_span("execute_tool search", attributes={"gen_ai.tool.name": "search"})
    assert span.is_recording()
    assert not span.get_span_context().trace_flags.sampled
    assert span.get_span_context().trace_state == DropWithState.STATE
    assert span.attributes == {"gen_ai.tool.name": "search"}  # type: ignore[attr-defined]
    span.end()
    assert sampler.get_description() == "RecordAllSampler{DropWithState}"


@pytest.mark.parametrize(
    ("factory", "arg", "described"),
    [
        (parent_based_ratio, "0.25", "TraceIdRatioBased{0.25}"),
        (parent_based_ratio, None, "TraceIdRatioBased{1.0}"),
        (ratio, " 0 ", "TraceIdRatioBased{0.0}"),
        (ratio, "", "TraceIdRatioBased{1.0}"),
    ],
)
def test_env_factories_read_the_ratio(
    factory: Callable[[str | None], Sampler], arg: str | None, described: str
) -> None:
    """OTEL_TRACES_SAMPLER_ARG is the ratio; unset means 1.0, as for the SDK's own samplers."""
    sampler = factory(arg)
    assert isinstance(sampler, RecordAllSampler)
    assert described in sampler.get_description()
    if factory is parent_based_ratio:
        assert sampler.get_description().startswith("RecordAllSampler{ParentBased{")


@pytest.mark.parametrize("arg", ["ten percent", "1.5", "-0.1", "nan"])
def test_env_factories_refuse_a_bad_ratio_and_say_what_to_give(arg: str) -> None:
    """A ratio that is not a number from 0 to 1 is refused with the variable and the fix."""
    with pytest.raises(ConfigError, match=r"OTEL_TRACES_SAMPLER_ARG=.*from 0 to 1"):
        parent_based_ratio(arg)


def test_its_env_names_are_its_sampler_entry_points() -> None:
    """The names install() resolves are exactly those the SDK finds as otel-stall's entry points."""
    found = {
        ep.name: ep.load()
        for ep in entry_points(group="opentelemetry_traces_sampler")
        if ep.value.startswith("otel_stall.")
    }
    assert found == BY_NAME


@pytest.mark.parametrize(
    ("environ", "described"),
    [
        (
            {"OTEL_TRACES_SAMPLER": "otel_stall_parentbased_traceidratio"},
            "{ParentBased{root:TraceIdRatioBased{1.0},",
        ),
        (
            {"OTEL_TRACES_SAMPLER": " OTEL_STALL_TRACEIDRATIO ", "OTEL_TRACES_SAMPLER_ARG": "0.5"},
            "RecordAllSampler{TraceIdRatioBased{0.5}}",
        ),
        ({"OTEL_TRACES_SAMPLER": "parentbased_traceidratio"}, None),
        ({}, None),
    ],
)
def test_sampler_from_env_answers_only_to_its_own_names(
    environ: dict[str, str], described: str | None
) -> None:
    """Its own names give a RecordAllSampler; the SDK's names and none are left to the SDK."""
    sampler = sampler_from_env(environ)
    if described is None:
        assert sampler is None
    else:
        assert isinstance(sampler, RecordAllSampler)
        assert described in sampler.get_description()
