"""Print a captured fixture as a span tree: names, kinds, attributes and events, for the survey.

``python tests/frameworks/spantree.py FILE [--values N]`` shows each span under
its parent with its attribute keys (values cut to N characters) and its event
names, so the layout of a framework's spans can be read at a glance.
Standard library only.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

KINDS = {0: "UNSPECIFIED", 1: "INTERNAL", 2: "SERVER", 3: "CLIENT", 4: "PRODUCER", 5: "CONSUMER"}


def spans(path: Path) -> Iterator[dict[str, Any]]:
    """Every span of an OTLP/JSON-lines file."""
    for line in path.read_text().splitlines():
        if not line.strip():
            continue
        for resource in json.loads(line).get("resourceSpans", []):
            for scope in resource.get("scopeSpans", []):
                for span in scope.get("spans", []):
                    yield {**span, "_scope": scope.get("scope", {}).get("name", "")}


def value(v: Mapping[str, Any]) -> Any:
    """An OTLP AnyValue as plain Python."""
    if "arrayValue" in v:
        return [value(x) for x in v["arrayValue"].get("values", [])]
    if "kvlistValue" in v:
        return {kv["key"]: value(kv["value"]) for kv in v["kvlistValue"].get("values", [])}
    return next(iter(v.values()), None)


def attrs(items: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """OTLP key/values as a dict."""
    return {kv["key"]: value(kv.get("value", {})) for kv in items}


def show(span: Mapping[str, Any], depth: int, cut: int) -> Iterator[str]:
    """Lines for one span."""
    pad = "  " * depth
    status = span.get("status", {})
    code = {1: " status=OK", 2: " status=ERROR"}.get(int(status.get("code", 0)), "")
    kind = KINDS.get(int(span.get("kind", 0)), "?")
    yield f"{pad}- {span['name']!r} [{kind}]{code} scope={span['_scope']}"
    for key, val in attrs(span.get("attributes", [])).items():
        text = json.dumps(val) if not isinstance(val, str) else val
        text = text if len(text) <= cut else text[:cut] + "..."
        yield f"{pad}    {key} = {text}"
    for event in span.get("events", []):
        keys = ", ".join(attrs(event.get("attributes", [])))
        yield f"{pad}    event {event['name']!r} ({keys})"


def tree(path: Path, cut: int) -> Iterator[str]:
    """The spans of ``path`` as an indented tree, children in start order."""
    all_spans = sorted(spans(path), key=lambda s: int(s.get("startTimeUnixNano", 0)))
    ids = {s["spanId"] for s in all_spans}
    children: dict[str, list[dict[str, Any]]] = {}
    for span in all_spans:
        parent = span.get("parentSpanId") or ""
        children.setdefault(parent if parent in ids else "", []).append(span)

    def walk(parent: str, depth: int) -> Iterator[str]:
        for span in children.get(parent, []):
            yield from show(span, depth, cut)
            yield from walk(span["spanId"], depth + 1)

    yield from walk("", 0)


def main(argv: Sequence[str] | None = None) -> int:
    """Print each file's tree."""
    parser = argparse.ArgumentParser(description="Print OTLP/JSON-lines spans as a tree.")
    parser.add_argument("paths", nargs="+", type=Path)
    parser.add_argument("--values", type=int, default=80, help="cut values to N characters")
    args = parser.parse_args(argv)
    for path in args.paths:
        print(f"# {path}")
        for line in tree(path, args.values):
            print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
