"""A user's own loop finder: what one would write by hand in 40 lines with orjson and xxhash.

Reads OTLP/JSON lines, signs each tool call (its arguments and result, JSON
with sorted keys, hashed), keeps a ledger per trace and prints the traces where
one call came back three times or more. The replay benchmark times it beside
``otel-stall replay``: the replay must beat it.

    python bench/ledger.py spans.jsonl
"""

from __future__ import annotations

import sys
from collections import Counter, defaultdict

import orjson
import xxhash


def canonical(text: str) -> bytes:
    try:
        return orjson.dumps(orjson.loads(text), option=orjson.OPT_SORT_KEYS)
    except orjson.JSONDecodeError:
        return text.encode()


def ledger(path: str) -> tuple[int, dict[str, Counter[int]]]:
    """Spans read, and per trace how often each tool call's signature came."""
    spans, runs = 0, defaultdict[str, Counter[int]](Counter)
    with open(path, "rb") as lines:
        for line in lines:
            for resource in orjson.loads(line)["resourceSpans"]:
                for scope in resource["scopeSpans"]:
                    for span in scope["spans"]:
                        spans += 1
                        attrs = {a["key"]: a["value"] for a in span.get("attributes", ())}
                        if (
                            attrs.get("gen_ai.operation.name", {}).get("stringValue")
                            == "execute_tool"
                        ):
                            args = attrs.get("gen_ai.tool.call.arguments", {}).get(
                                "stringValue", ""
                            )
                            result = attrs.get("gen_ai.tool.call.result", {}).get("stringValue", "")
                            key = xxhash.xxh3_64_intdigest(
                                canonical(args) + b"\0" + canonical(result)
                            )
                            runs[span["traceId"]][key] += 1
    return spans, runs


if __name__ == "__main__":
    spans, runs = ledger(sys.argv[1])
    loops = [trace for trace, calls in runs.items() if max(calls.values()) >= 3]
    print(f"{spans} spans, {len(runs)} traces with tool calls, {len(loops)} looping")
    for trace in loops[:20]:
        print(f"  trace {trace}: a call repeated {max(runs[trace].values())} times")
