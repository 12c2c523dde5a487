"""The detector's core: records, normalisation and signing, policy, rules, messages.

Nothing here imports OpenTelemetry. Spans are turned into
:class:`~otel_stall.core.records.ToolCall` and ``ModelCall`` records at the edge
(:mod:`otel_stall.conventions`); everything below works on those records only,
so live, replay and the gateway share it unchanged.
"""
