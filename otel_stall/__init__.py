"""otel-stall: catch AI agents stuck in tool loops by reading their OpenTelemetry spans.

Live: wrap your span processors in :class:`StallSpanProcessor` (or call
:func:`install`). Offline: :func:`replay` stored OTLP files. Both feed the same
OpenTelemetry-free :class:`RunDetector`.
"""

from otel_stall._version import __version__
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
