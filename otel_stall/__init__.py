"""otel-stall: catch AI agents stuck in tool loops by reading their OpenTelemetry spans."""

from otel_stall._version import __version__

__all__ = ["__version__"]
