"""otel-stall: catch AI agents stuck in tool loops by reading their OpenTelemetry spans.

Live: wrap your span processors in :class:`StallSpanProcessor` (or call
:func:`install`). Offline: :func:`replay` stored OTLP files. Both feed the same
OpenTelemetry-free :class:`RunDetector`.

Names load lazily, on first use: ``import otel_stall`` (and ``otel-stall --version``)
costs about what the interpreter does, not the SDK, the OTLP encoder and grpc
that ``StallSpanProcessor`` or ``replay`` need.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from otel_stall._version import __version__

if TYPE_CHECKING:
    from otel_stall.conventions import Conventions, CustomConvention, Role, SpanRecord
    from otel_stall.core.compare import Comparison, Conclusion, LoopSignature, compare_runs
    from otel_stall.core.config import ConfigError
    from otel_stall.core.detector import Observation, RunDetector, detect, stall_score
    from otel_stall.core.errors import InputError
    from otel_stall.core.policy import DuplicateMode, StallPolicy
    from otel_stall.core.records import (
        ABSENT,
        Action,
        Finding,
        Kind,
        LedgerRow,
        ModelCall,
        RunReport,
        Status,
        ToolCall,
        Verdict,
    )
    from otel_stall.core.signing import Content, Digests, Normaliser, Signer
    from otel_stall.live.capture import OtlpJsonLinesSpanExporter
    from otel_stall.live.guard import Refusal, RunStatus, StallDetected, StallGuard
    from otel_stall.live.install import install
    from otel_stall.live.processor import ProcessorStats, StallSpanProcessor
    from otel_stall.live.sampler import RecordAllSampler
    from otel_stall.live.settings import ProcessorSettings
    from otel_stall.offline.analysis import TraceAnalyzer, TraceResult, analyse_spans
    from otel_stall.offline.jsonl import LoadResult, load_events
    from otel_stall.offline.replay import Replayer, ReplayResult, replay

__all__ = [
    "ABSENT",
    "Action",
    "Comparison",
    "Conclusion",
    "ConfigError",
    "Content",
    "Conventions",
    "CustomConvention",
    "Digests",
    "DuplicateMode",
    "Finding",
    "InputError",
    "Kind",
    "LedgerRow",
    "LoadResult",
    "LoopSignature",
    "ModelCall",
    "Normaliser",
    "Observation",
    "OtlpJsonLinesSpanExporter",
    "ProcessorSettings",
    "ProcessorStats",
    "RecordAllSampler",
    "Refusal",
    "ReplayResult",
    "Replayer",
    "Role",
    "RunDetector",
    "RunReport",
    "RunStatus",
    "Signer",
    "SpanRecord",
    "StallDetected",
    "StallGuard",
    "StallPolicy",
    "StallSpanProcessor",
    "Status",
    "ToolCall",
    "TraceAnalyzer",
    "TraceResult",
    "Verdict",
    "__version__",
    "analyse_spans",
    "compare_runs",
    "detect",
    "install",
    "load_events",
    "replay",
    "stall_score",
]

_HOMES: dict[str, str] = {
    "Conventions": "conventions",
    "CustomConvention": "conventions",
    "Role": "conventions",
    "SpanRecord": "conventions",
    "Comparison": "core.compare",
    "Conclusion": "core.compare",
    "LoopSignature": "core.compare",
    "compare_runs": "core.compare",
    "ConfigError": "core.config",
    "Observation": "core.detector",
    "RunDetector": "core.detector",
    "detect": "core.detector",
    "stall_score": "core.detector",
    "InputError": "core.errors",
    "DuplicateMode": "core.policy",
    "StallPolicy": "core.policy",
    "ABSENT": "core.records",
    "Action": "core.records",
    "Finding": "core.records",
    "Kind": "core.records",
    "LedgerRow": "core.records",
    "ModelCall": "core.records",
    "RunReport": "core.records",
    "Status": "core.records",
    "ToolCall": "core.records",
    "Verdict": "core.records",
    "Content": "core.signing",
    "Digests": "core.signing",
    "Normaliser": "core.signing",
    "Signer": "core.signing",
    "OtlpJsonLinesSpanExporter": "live.capture",
    "Refusal": "live.guard",
    "RunStatus": "live.guard",
    "StallDetected": "live.guard",
    "StallGuard": "live.guard",
    "install": "live.install",
    "ProcessorStats": "live.processor",
    "StallSpanProcessor": "live.processor",
    "RecordAllSampler": "live.sampler",
    "ProcessorSettings": "live.settings",
    "TraceAnalyzer": "offline.analysis",
    "TraceResult": "offline.analysis",
    "analyse_spans": "offline.analysis",
    "LoadResult": "offline.jsonl",
    "load_events": "offline.jsonl",
    "ReplayResult": "offline.replay",
    "Replayer": "offline.replay",
    "replay": "offline.replay",
}
"""Where each public name lives, under ``otel_stall``: it is imported on first use."""


if not TYPE_CHECKING:  # mypy sees the imports above, so a misspelt name is still an error

    def __getattr__(name: str) -> object:
        home = _HOMES.get(name)
        if home is None:
            raise AttributeError(f"module 'otel_stall' has no attribute {name!r}")
        value = getattr(importlib.import_module(f"otel_stall.{home}"), name)
        globals()[name] = value  # the next lookup is a plain global, without this hook
        return value

    def __dir__() -> list[str]:
        return sorted({*globals(), *__all__})
