"""Auto-instrumentation: ``opentelemetry-instrument`` with otel-stall wrapping the exporters.

Under ``opentelemetry-instrument`` the SDK's configurator (``opentelemetry-distro``'s)
builds the tracer provider, with one ``BatchSpanProcessor`` per exporter in
``OTEL_TRACES_EXPORTER``; adding otel-stall beside them would export every span
twice. So otel-stall runs after the set-up instead, as an
``opentelemetry_post_instrument`` hook, and wraps the processors the SDK built
(:func:`~otel_stall.live.install.wrap_provider`), so every span is exported once,
enriched, however many exporters there are::

    OTEL_STALL_INSTRUMENT=true opentelemetry-instrument python app.py

Deliberate decisions:

- **A hook, not a configurator** (issue 29). ``opentelemetry-instrument`` runs
  one configurator and logs "Configuration of X not loaded, Y already loaded"
  for every other one it finds, so a second configurator made every
  auto-instrumented app print a line about otel-stall, chosen or not. A
  post-instrument hook is one of many and says nothing; unselected, it returns.
- **Its own switch.** ``OTEL_STALL_INSTRUMENT`` (off by default), so installing
  otel-stall changes nobody's telemetry unasked. The old
  ``OTEL_PYTHON_CONFIGURATOR=otel_stall`` still selects it, with a warning that
  names the new switch: that setting leaves the SDK unconfigured (no
  configurator has the name), so the hook runs the SDK's own set-up first.
- **Whatever set the provider up.** Wrapping after the fact needs no SDK hook,
  so it works with every SDK otel-stall supports, with other configurators and
  distros, and with the SDK's file configuration (``OTEL_CONFIG_FILE``).
- **Fails open.** A bad ``OTEL_STALL_*`` value, or a provider that is not the
  SDK's, is logged with how to fix it, and the app's spans are exported as the
  set-up left them.
- **Free when off.** ``opentelemetry-instrument`` imports every hook in every
  auto-instrumented app. This module imports nothing of otel-stall's until the
  switch is seen in the environment: unselected, the hook costs a dictionary
  lookup, where importing the processor and the SDK takes about 0.2 s.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from typing import Final

logger = logging.getLogger("otel_stall")

SWITCH: Final = "OTEL_STALL_INSTRUMENT"
"""The variable that turns the hook on (``true``); ``ProcessorSettings.instrument``."""
LEGACY: Final = ("OTEL_PYTHON_CONFIGURATOR", "otel_stall")
"""The earlier way to select otel-stall (a configurator's name), still honoured."""


def post_instrument() -> None:
    """The ``opentelemetry_post_instrument`` entry point: wrap the exporters, if selected."""
    environ = os.environ
    if SWITCH not in environ and not _legacy(environ):
        return  # not asked for: nothing imported, nothing said
    from opentelemetry import trace
    from opentelemetry.sdk.trace import TracerProvider

    from otel_stall.core.config import ConfigError
    from otel_stall.live.install import wrap_provider

    try:
        if not _selected(environ):
            return
        provider = trace.get_tracer_provider()
        if isinstance(provider, trace.ProxyTracerProvider):
            _configure_sdk()  # no configurator ran: nothing would export at all
            provider = trace.get_tracer_provider()
        if not isinstance(provider, TracerProvider):
            logger.error(
                "otel-stall: %s=true, but the tracer provider is a %s, not the SDK's "
                "TracerProvider; spans are exported without otel-stall. Set the SDK's provider "
                "up (opentelemetry-distro), or add StallSpanProcessor to it in code.",
                SWITCH,
                type(provider).__name__,
            )
            return
        wrap_provider(provider, environ)
    except ConfigError as error:
        logger.error("otel-stall: %s; spans are exported without otel-stall.", error)


def _legacy(environ: Mapping[str, str]) -> bool:
    """Whether the configurator's old name selects otel-stall."""
    name, value = LEGACY
    return environ.get(name, "").strip() == value


def _selected(environ: Mapping[str, str]) -> bool:
    """Whether the user asked for otel-stall here: the switch, or the configurator's old name."""
    from otel_stall.live.settings import ProcessorSettings

    name, value = LEGACY
    if _legacy(environ):
        logger.warning(
            "otel-stall: %s=%s is replaced by %s=true: otel-stall is no longer a configurator. "
            "Unset %s and set %s=true; until then otel-stall sets the SDK up itself.",
            name,
            value,
            SWITCH,
            name,
            SWITCH,
        )
        return True
    return ProcessorSettings.from_env(environ).instrument


def _configure_sdk() -> None:
    """The SDK's default set-up, as ``opentelemetry-distro``'s configurator runs it."""
    from opentelemetry.instrumentation.version import __version__
    from opentelemetry.sdk._configuration import _OTelSDKConfigurator

    configurator = _OTelSDKConfigurator()  # type: ignore[no-untyped-call]  # untyped in the SDK
    configurator.configure(auto_instrumentation_version=__version__)  # type: ignore[no-untyped-call]


__all__ = ["LEGACY", "SWITCH", "post_instrument"]
