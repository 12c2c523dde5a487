"""``otel-stall serve``: the gateway process, its flags and its shutdown.

On SIGTERM (or SIGINT) the receivers stop taking requests, every held trace
is detected and forwarded, and the upstream queue is drained for up to
``--shutdown-timeout``, a deadline the log states; what still could not be
delivered is logged by count. A second signal (Ctrl-C again) exits at once,
saying how many spans were not delivered.
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
import threading
import time
from collections.abc import Sequence
from types import FrameType
from typing import IO, NoReturn

from otel_stall.conventions import Conventions
from otel_stall.conventions.user import conventions_from_file
from otel_stall.core.config import ConfigError
from otel_stall.core.policy import StallPolicy
from otel_stall.gateway.config import GatewayConfig
from otel_stall.gateway.flags import build_parser, config_from_args, configure_logging
from otel_stall.gateway.pipeline import Pipeline
from otel_stall.gateway.receivers import (
    GrpcReceiver,
    HttpReceiver,
    MetricsServer,
    StartupError,
    tls_context,
)
from otel_stall.gateway.upstream import Sender

__all__ = ["Gateway", "run", "serve_main"]

logger = logging.getLogger("otel_stall.gateway")


class Gateway:
    """The receivers, the pipeline and ``/metrics``, started and stopped together."""

    def __init__(
        self,
        config: GatewayConfig | None = None,
        *,
        policy: StallPolicy | None = None,
        conventions: Conventions | None = None,
        sender: Sender | None = None,
    ) -> None:
        self.config = config or GatewayConfig.from_env()
        self.pipeline = Pipeline(self.config, policy=policy, conventions=conventions, sender=sender)
        self.grpc: GrpcReceiver | None = None
        self.http: HttpReceiver | None = None
        self.metrics: MetricsServer | None = None
        self._stopped = False

    def start(self) -> Gateway:
        """Bind every listener (port 0 picks a free one) and start serving.

        Raises :class:`StartupError` naming the listener that cannot start (a
        taken port, an unreadable certificate or key); nothing is left running.
        """
        try:
            tls_context(self.config)  # a bad certificate or key fails here, for both receivers
            if self.config.grpc_address is not None:
                self.grpc = GrpcReceiver(self.pipeline, self.config)
            if self.config.http_address is not None:
                self.http = HttpReceiver(self.pipeline, self.config)
            metrics_address = self.config.metrics_address
            if metrics_address is not None:
                self.metrics = MetricsServer(self.pipeline, metrics_address, self.config)
        except BaseException:
            self._close_listeners()
            raise
        self.pipeline.start()
        for server in (self.grpc, self.http, self.metrics):
            if server is not None:
                server.start()
        return self

    def _close_listeners(self) -> None:
        """Release what was bound; none of these wait for a loop that never started."""
        if self.grpc is not None:
            self.grpc.stop(0)
        if self.http is not None:
            self.http.stop()
        if self.metrics is not None:
            self.metrics.stop()
        self.pipeline.meter_provider.shutdown()

    def stop(self, timeout: float | None = None) -> int:
        """Stop receiving, flush everything held; returns spans left undelivered."""
        if self._stopped:
            return 0
        self._stopped = True
        if self.grpc is not None:
            self.grpc.stop()
        if self.http is not None:
            self.http.stop()
        left = self.pipeline.close(timeout)
        if self.metrics is not None:
            self.metrics.stop()
        return left

    def __enter__(self) -> Gateway:
        return self.start()

    def __exit__(self, *_exc: object) -> None:
        self.stop()

    @property
    def grpc_endpoint(self) -> str | None:
        """``host:port`` of the gRPC receiver."""
        return None if self.grpc is None else f"{self.grpc.host}:{self.grpc.port}"

    @property
    def http_endpoint(self) -> str | None:
        """``http://host:port/v1/traces``."""
        return None if self.http is None else f"http://{self.http.host}:{self.http.port}/v1/traces"

    @property
    def metrics_endpoint(self) -> str | None:
        """``http://host:port/metrics``."""
        if self.metrics is None:
            return None
        return f"http://{self.metrics.host}:{self.metrics.port}/metrics"


def serve_main(argv: Sequence[str] | None = None) -> int:
    """``otel-stall serve`` from raw arguments (also ``python -m otel_stall.gateway``)."""
    return run(build_parser().parse_args(argv))


def run(args: argparse.Namespace, stderr: IO[str] | None = None) -> int:
    """Run the gateway until SIGTERM/SIGINT; a second one exits at once.

    Exit 0; 1 if spans were left undelivered; 2 on any startup failure (a bad
    setting, a port that is taken, a certificate that cannot be loaded), with
    one line naming the flag, variable or listener at fault.
    """
    stderr = stderr or sys.stderr
    signals = _Signals()
    try:
        configure_logging(args)
        config = config_from_args(args)
        conventions = conventions_from_file(getattr(args, "conventions", None))
        gateway = Gateway(config, conventions=conventions)
        # From here a Ctrl-C is a stop request, not a KeyboardInterrupt raised in the middle
        # of binding ports and starting threads (a traceback, and threads left running).
        signals.install()
        gateway.start()
    except KeyboardInterrupt:  # before the handlers were in place: nothing was started
        return EXIT_INTERRUPTED
    except (ConfigError, ValueError, StartupError) as exc:
        print(f"otel-stall serve: {exc}", file=stderr)
        return 2
    except Exception as exc:  # an OSError, or anything else: still one line and exit 2
        logger.debug("startup failed", exc_info=True)
        print(f"otel-stall serve: cannot start: {exc}", file=stderr)
        return 2
    if signals.first.is_set():  # interrupted while starting: stop quietly, as if never started
        gateway.stop()
        return EXIT_INTERRUPTED
    logger.info(
        "otel-stall gateway: grpc=%s http=%s metrics=%s upstream=%s",
        gateway.grpc_endpoint,
        gateway.http_endpoint,
        gateway.metrics_endpoint,
        config.upstream or "(none: detect and count only)",
    )
    while not signals.first.wait(1.0):
        pass
    return _shut_down(gateway, signals)


EXIT_INTERRUPTED = 130
"""The shell's code for a Ctrl-C (128 + SIGINT): interrupted while starting, nothing served."""


class _Signals:
    """SIGTERM and SIGINT: the first asks for a graceful stop, the next one for an exit now.

    The handler only sets events; the main thread does the logging, since a
    handler that logs could run while the logging lock is held.
    """

    def __init__(self) -> None:
        self.first = threading.Event()
        self.again = threading.Event()
        self.names: list[str] = []

    def install(self) -> None:
        signal.signal(signal.SIGTERM, self.handle)
        signal.signal(signal.SIGINT, self.handle)

    def handle(self, signum: int, _frame: FrameType | None) -> None:
        self.names.append(signal.Signals(signum).name)
        (self.again if self.first.is_set() else self.first).set()


def _shut_down(gateway: Gateway, signals: _Signals) -> int:
    """Stop receiving and deliver what is held, until done, the deadline, or another signal."""
    timeout = gateway.config.shutdown_timeout
    logger.info(
        "received %s: stopping; delivering the spans held for up to %gs (until %s); "
        "send it again (Ctrl-C) to exit at once",
        signals.names[0],
        timeout,
        time.strftime("%H:%M:%S", time.localtime(time.time() + timeout)),
    )
    left: list[int] = []
    stopping = threading.Thread(
        target=lambda: left.append(gateway.stop()), name="otel-stall-shutdown", daemon=True
    )
    stopping.start()
    while stopping.is_alive():
        if signals.again.wait(0.1):
            _exit_now(gateway, signals.names[-1])
    pipeline = gateway.pipeline
    logger.info(
        "stopped: %d spans received, %d forwarded, %d undelivered",
        pipeline.received,
        pipeline.forwarded,
        pipeline.undelivered,
    )
    return 0 if left and left[0] == 0 else 1


def _exit_now(gateway: Gateway, name: str) -> NoReturn:
    """Leave without waiting for the drain, saying what is lost.

    ``os._exit``: a normal exit would join the receivers' and the sender's
    threads, which is the wait the user just declined.
    """
    pipeline = gateway.pipeline
    lost = max(pipeline.received - pipeline.forwarded, 0)
    logger.error(
        "received %s again: exiting now; %d of %d spans received were not delivered",
        name,
        lost,
        pipeline.received,
    )
    logging.shutdown()
    sys.stderr.flush()
    os._exit(1 if lost else 0)
