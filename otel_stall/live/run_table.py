"""The live processor's run state: the one run model of :mod:`otel_stall.core.runs`.

Kept as the live side's name for it: :mod:`otel_stall.live.guard` reads runs
through it, and the live processor drives it from ``on_start`` and ``on_end``.
"""

from otel_stall.core.run_state import Node, Run
from otel_stall.core.runs import RunTable

__all__ = ["Node", "Run", "RunTable"]
