"""The ``otel-stall serve`` flags: light to import, so the CLI can list them cheaply.

Each flag falls back to its ``OTEL_STALL_GATEWAY_*`` variable, then to the
default, through :meth:`GatewayConfig.from_env`; ``--help`` shows both beside
every flag, from the settings' own metadata, so the text cannot drift from
the code. Errors about a setting name the flag when the user typed it, the
variable when it came from the environment.
"""

from __future__ import annotations

import argparse
import dataclasses
import logging
import os
import re
from collections.abc import Callable, Iterable
from typing import Any, Final

from otel_stall.core.config import ConfigError
from otel_stall.gateway.config import GatewayConfig, parse_duration, parse_size

__all__ = [
    "LOG_LEVELS",
    "add_arguments",
    "build_parser",
    "config_from_args",
    "configure_logging",
    "flag_names",
    "log_level",
]

_ENV: Final = "OTEL_STALL_GATEWAY_"
LOG_LEVELS: Final = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")
_FIELDS: Final = {f.name: f for f in dataclasses.fields(GatewayConfig)}


def _typed(parse: Callable[[str], Any], what: str) -> Callable[[str], Any]:
    """An argparse type whose error says what was expected (argparse adds the flag)."""

    def convert(text: str) -> Any:
        try:
            return parse(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not {what}") from None

    convert.__name__ = what
    return convert


_SIZE: Final = _typed(parse_size, "a size such as 16MiB")
_DURATION: Final = _typed(parse_duration, "a duration such as 10s or 250ms")
_INT: Final = _typed(int, "a whole number")


def log_level(text: str) -> str:
    """One of :data:`LOG_LEVELS`, in any case."""
    level = text.strip().upper()
    if level not in LOG_LEVELS:
        raise argparse.ArgumentTypeError(f"{text!r} is not one of {', '.join(LOG_LEVELS)}")
    return level


@dataclasses.dataclass(frozen=True)
class _Flag:
    """One ``serve`` flag and the setting behind it."""

    flag: str
    setting: str
    help: str
    metavar: str | None = None
    type: Callable[[str], Any] | None = None


_LISTENERS: Final = (
    _Flag("--grpc", "grpc", "OTLP/gRPC listener, or off", "HOST:PORT"),
    _Flag("--http", "http", "OTLP/HTTP /v1/traces listener, or off", "HOST:PORT"),
    _Flag("--metrics", "metrics", "Prometheus /metrics listener, or off", "HOST:PORT"),
    _Flag("--bearer-token", "bearer_token", "require 'Authorization: Bearer TOKEN'", "TOKEN"),
    _Flag(
        "--bearer-token-file",
        "bearer_token_file",
        "read the bearer token from a file (keeps it out of ps)",
        "PATH",
    ),
    _Flag("--tls-cert", "tls_cert", "serve TLS with this certificate chain", "PEM"),
    _Flag("--tls-key", "tls_key", "private key for --tls-cert", "PEM"),
    _Flag("--max-request-bytes", "max_request_bytes", "largest request", "SIZE", _SIZE),
    _Flag(
        "--http-connections", "http_connections", "open HTTP connections; past it, 503", "N", _INT
    ),
    _Flag(
        "--header-timeout",
        "header_timeout",
        "longest wait for a TLS handshake and for request headers",
        "DURATION",
        _DURATION,
    ),
)
_UPSTREAM: Final = (
    _Flag(
        "--upstream",
        "upstream",
        "where enriched spans go: HOST:PORT (OTLP/gRPC) or http(s)://HOST:PORT/v1/traces",
        "ENDPOINT",
    ),
    _Flag("--queue-spans", "queue_spans", "upstream queue bound, in spans", "N", _INT),
    _Flag("--queue-bytes", "queue_bytes", "upstream queue bound, in bytes", "SIZE", _SIZE),
    _Flag(
        "--upstream-max-bytes",
        "upstream_max_bytes",
        "largest message sent upstream; batches are split below it",
        "SIZE",
        _SIZE,
    ),
    _Flag("--export-timeout", "export_timeout", "one upstream call", "DURATION", _DURATION),
    _Flag(
        "--shutdown-timeout",
        "shutdown_timeout",
        "on SIGTERM or Ctrl-C, how long to keep delivering what is held",
        "DURATION",
        _DURATION,
    ),
)
_BUFFERING: Final = (
    _Flag(
        "--decision-wait",
        "decision_wait",
        "longest wait for a trace's root span",
        "DURATION",
        _DURATION,
    ),
    _Flag("--max-traces", "max_traces", "traces held at once", "N", _INT),
    _Flag("--max-spans", "max_spans", "spans held at once, across traces", "N", _INT),
    _Flag("--max-bytes", "max_bytes", "span bytes held at once, across traces", "SIZE", _SIZE),
)
_FLAG_OF: Final = {f.setting: f.flag for f in (*_LISTENERS, *_UPSTREAM, *_BUFFERING)} | {
    "upstream_insecure": "--upstream-tls",
    "detect": "--no-detect",
    "full_attributes": "--full-attributes",
}
"""The flag of each setting that has one, for error messages."""
_SWITCH_ENV: Final = {"listen_all": _ENV + "LISTEN_ALL", "log_level": _ENV + "LOG_LEVEL"}
"""Flags that are no ``GatewayConfig`` setting read these variables themselves."""


def _env(setting: str) -> str:
    env: str = _FIELDS[setting].metadata["env"]
    return env


def _shown(setting: str) -> str:
    """A setting's default as a person would write it: 16MiB, 10s, off."""
    default = _FIELDS[setting].default
    if default is None:
        return "none"
    if isinstance(default, bool):
        return str(default).lower()
    if isinstance(default, float):
        return f"{default:g}s"
    if isinstance(default, int) and default >= 1 << 20 and default % (1 << 20) == 0:
        return f"{default >> 20}MiB"
    return str(default)


def _add(group: Any, flag: _Flag) -> None:
    text = f"{flag.help} (default: {_shown(flag.setting)}; env {_env(flag.setting)})"
    kwargs: dict[str, Any] = {"dest": flag.setting, "metavar": flag.metavar, "help": text}
    if flag.type is not None:
        kwargs["type"] = flag.type
    group.add_argument(flag.flag, **kwargs)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The ``serve`` flags; each one falls back to its ``OTEL_STALL_GATEWAY_*`` variable."""
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.epilog = _epilog()
    listen = parser.add_argument_group("listeners (loopback unless told otherwise)")
    for flag in _LISTENERS[:3]:
        _add(listen, flag)
    listen.add_argument(
        "--listen-all",
        action="store_true",
        default=None,
        help="bind the listeners not given explicitly on 0.0.0.0, for containers "
        f"(default: false; env {_SWITCH_ENV['listen_all']}=true)",
    )
    for flag in _LISTENERS[3:]:
        _add(listen, flag)
    up = parser.add_argument_group("upstream")
    _add(up, _UPSTREAM[0])
    up.add_argument(
        "--upstream-tls",
        dest="upstream_tls",
        action="store_true",
        help=f"use TLS for a gRPC upstream (default: off; env {_env('upstream_insecure')}=false)",
    )
    for flag in _UPSTREAM[1:]:
        _add(up, flag)
    buf = parser.add_argument_group("per-trace buffering")
    for flag in _BUFFERING:
        _add(buf, flag)
    buf.add_argument(
        "--no-detect",
        dest="detect",
        action="store_false",
        default=None,
        help=f"pass spans through without detection, a baseline (env {_env('detect')}=false)",
    )
    buf.add_argument(
        "--full-attributes",
        dest="full_attributes",
        action="store_true",
        default=None,
        help="write the stall.* attributes at their defaults too "
        f"(default: false; env {_env('full_attributes')}=true)",
    )
    parser.add_argument(
        "--log-level",
        type=log_level,
        metavar="LEVEL",
        help=f"{', '.join(LOG_LEVELS)} (default: INFO; env {_SWITCH_ENV['log_level']})",
    )


def _epilog() -> str:
    """The settings that have no flag, with their variables and defaults."""
    flagged = set(_FLAG_OF)
    rest = [name for name, f in _FIELDS.items() if f.init and name not in flagged]
    lines = ["settings without a flag (environment only):"]
    lines += [f"  {_env(name):<40} default {_shown(name)}" for name in rest]
    return "\n".join(lines)


def build_parser() -> argparse.ArgumentParser:
    """A parser with just the ``serve`` flags."""
    parser = argparse.ArgumentParser(
        prog="otel-stall serve",
        description="OTLP gateway: detect agents stuck in tool loops, forward enriched spans.",
    )
    add_arguments(parser)
    return parser


_FLAG_SETTINGS: Final = (
    "grpc", "http", "metrics", "upstream", "bearer_token", "bearer_token_file", "tls_cert",
    "tls_key", "max_request_bytes", "http_connections", "header_timeout", "queue_spans",
    "queue_bytes", "upstream_max_bytes", "export_timeout", "shutdown_timeout",
    "decision_wait", "max_traces", "max_spans", "max_bytes", "detect", "full_attributes",
)  # fmt: skip


def config_from_args(args: argparse.Namespace) -> GatewayConfig:
    """Flags first, then ``OTEL_STALL_GATEWAY_*``, then defaults.

    A :class:`ConfigError` names each setting by its flag unless its value
    came from the environment (then the variable is named, by ``resolve``).
    """
    explicit = {name: getattr(args, name, None) for name in _FLAG_SETTINGS}
    if getattr(args, "upstream_tls", False):
        explicit["upstream_insecure"] = False
    if _listen_all(args):
        for name in ("grpc", "http", "metrics"):
            if explicit[name] is None:
                explicit[name] = "0.0.0.0:" + str(_FIELDS[name].default).rpartition(":")[2]
    try:
        return GatewayConfig.from_env(**explicit)
    except ConfigError as exc:
        from_env = {
            name for name, value in explicit.items() if value is None and _env(name) in os.environ
        }
        raise ConfigError(flag_names(str(exc), from_env)) from None


def _listen_all(args: argparse.Namespace) -> bool:
    flag = getattr(args, "listen_all", None)
    if flag is not None:
        return bool(flag)
    return os.environ.get(_SWITCH_ENV["listen_all"], "").strip().lower() in ("1", "true", "yes")


def flag_names(message: str, from_env: Iterable[str] = ()) -> str:
    """``max_traces`` becomes ``--max-traces`` in an error, unless the environment set it.

    One-word settings (``grpc``, ``http``...) are renamed only where they open
    the message, so that an ``http://`` in a value stays as it is.
    """
    skip = set(from_env)
    for setting in sorted(_FLAG_OF, key=len, reverse=True):
        if setting not in skip:
            pattern = rf"\b{setting}\b" if "_" in setting else rf"^{setting}(?=:)"
            message = re.sub(pattern, _FLAG_OF[setting], message)
    return message


def configure_logging(args: argparse.Namespace) -> None:
    """Log at ``--log-level``, else ``OTEL_STALL_GATEWAY_LOG_LEVEL``, else INFO.

    Raises :class:`ConfigError` naming the variable when its value is not a level
    (the flag itself is checked by the parser).
    """
    level = getattr(args, "log_level", None)
    if level is None:
        variable = _SWITCH_ENV["log_level"]
        raw = os.environ.get(variable, "INFO")
        try:
            level = log_level(raw)
        except argparse.ArgumentTypeError as exc:
            raise ConfigError(f"{variable}={raw!r}: {exc}") from None
    logging.basicConfig(level=level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
