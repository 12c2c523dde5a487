"""One call to add otel-stall to a process: ``otel_stall.install()``.

It builds a :class:`StallSpanProcessor` from the ``OTEL_STALL_*`` environment
(and any keyword settings), wraps the exporter the standard
``OTEL_EXPORTER_OTLP_*`` variables ask for, and adds the result to the given
SDK ``TracerProvider``, or to the global one, creating and installing an SDK
provider when the global is still the API's proxy (with the sampler that
``OTEL_TRACES_SAMPLER`` names, otel-stall's own included).

Spans never end up with nowhere to go (issue 29). Tools that set tracing up
for the user (Phoenix's ``register()``, Logfire's ``configure()``, Langfuse's
client) leave their exporting processors on the provider; when install() is
given no exporter of its own, it takes those processors out of the provider
and wraps them, in their order, so they export the enriched spans instead of
the plain ones (once each). Phoenix's provider drops its own processor when
another is added, and Logfire's global provider is a proxy of an SDK one:
both are why install() does not simply add itself. With nothing to wrap and
nothing asked for, it warns once, naming what to pass.
"""

from __future__ import annotations

import logging
import os
import threading
import weakref
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from opentelemetry import trace
from opentelemetry._logs import LoggerProvider
from opentelemetry.metrics import MeterProvider
from opentelemetry.sdk.trace import SpanLimits, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter

from otel_stall.conventions import Conventions
from otel_stall.core.config import ConfigError
from otel_stall.core.policy import StallPolicy
from otel_stall.core.records import Finding
from otel_stall.live.fork import reset_in_child
from otel_stall.live.processor import StallSpanProcessor
from otel_stall.live.sampler import sampler_from_env
from otel_stall.live.settings import ProcessorSettings


class _Installed:
    """The processor installed on each provider, and the lock around that table.

    Its lock is renewed in a forked child (:mod:`otel_stall.live.fork`), in case
    another of the parent's threads held it at the fork (issue 27).
    """

    def __init__(self) -> None:
        self.by_provider: weakref.WeakKeyDictionary[TracerProvider, StallSpanProcessor] = (
            weakref.WeakKeyDictionary()
        )
        self.lock = threading.Lock()
        reset_in_child(self)

    def _after_fork(self) -> None:
        self.lock = threading.Lock()


_INSTALLED = _Installed()


def installed_on(provider: object) -> StallSpanProcessor | None:
    """The processor :func:`install` (or auto-instrumentation) put on ``provider``, if any.

    The framework integrations ask this to find the live gate without a
    reference to the processor (issue 30); a lookup, so it is cheap to repeat.
    """
    if not isinstance(provider, TracerProvider):
        return None
    with _INSTALLED.lock:
        return _INSTALLED.by_provider.get(provider)


_log = logging.getLogger("otel_stall")
_NOWHERE = (
    "otel_stall.install(): the tracer provider has no span processor and no exporter was "
    "asked for, so spans are exported nowhere (the stall.* events and metrics still happen). "
    "Pass exporter=OTLPSpanExporter(endpoint=...) or downstream=[BatchSpanProcessor(...)], "
    "set OTEL_EXPORTER_OTLP_ENDPOINT, or call install() after the tool that sets up your "
    "exporters (phoenix.otel.register(), logfire.configure(), Langfuse())"
)
_UNREADABLE = (
    "otel_stall.install(): cannot read the span processors of this {kind}, so it cannot wrap "
    "them: they export spans without the stall.* attributes. Pass the exporter otel-stall "
    "should wrap (exporter=... or downstream=...) and remove it from the provider"
)
_warned: set[str] = set()


def _warn_once(kind: str, message: str) -> None:
    """A setup problem the user can fix: logged once per kind for the process."""
    if kind not in _warned:
        _warned.add(kind)
        _log.warning(message)


_ENDPOINT = "OTEL_EXPORTER_OTLP_ENDPOINT"
_TRACES_ENDPOINT = "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"
_PROTOCOL = "OTEL_EXPORTER_OTLP_PROTOCOL"
_TRACES_PROTOCOL = "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"
_TRACES_EXPORTER = "OTEL_TRACES_EXPORTER"


def otlp_exporter_from_env(environ: Mapping[str, str] | None = None) -> SpanExporter | None:
    """The OTLP exporter the standard variables ask for, or ``None`` if they ask for none.

    An endpoint variable, or ``OTEL_TRACES_EXPORTER=otlp``, selects OTLP; the
    protocol variables choose ``grpc`` (the default) or ``http/protobuf``.
    ``OTEL_TRACES_EXPORTER=none`` means no exporter, endpoint or not, as the
    specification says: an endpoint set for metrics or logs must not start
    exporting traces. Other exporters by name are not built here.
    """
    env = os.environ if environ is None else environ
    endpoint = env.get(_TRACES_ENDPOINT) or env.get(_ENDPOINT)
    named = {p.strip() for p in env.get(_TRACES_EXPORTER, "").lower().split(",")} - {""}
    if "none" in named:
        return None
    if named and "otlp" not in named:
        raise ConfigError(
            f"{_TRACES_EXPORTER}={env[_TRACES_EXPORTER]!r}: otel_stall.install() builds only "
            "the OTLP exporter from the environment; set it to 'otlp' or 'none', or pass "
            "exporter=... (ConsoleSpanExporter(), say) or downstream=... explicitly"
        )
    if not endpoint and not named:
        return None
    protocol = (env.get(_TRACES_PROTOCOL) or env.get(_PROTOCOL) or "grpc").strip().lower()
    if protocol == "grpc":
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import (
            OTLPSpanExporter as GrpcExporter,
        )

        return GrpcExporter(endpoint=endpoint or None)
    if protocol in ("http/protobuf", "http"):
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import (
            OTLPSpanExporter as HttpExporter,
        )

        if env.get(_TRACES_ENDPOINT):
            url = env[_TRACES_ENDPOINT]
        elif endpoint:
            url = endpoint.rstrip("/") + "/v1/traces"
        else:
            url = None
        return HttpExporter(endpoint=url)
    var = _TRACES_PROTOCOL if env.get(_TRACES_PROTOCOL) else _PROTOCOL
    raise ConfigError(
        f"{var}={protocol!r} is not supported by otel_stall.install(): "
        "set it to 'grpc' or 'http/protobuf', or pass exporter=... explicitly"
    )


def _unwrapped(provider: Any) -> Any:
    """The SDK provider behind a tool's proxy (Logfire's ``ProxyTracerProvider.provider``)."""
    inner = getattr(provider, "provider", None)
    if not isinstance(provider, TracerProvider) and isinstance(inner, TracerProvider):
        return inner
    return provider


def _sdk_provider(
    provider: TracerProvider | None,
    environ: Mapping[str, str] | None,
    span_limits: SpanLimits | None,
) -> TracerProvider:
    if provider is not None:
        inner = _unwrapped(provider)
        if not isinstance(inner, TracerProvider):
            raise ConfigError(
                f"provider is a {type(provider).__name__}, not the SDK's TracerProvider: pass "
                "an opentelemetry.sdk.trace.TracerProvider"
            )
        return inner
    current = _unwrapped(trace.get_tracer_provider())
    if isinstance(current, TracerProvider):
        return current
    if isinstance(current, trace.ProxyTracerProvider):
        # The SDK's provider reads OTEL_TRACES_SAMPLER itself, but knows only its own names.
        created = TracerProvider(sampler=sampler_from_env(environ), span_limits=span_limits)
        trace.set_tracer_provider(created)
        # Another thread may have won the race; use whatever is global now.
        final = trace.get_tracer_provider()
        if isinstance(final, TracerProvider):
            return final
    raise ConfigError(
        f"the global tracer provider is a {type(current).__name__}, not the SDK's "
        "TracerProvider: pass provider=... (an opentelemetry.sdk.trace.TracerProvider)"
    )


def install(
    provider: TracerProvider | None = None,
    *,
    exporter: SpanExporter | None = None,
    downstream: SpanProcessor | Sequence[SpanProcessor] | None = None,
    policy: StallPolicy | None = None,
    conventions: Conventions | None = None,
    meter_provider: MeterProvider | None = None,
    logger_provider: LoggerProvider | None = None,
    on_finding: Callable[[Finding], None] | None = None,
    environ: Mapping[str, str] | None = None,
    span_limits: SpanLimits | None = None,
    **settings: Any,
) -> StallSpanProcessor:
    """Build a :class:`StallSpanProcessor` and add it to ``provider`` (or the global one).

    Downstream, in order of precedence: ``downstream`` processors as given;
    ``BatchSpanProcessor(exporter)``; a ``BatchSpanProcessor`` around the OTLP
    exporter that ``OTEL_EXPORTER_OTLP_*`` selects; else the processors already
    on the provider (Phoenix's, Logfire's, Langfuse's, the user's own), taken out
    of it and wrapped; else nothing, with a warning once (events, metrics and
    callbacks still happen). ``settings`` are :class:`ProcessorSettings` fields
    (``redact=True``, ``max_runs=...``); the policy and conventions come from
    ``OTEL_STALL_*`` unless given. ``span_limits`` are those ``provider`` was
    given in code, if any (a provider install() creates gets them too): the
    enriched copies obey them. Installing twice on one provider returns the
    processor already installed, and so does installing on the provider that
    ``OTEL_STALL_INSTRUMENT=true opentelemetry-instrument`` set up.
    """
    target = _sdk_provider(provider, environ, span_limits)

    def chosen() -> tuple[SpanProcessor, ...] | None:
        if downstream is not None:
            return (downstream,) if isinstance(downstream, SpanProcessor) else tuple(downstream)
        picked = exporter if exporter is not None else otlp_exporter_from_env(environ)
        return None if picked is None else (BatchSpanProcessor(picked),)

    return _register(
        target,
        chosen,
        lambda processors: StallSpanProcessor(
            *processors,
            policy=policy or StallPolicy.from_env(environ),
            conventions=conventions or Conventions.from_env(environ),
            meter_provider=meter_provider,
            logger_provider=logger_provider,
            on_finding=on_finding,
            settings=ProcessorSettings.from_env(environ, **settings),
            span_limits=span_limits,
        ),
    )


def wrap_provider(
    provider: TracerProvider, environ: Mapping[str, str] | None = None
) -> StallSpanProcessor:
    """Wrap the processors already on ``provider``, whatever ``OTEL_EXPORTER_OTLP_*`` says.

    Auto-instrumentation's hook (:mod:`otel_stall.live.auto_instrument`): the SDK's
    set-up has built one batch processor per exporter from the same variables
    that :func:`install` would read, so building another would export every span
    twice. Settings come from ``OTEL_STALL_*`` only; a second call returns the first
    call's processor, as :func:`install` does.
    """
    return _register(
        provider,
        lambda: None,
        lambda processors: StallSpanProcessor(
            *processors,
            policy=StallPolicy.from_env(environ),
            conventions=Conventions.from_env(environ),
            settings=ProcessorSettings.from_env(environ),
        ),
    )


def _register(
    target: TracerProvider,
    downstream: Callable[[], tuple[SpanProcessor, ...] | None],
    make: Callable[[tuple[SpanProcessor, ...]], StallSpanProcessor],
) -> StallSpanProcessor:
    """The one processor on ``target``: the one already there, or a new one put in place.

    ``downstream`` gives the processors the new one wraps, or ``None`` for the
    provider's own (taken out of it; if it has none, the new one is added as
    usual); ``make`` builds it around them. Both are called only when none is
    installed yet, so a second install() reads no settings and starts no exporter.
    """
    with _INSTALLED.lock:
        existing = _INSTALLED.by_provider.get(target)
        if existing is not None:
            return existing
        processors = downstream()
        processor = make(processors or ())
        if not (processors is None and _wrap_existing(target, processor)):
            target.add_span_processor(processor)
        _INSTALLED.by_provider[target] = processor
        return processor


def _wrap_existing(target: TracerProvider, processor: StallSpanProcessor) -> bool:
    """Put ``processor`` in place of the provider's own processors, which it then wraps.

    The swap is one store of the provider's processor tuple, under the lock the
    SDK's ``add_span_processor`` takes, so no span ends while none is there.
    Returns false, having warned, when there is nothing to wrap (the caller adds
    the processor as usual) or the provider's processors cannot be read.
    """
    multi = getattr(target, "_active_span_processor", None)
    lock = getattr(multi, "_lock", None)
    if (
        multi is None
        or lock is None
        or not isinstance(getattr(multi, "_span_processors", None), tuple)
    ):
        _warn_once("unreadable", _UNREADABLE.format(kind=type(target).__name__))
        return False
    with lock:
        existing: tuple[SpanProcessor, ...] = multi._span_processors
        if not existing:
            _warn_once("nowhere", _NOWHERE)
            return False
        for inner in existing:
            processor.add_span_processor(inner)
        multi._span_processors = (processor,)
    return True


__all__ = ["install", "installed_on", "otlp_exporter_from_env", "wrap_provider"]
