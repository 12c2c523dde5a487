"""``otel-stall replay URL``'s flags: how long and how much a trace store's API is asked.

The fetching is :mod:`otel_stall.offline.store_api`; here its settings come
from the flags (then ``OTEL_STALL_STORE_*``, then the defaults), and what it
refuses becomes a usage error (exit 2) naming the URL.
"""

from __future__ import annotations

import argparse
import contextlib
import tempfile
from collections.abc import Iterator
from typing import IO

from otel_stall.cli.common import UsageError
from otel_stall.offline.deadline import seconds_argument

__all__ = ["add_store_arguments", "spooled_store"]


def _count(text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"expected a whole number above 0, got {text!r}")
    return int(text)


def add_store_arguments(parser: argparse.ArgumentParser) -> None:
    """The ``trace store`` group of ``otel-stall replay``."""
    from otel_stall.offline.store_api import AUTH_ENV

    group = parser.add_argument_group("trace store (a URL among the inputs)")
    group.add_argument(
        "--store-timeout",
        type=seconds_argument,
        metavar="SECONDS",
        help="wait this long for one answer (default: $OTEL_STALL_STORE_TIMEOUT, else 10)",
    )
    group.add_argument(
        "--store-deadline",
        type=seconds_argument,
        metavar="SECONDS",
        help="give the whole fetch this long (default: $OTEL_STALL_STORE_DEADLINE, else 120)",
    )
    group.add_argument(
        "--max-traces",
        type=_count,
        metavar="N",
        help="fetch at most N traces of a query (default: $OTEL_STALL_STORE_MAX_TRACES, else 1000)",
    )
    group.add_argument(
        "--auth-env",
        metavar="NAME",
        help=f"send the header(s) in this environment variable, 'Header: value' one a line "
        f"(default: ${AUTH_ENV}, if set)",
    )


@contextlib.contextmanager
def spooled_store(
    args: argparse.Namespace, stderr: IO[str]
) -> Iterator[tuple[list[str], dict[str, str]]]:
    """The inputs with each URL replaced by the files of its answers, and their labels."""
    from otel_stall.core.config import ConfigError
    from otel_stall.offline.store_api import StoreError, StoreSettings, is_url, spool

    if not any(is_url(p) for p in args.paths):
        yield list(args.paths), {}
        return
    explicit = {
        "timeout": args.store_timeout,
        "deadline": args.store_deadline,
        "max_traces": args.max_traces,
        "auth_env": args.auth_env,
        "max_bytes": args.max_message_mib,
    }
    with tempfile.TemporaryDirectory(prefix="otel-stall-store-") as folder:
        try:
            settings = StoreSettings.from_env(**explicit)
            spooled = spool(args.paths, settings, folder, stderr)
        except (StoreError, ConfigError) as exc:
            raise UsageError(str(exc)) from None
        yield spooled
