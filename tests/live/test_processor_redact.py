"""Redaction: exported copies lose raw arguments, results and messages, keep digests."""

from __future__ import annotations

import gc
import types

import pytest
from stall_pipeline import STYLE_PARAMS, STYLES, Agent, Call, Style, make_pipeline, stall

from otel_stall.conventions import CONTENT_KEYS
from otel_stall.semconv import StallAttributes as S

SECRET = Call("lookup", {"ssn": "123-45-6789"}, {"balance": 1234})


@pytest.mark.parametrize("style", STYLE_PARAMS)
def test_redact_strips_payloads_and_keeps_digests(style: Style) -> None:
    """redact=True: no raw payload attribute leaves; the stall.* digests match unredacted ones."""
    digests = []
    for redact in (False, True):
        pipe = make_pipeline(conventions=style.conventions, redact=redact)
        agent = Agent(pipe.tracer, style)
        with agent.run():
            agent.round(SECRET)
        name = style.tool("lookup", {}, {})[0]
        (tool,) = pipe.named(name)
        attrs = dict(tool.attributes or {})
        payload = [k for k in attrs if k in CONTENT_KEYS or k.startswith("myco.args")]
        if redact:
            assert [k for k in attrs if k in CONTENT_KEYS] == []
            assert all("123-45-6789" not in str(v) for v in attrs.values())
        else:
            assert payload
        digests.append(
            {k: stall(tool)[k] for k in (S.SIGNATURE, S.CALL_SIGNATURE, S.RESULT_DIGEST)}
        )
    assert digests[0] == digests[1]


def _reachable_strings(root: object) -> list[str]:
    """Every string reachable from ``root`` through instances and containers (not code)."""
    found: list[str] = []
    seen: set[int] = set()
    stack = [root]
    skip = (type, types.ModuleType, types.FunctionType, types.BuiltinFunctionType)
    while stack:
        obj = stack.pop()
        if id(obj) in seen or isinstance(obj, skip):
            continue
        seen.add(id(obj))
        if isinstance(obj, str):
            found.append(obj)
        else:
            stack.extend(gc.get_referents(obj))
    return found


@pytest.mark.parametrize("redact", [False, True], ids=["plain", "redacted"])
def test_redacted_span_holds_no_raw_payload(redact: bool) -> None:
    """With redact=True no raw payload is reachable from the exported object at all."""
    pipe = make_pipeline(redact=redact)
    agent = Agent(pipe.tracer, STYLES[0])
    with agent.run():
        agent.round(SECRET)
    (tool,) = pipe.named(STYLES[0].tool("lookup", {}, {})[0])
    leaked = [text for text in _reachable_strings(tool) if "123-45-6789" in text]
    assert bool(leaked) is not redact


def test_redact_strips_model_messages_and_leaves_other_spans() -> None:
    """Model spans lose gen_ai.input/output.messages; spans otel-stall does not read stay."""
    pipe = make_pipeline(redact=True)
    tracer = pipe.tracer
    agent = Agent(tracer, STYLES[0])
    with agent.run():
        with tracer.start_as_current_span(
            "chat gpt-4.1",
            attributes={
                "gen_ai.operation.name": "chat",
                "gen_ai.input.messages": '[{"role": "user", "content": "secret"}]',
                "gen_ai.output.messages": '[{"role": "assistant", "content": "secret"}]',
                "gen_ai.usage.input_tokens": 12,
            },
        ):
            pass
        with tracer.start_as_current_span("db.query", attributes={"db.statement": "select 1"}):
            pass
    model = dict(pipe.one("chat gpt-4.1").attributes or {})
    assert model == {"gen_ai.operation.name": "chat", "gen_ai.usage.input_tokens": 12}
    assert dict(pipe.one("db.query").attributes or {}) == {"db.statement": "select 1"}


def test_redact_off_keeps_everything() -> None:
    """Without redaction the payload attributes are forwarded as they were."""
    pipe = make_pipeline(redact=False)
    agent = Agent(pipe.tracer, STYLES[0])
    with agent.run():
        agent.round(SECRET)
    attrs = dict(pipe.one("execute_tool lookup").attributes or {})
    assert attrs["gen_ai.tool.call.arguments"] == '{"ssn": "123-45-6789"}'
