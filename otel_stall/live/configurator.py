"""Auto-instrumentation: ``opentelemetry-instrument`` with otel-stall wrapping the exporters.

Under ``opentelemetry-instrument`` the SDK builds the tracer provider itself,
with one ``BatchSpanProcessor`` per exporter in ``OTEL_TRACES_EXPORTER``, and
offers no public way to take those processors over afterwards: adding otel-stall
with :func:`otel_stall.install` would export every span twice. What the SDK
offers instead is the configurator entry point, which distros use to adjust
its set-up. otel-stall registers one named ``otel_stall``::

    OTEL_PYTHON_CONFIGURATOR=otel_stall opentelemetry-instrument python app.py

It runs the SDK's own set-up with one change: the exporters' batch processors
are wrapped by a single :class:`~otel_stall.live.processor.StallSpanProcessor`,
configured from ``OTEL_STALL_*``, so every span is exported once, enriched.

It takes effect only when chosen by name. Installed beside another configurator
(``opentelemetry-distro``'s) with ``OTEL_PYTHON_CONFIGURATOR`` unset, either may
be the one ``opentelemetry-instrument`` runs (it takes the first it finds). When
it is this one, it runs the other configurator in its place, and the
instrumentation's "Configuration of configurator not loaded, otel_stall already
loaded" for it is not printed (issue 29): installing otel-stall changes nobody's
telemetry, nor their output, unasked. Alone, it does what the SDK's default does.
When the other is found first, otel-stall's code never runs, and the
instrumentation's own line naming otel_stall cannot be silenced from here.

The SDK's hook for the exporters' processor arrived in opentelemetry-sdk 1.40.
On an older SDK the set-up goes on without otel-stall (failing open) and an
error says how to fix it. So it does when ``OTEL_CONFIG_FILE`` is set: the SDK's
file configuration (1.43 on) ignores what any configurator asks.
"""

from __future__ import annotations

import inspect
import logging
import os
from importlib.metadata import entry_points
from typing import Any, Final

from opentelemetry import trace
from opentelemetry.sdk import environment_variables
from opentelemetry.sdk._configuration import _initialize_components, _OTelSDKConfigurator
from opentelemetry.sdk.trace import SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter

from otel_stall.live.install import adopt
from otel_stall.live.processor import StallSpanProcessor

logger = logging.getLogger("otel_stall")

NAME: Final = "otel_stall"
"""The entry point's name: the value of ``OTEL_PYTHON_CONFIGURATOR`` that selects it."""

_SELECT: Final = "OTEL_PYTHON_CONFIGURATOR"
_GROUP: Final = "opentelemetry_configurator"
_HOOK: Final = "export_span_processor"
SDK_HAS_HOOK: Final = _HOOK in inspect.signature(_initialize_components).parameters
"""Whether this SDK lets a configurator choose the exporters' processor (1.40 and later)."""
_CONFIG_FILE: Final = "OTEL_CONFIG_FILE"
SDK_READS_CONFIG_FILE: Final = hasattr(environment_variables, _CONFIG_FILE)
"""Whether this SDK configures itself from ``OTEL_CONFIG_FILE`` (1.43 and later), which then
overrides every configurator's changes."""


class StallConfigurator(_OTelSDKConfigurator):
    """The SDK's default configurator, with each exporter's processor wrapped by otel-stall.

    Subclassing the SDK's configurator is how the SDK asks distros to adjust its
    set-up; everything but the exporters' processor stays the SDK's.
    """

    def _configure(self, **kwargs: Any) -> None:
        if not os.environ.get(_SELECT, "").strip() and _ran_another(kwargs):
            return
        if os.environ.get(_SELECT, "").strip() == NAME and _HOOK not in kwargs:
            if SDK_READS_CONFIG_FILE and os.environ.get(_CONFIG_FILE):
                logger.error(
                    "otel-stall: %s is set, and the SDK's file configuration takes no "
                    "configurator's changes; spans are exported without otel-stall. Unset %s, "
                    "or add StallSpanProcessor in code.",
                    _CONFIG_FILE,
                    _CONFIG_FILE,
                )
            elif SDK_HAS_HOOK:
                kwargs[_HOOK] = ExporterWrapper()
            else:
                logger.error(
                    "otel-stall: %s=%s needs opentelemetry-sdk 1.40 or later, which lets a "
                    "configurator choose the exporters' processor; spans are exported without "
                    "otel-stall. Upgrade opentelemetry-sdk, or run without auto-instrumentation "
                    "and call otel_stall.install().",
                    _SELECT,
                    NAME,
                )
        super()._configure(**kwargs)  # type: ignore[no-untyped-call]  # the SDK leaves it untyped
        wrapper = kwargs.get(_HOOK)
        if isinstance(wrapper, ExporterWrapper) and wrapper.processor is not None:
            provider = trace.get_tracer_provider()
            if isinstance(provider, TracerProvider):
                adopt(provider, wrapper.processor)  # install() in the app then returns it


_LOADER_LOGGER: Final = "opentelemetry.instrumentation.auto_instrumentation._load"
_SKIPPED: Final = "Configuration of %s not loaded, %s already loaded"


def _ran_another(kwargs: dict[str, Any]) -> bool:
    """Unselected: run the first other configurator installed, as if found first; False if none.

    The instrumentation then skips that one, saying otel_stall was loaded instead:
    that one line is filtered out, since nothing of otel-stall's was loaded.
    """
    others = [ep for ep in entry_points(group=_GROUP) if ep.name != NAME]
    if not others:
        return False
    logging.getLogger(_LOADER_LOGGER).addFilter(_not_about_us)
    others[0].load()().configure(**kwargs)
    return True


def _not_about_us(record: logging.LogRecord) -> bool:
    """Drop "Configuration of X not loaded, otel_stall already loaded"; keep every other line."""
    args = record.args
    return not (
        record.msg == _SKIPPED and isinstance(args, tuple) and len(args) == 2 and args[1] == NAME
    )


class ExporterWrapper:
    """The SDK's ``export_span_processor`` hook: one StallSpanProcessor for all exporters.

    The SDK calls it once per exporter and registers what it returns. The first
    exporter's batch processor is wrapped by a new :class:`StallSpanProcessor`;
    later ones join that same processor, so detection runs once per span
    whatever the number of exporters, and the SDK registers a no-op for them.
    """

    def __init__(self) -> None:
        self.processor: StallSpanProcessor | None = None
        """The one StallSpanProcessor, once the SDK has asked for the first exporter's."""

    def __call__(self, exporter: SpanExporter) -> SpanProcessor:
        """The processor the SDK registers for ``exporter``."""
        batch = BatchSpanProcessor(exporter)
        if self.processor is None:
            self.processor = StallSpanProcessor(batch)
            return self.processor
        self.processor.add_span_processor(batch)
        return SpanProcessor()  # the base class does nothing: the batch is wrapped already


__all__ = ["NAME", "SDK_HAS_HOOK", "SDK_READS_CONFIG_FILE", "ExporterWrapper", "StallConfigurator"]
