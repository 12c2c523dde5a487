"""A scripted model behind an OpenAI-compatible HTTP API, for offline framework runs.

Frameworks are run with their real OpenAI client pointed here, so their own
model and tool instrumentation runs unchanged; only the answers are scripted.
Standard library only: the generator runs it, not the framework's venv.

A script maps an agent marker to its turns. The agent is the one whose marker
(``[agent:NAME]``, placed in its instructions) the request carries; each turn
is served once, in order, then a closing text. A turn is ``{"text": ...}`` or
``{"tool_calls": [{"name": ..., "arguments": {...}}, ...]}``. Counting
requests rather than reading the conversation keeps one script working for
every framework's message format.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

Turn = Mapping[str, Any]
Script = Mapping[str, Sequence[Turn]]

CLOSING = {"text": "Done."}
_CREATED = 1_700_000_000


class ScriptedModel:
    """Serves each agent's turns in order; thread-safe, one instance per scenario run."""

    def __init__(self, script: Script) -> None:
        self._script = script
        self._served: dict[str, int] = {}
        self._lock = threading.Lock()
        self.requests: list[str] = []

    def agent_for(self, body: str) -> str:
        """The last scripted agent whose marker the request holds (children follow parents).

        A request with no marker goes to the agent ``""`` when the script has one
        (a framework's own side calls, such as a router, then get the closing
        text without spending an agent's turns), else to the first agent.
        """
        found = [name for name in self._script if name and f"[agent:{name}]" in body]
        if found:
            return found[-1]
        return "" if "" in self._script else next(iter(self._script))

    def next_turn(self, agent: str) -> tuple[Turn, int]:
        """The agent's next turn and its index; the closing text once the script is spent."""
        with self._lock:
            index = self._served.get(agent, 0)
            self._served[agent] = index + 1
            self.requests.append(agent)
        turns = self._script.get(agent, ())
        return (turns[index] if index < len(turns) else CLOSING), index


def tool_calls(agent: str, index: int, turn: Turn) -> list[dict[str, Any]]:
    """OpenAI tool calls with stable per-call ids (distinct per call, as real models give)."""
    return [
        {
            "id": f"call_{agent}_{index}_{i}",
            "type": "function",
            "function": {"name": call["name"], "arguments": json.dumps(call["arguments"])},
        }
        for i, call in enumerate(turn.get("tool_calls", ()))
    ]


def completion(model: str, agent: str, index: int, turn: Turn) -> dict[str, Any]:
    """A non-streamed ``chat.completion``."""
    calls = tool_calls(agent, index, turn)
    message: dict[str, Any] = {"role": "assistant", "content": turn.get("text")}
    if calls:
        message["tool_calls"] = calls
    return {
        "id": f"chatcmpl-{agent}-{index}",
        "object": "chat.completion",
        "created": _CREATED,
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": message,
                "finish_reason": "tool_calls" if calls else "stop",
                "logprobs": None,
            }
        ],
        "usage": {"prompt_tokens": 20, "completion_tokens": 10, "total_tokens": 30},
    }


def chunks(model: str, agent: str, index: int, turn: Turn) -> Iterator[dict[str, Any]]:
    """The same answer as ``chat.completion.chunk`` events."""
    base = {
        "id": f"chatcmpl-{agent}-{index}",
        "object": "chat.completion.chunk",
        "created": _CREATED,
        "model": model,
    }
    calls = tool_calls(agent, index, turn)
    deltas: list[dict[str, Any]] = [{"role": "assistant"}]
    if calls:  # one chunk per call, as OpenAI streams them
        deltas[0]["tool_calls"] = [{"index": 0, **calls[0]}]
        deltas += [{"tool_calls": [{"index": i, **c}]} for i, c in enumerate(calls) if i]
    else:
        deltas[0]["content"] = turn.get("text", "")
    for delta in deltas:
        yield {**base, "choices": [{"index": 0, "delta": delta, "finish_reason": None}]}
    finish = "tool_calls" if calls else "stop"
    yield {**base, "choices": [{"index": 0, "delta": {}, "finish_reason": finish}]}
    usage = {"prompt_tokens": 20, "completion_tokens": 10, "total_tokens": 30}
    yield {**base, "choices": [], "usage": usage}


def gemini(agent: str, index: int, turn: Turn) -> dict[str, Any]:
    """A Gemini API ``GenerateContentResponse`` (for google-genai clients pointed here)."""
    parts: list[dict[str, Any]] = [
        {
            "functionCall": {
                "id": call["id"],
                "name": call["function"]["name"],
                "args": json.loads(call["function"]["arguments"]),
            }
        }
        for call in tool_calls(agent, index, turn)
    ] or [{"text": turn.get("text", "")}]
    return {
        "candidates": [
            {"content": {"role": "model", "parts": parts}, "finishReason": "STOP", "index": 0}
        ],
        "usageMetadata": {
            "promptTokenCount": 20,
            "candidatesTokenCount": 10,
            "totalTokenCount": 30,
        },
        "modelVersion": "gemini-2.5-flash",
        "responseId": f"resp-{agent}-{index}",
    }


def _handler(model: ScriptedModel) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:
            """Quiet: the generator reports failures itself."""

        def do_GET(self) -> None:
            """``/v1/models``: some clients list models first."""
            self._json({"object": "list", "data": [{"id": "gpt-4o", "object": "model"}]})

        def do_POST(self) -> None:
            """Chat completions (streamed or not) and ``/script/next`` for custom model classes."""
            raw = self.rfile.read(int(self.headers.get("Content-Length", 0))).decode()
            body = json.loads(raw or "{}")
            if self.path.rstrip("/").endswith("/script/next"):
                agent = body.get("agent") or model.agent_for(raw)
                turn, index = model.next_turn(agent)
                calls = tool_calls(agent, index, turn)
                self._json({"agent": agent, "index": index, "turn": turn, "calls": calls})
                return
            agent = model.agent_for(raw)
            turn, index = model.next_turn(agent)
            if ":generateContent" in self.path:
                self._json(gemini(agent, index, turn))
                return
            if ":streamGenerateContent" in self.path:
                self._stream(iter([gemini(agent, index, turn)]), done=False)
                return
            name = str(body.get("model", "gpt-4o"))
            if body.get("stream"):
                self._stream(chunks(name, agent, index, turn))
            else:
                self._json(completion(name, agent, index, turn))

        def _json(self, payload: Any) -> None:
            data = json.dumps(payload).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _stream(self, events: Iterator[dict[str, Any]], *, done: bool = True) -> None:
            data = b"".join(f"data: {json.dumps(e)}\n\n".encode() for e in events)
            data += b"data: [DONE]\n\n" if done else b""
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    return Handler


@contextmanager
def serving(script: Script) -> Iterator[tuple[str, ScriptedModel]]:
    """Serve ``script`` on a loopback port; yields the base URL (``.../v1``) and the model.

    The same server answers Gemini API paths (``...:generateContent``), so a
    google-genai client can be pointed at its root.
    """
    model = ScriptedModel(script)
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(model))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1", model
    finally:
        server.shutdown()
        server.server_close()
