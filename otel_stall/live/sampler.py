"""Head sampling that still lets otel-stall see every run.

A span that a sampler drops is never recorded: no processor sees it, so a
pipeline that exports one trace in a hundred would catch loops in one run in a
hundred. The agents that burn a budget are the very runs nobody chose to keep.

:class:`RecordAllSampler` wraps the sampler that decides what is exported and
turns its "drop" into "record only". Every span is then recorded, so the
processor detects on every run (findings, metrics, ``on_finding`` and the live
gate), while the sampled flag, and so what the SDK's batch and simple
processors export, is still the wrapped sampler's choice. The cost is that of
recording the spans that would have been dropped. A downstream processor that
exports without checking the sampled flag would now export them too; the SDK's
own processors check it.

For auto-instrumentation, the SDK loads samplers by name from the environment:
``OTEL_TRACES_SAMPLER=otel_stall_parentbased_traceidratio`` with
``OTEL_TRACES_SAMPLER_ARG=0.01`` is the SDK's ``parentbased_traceidratio``
wrapped, and ``otel_stall_traceidratio`` the same for ``traceidratio``.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Mapping, Sequence
from typing import Final

from opentelemetry.context import Context
from opentelemetry.sdk.trace.sampling import (
    Decision,
    ParentBasedTraceIdRatio,
    Sampler,
    SamplingResult,
    TraceIdRatioBased,
)
from opentelemetry.trace import Link, SpanKind
from opentelemetry.trace.span import TraceState
from opentelemetry.util.types import Attributes

from otel_stall.core.config import ConfigError


class RecordAllSampler(Sampler):
    """Records every span; ``sampler`` still decides which are sampled, and so exported."""

    def __init__(self, sampler: Sampler) -> None:
        self.sampler = sampler
        """The sampler whose decision sets the sampled flag."""

    def should_sample(
        self,
        parent_context: Context | None,
        trace_id: int,
        name: str,
        kind: SpanKind | None = None,
        attributes: Attributes = None,
        links: Sequence[Link] | None = None,
        trace_state: TraceState | None = None,
    ) -> SamplingResult:
        """The wrapped sampler's result, with "drop" made "record only"."""
        result = self.sampler.should_sample(
            parent_context, trace_id, name, kind, attributes, links, trace_state
        )
        if result.decision is not Decision.DROP:
            return result
        # The SDK gives a recorded span the result's attributes, and samplers leave them
        # out of a drop: the span's own go back in. The trace state is the wrapped
        # sampler's, which may carry sampling data that must propagate.
        return SamplingResult(Decision.RECORD_ONLY, attributes, result.trace_state)

    def get_description(self) -> str:
        """Names the wrapped sampler, as the SDK's ``ParentBased`` does."""
        return f"RecordAllSampler{{{self.sampler.get_description()}}}"


def _rate(arg: str | float | None) -> float:
    """``OTEL_TRACES_SAMPLER_ARG`` as a ratio: unset means 1.0, as for the SDK's own samplers."""
    if arg is None or (isinstance(arg, str) and not arg.strip()):
        return 1.0
    try:
        rate = float(arg)
    except ValueError:
        rate = math.nan  # refused below, with the same advice
    if not 0.0 <= rate <= 1.0:
        raise ConfigError(
            f"OTEL_TRACES_SAMPLER_ARG={arg!r} is not a ratio: give the fraction of "
            "traces to export, from 0 to 1 (0.01 exports one in a hundred)"
        )
    return rate


def parent_based_ratio(arg: str | float | None) -> Sampler:
    """``OTEL_TRACES_SAMPLER=otel_stall_parentbased_traceidratio``: the SDK's, recording all."""
    return RecordAllSampler(ParentBasedTraceIdRatio(_rate(arg)))


def ratio(arg: str | float | None) -> Sampler:
    """``OTEL_TRACES_SAMPLER=otel_stall_traceidratio``: the SDK's ratio sampler, recording all."""
    return RecordAllSampler(TraceIdRatioBased(_rate(arg)))


BY_NAME: Final[dict[str, Callable[[str | float | None], Sampler]]] = {
    "otel_stall_parentbased_traceidratio": parent_based_ratio,
    "otel_stall_traceidratio": ratio,
}
"""The ``OTEL_TRACES_SAMPLER`` names otel-stall answers to (its sampler entry points)."""


def sampler_from_env(environ: Mapping[str, str] | None = None) -> Sampler | None:
    """The sampler ``OTEL_TRACES_SAMPLER`` names if it is one of otel-stall's, else ``None``.

    For providers built outside auto-instrumentation (``otel_stall.install()``):
    the SDK's ``TracerProvider()`` knows only its own sampler names.
    """
    env = os.environ if environ is None else environ
    factory = BY_NAME.get(env.get("OTEL_TRACES_SAMPLER", "").strip().lower())
    return None if factory is None else factory(env.get("OTEL_TRACES_SAMPLER_ARG"))


__all__ = ["BY_NAME", "RecordAllSampler", "parent_based_ratio", "ratio", "sampler_from_env"]
