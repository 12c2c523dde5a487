"""The live gate inside agent frameworks: refuse a repeated call, stop a run at ``break``.

One module per framework, each importing its framework only when used (the
``integrations`` extra installs them for the tests). All of them ask one
:class:`~otel_stall.integrations.gate.ToolGate`, so the rules, thresholds and
the text the model reads are the detector's own. See ``docs/prevention.md``.
"""

from __future__ import annotations

from otel_stall.integrations.gate import ALLOW, BREAK_MESSAGE, Decision, ToolGate, default_gate

__all__ = ["ALLOW", "BREAK_MESSAGE", "Decision", "ToolGate", "default_gate"]
