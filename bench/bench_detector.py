"""Detector cost per tool call against the cost of only parsing the same JSON.

Each call has about 300 B of arguments and 1 KB of result, as JSON text, all
different (no cache hits). In one process, side by side, it times:

  (a) the floor: ``orjson.loads`` of the arguments and of the result;
  (b) ``RunDetector.tool_call(ToolCall(tool, args, result))`` on the same two
      strings (build the record, normalise, hash three digests, update the
      ledger and every rule), with a fresh policy (so a fresh signer and empty
      payload caches) in every repeat: no cache hits;
  (e) the same on records built beforehand: the detector alone, so (b) - (e)
      is what building the record costs;
  (d) for information, the same calls again with a signer that has seen these
      texts: what an agent stuck in a loop costs, as it re-sends identical
      payload text (the signer's bounded cache of ``CACHE_ENTRIES`` texts).

Two payload mixes: ``clean`` needs no normalisation beyond key order, and
``noisy`` carries what real tools return (a volatile ``request_id``, newlines
in snippets, a temp path). Where the compiled canonicaliser is built (see
``otel_stall.core.signing.NATIVE_AVAILABLE``, printed first) it handles both;
without it, ``noisy`` takes the Python walk. Row (p) is (b) with the compiled
path turned off (``StallPolicy(native=False)``), for comparison.

Budget: (b) <= 2x (a), the detector in all costs at most twice the parse.
Best of several interleaved repeats of the process's CPU time
(``time.process_time``), to damp the noise of a shared machine.
Prints a markdown section; ``--quick`` runs fewer calls and repeats.
"""

from __future__ import annotations

import argparse
import importlib
import random
import time

import orjson
from xxhash import xxh3_64_hexdigest as xxh3

from otel_stall import ModelCall, RunDetector, StallPolicy, ToolCall


def native_available() -> bool | None:
    """Whether the compiled canonicaliser is built; None where this version does not say."""
    for module in ("otel_stall.core.signing", "otel_stall.signature"):
        try:
            found: object = getattr(importlib.import_module(module), "NATIVE_AVAILABLE", None)
        except ImportError:
            continue
        if isinstance(found, bool):
            return found
    return None


WORDS = [
    "login",
    "timeout",
    "retry",
    "session",
    "token",
    "cache",
    "page",
    "wait",
    "selector",
    "fixture",
    "client",
    "server",
    "request",
    "handler",
    "parse",
    "config",
    "deploy",
    "build",
    "queue",
    "worker",
    "schedule",
    "index",
    "search",
    "query",
]


def _sentence(rng: random.Random, n: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(n))


def make_payloads(count: int, noisy: bool, seed: int = 7) -> list[tuple[str, str, str]]:
    """``(tool, args_json, result_json)`` triples, each one different."""
    rng = random.Random(seed)
    out = []
    for i in range(count):
        args = {
            "query": f"{_sentence(rng, 5)} #{i}",
            "filters": {
                "repo": f"org/service-{rng.randrange(50)}",
                "language": rng.choice(["python", "typescript", "go"]),
                "paths": [f"src/{rng.choice(WORDS)}/{rng.choice(WORDS)}.py" for _ in range(3)],
                "since": f"2024-0{rng.randrange(1, 9)}-1{rng.randrange(9)}",
            },
            "limit": rng.choice([10, 20, 50]),
            "include_snippets": True,
            "sort": rng.choice(["relevance", "recent"]),
        }
        hits = []
        for h in range(5):
            snippet = _sentence(rng, 14)
            if noisy and h % 2:
                snippet = snippet.replace(" ", "\n    ", 2)
            hits.append(
                {
                    "path": f"src/{rng.choice(WORDS)}/{rng.choice(WORDS)}_{i}_{h}.py",
                    "line": rng.randrange(1, 2000),
                    "score": round(rng.random(), 4),
                    "snippet": snippet,
                }
            )
        result: dict[str, object] = {"hits": hits, "total": rng.randrange(5, 500), "page": 1}
        if noisy:
            result["request_id"] = f"req-{rng.getrandbits(64):016x}"
            result["cache_file"] = f"/tmp/tmp{rng.getrandbits(32):08x}/idx.bin"
        out.append(("code_search", orjson.dumps(args).decode(), orjson.dumps(result).decode()))
    return out


def parse_only(payloads: list[tuple[str, str, str]]) -> float:
    loads = orjson.loads
    start = time.process_time()
    for _tool, args, result in payloads:
        loads(args)
        loads(result)
    return time.process_time() - start


def canonical_floor(payloads: list[tuple[str, str, str]]) -> float:
    """What any value-based signature needs: parse, re-serialise sorted, hash."""
    loads, dumps, sort, digest = orjson.loads, orjson.dumps, orjson.OPT_SORT_KEYS, xxh3
    start = time.process_time()
    for _tool, args, result in payloads:
        digest(dumps(loads(args), option=sort))
        digest(dumps(loads(result), option=sort))
    return time.process_time() - start


def detector(payloads: list[tuple[str, str, str]], policy: StallPolicy | None = None) -> float:
    policy = policy or StallPolicy()  # a fresh one: its signer has empty caches
    run = RunDetector(policy)
    run.model_call(ModelCall())
    start = time.process_time()
    for n, (tool, args, result) in enumerate(payloads):
        if n % 4 == 0:
            run.model_call(ModelCall())
        run.tool_call(ToolCall(tool, args, result))
    return time.process_time() - start


def detector_only(calls: list[ToolCall]) -> float:
    """(b) without building the records: they are made before the clock starts."""
    run = RunDetector(StallPolicy())
    run.model_call(ModelCall())
    start = time.process_time()
    for n, call in enumerate(calls):
        if n % 4 == 0:
            run.model_call(ModelCall())
        run.tool_call(call)
    return time.process_time() - start


BUDGET = 2.0
"""Ceiling on (b)/(a): the detector, record included, at most twice the parse."""


def times(calls: int, repeats: int, mix: str) -> tuple[float, ...]:
    """Per-call seconds of (a), (c), (b), (e), (d) and (p), best of ``repeats`` interleaved."""
    payloads = make_payloads(calls, noisy=mix == "noisy")
    records = [ToolCall(tool, args, result) for tool, args, result in payloads]
    best = [float("inf")] * 6
    warm = StallPolicy()
    detector(payloads, warm)  # its signer has now seen every text
    for _ in range(repeats):  # interleaved, so drift hits all sides alike
        for i, took in enumerate(
            (
                parse_only(payloads),
                canonical_floor(payloads),
                detector(payloads),
                detector_only(records),
                detector(payloads, warm),
                detector(payloads, StallPolicy(native=False)),
            )
        ):
            best[i] = min(best[i], took)
    return tuple(t / calls for t in best)


def sizes(mix: str) -> str:
    """Mean arguments and result size of a mix's payloads."""
    payloads = make_payloads(200, noisy=mix == "noisy")
    args = sum(len(a) for _, a, _ in payloads) / len(payloads)
    result = sum(len(r) for _, _, r in payloads) / len(payloads)
    return f"{args:.0f} B + {result:.0f} B"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true", help="1000 calls, best of 3")
    parser.add_argument("--calls", type=int, default=None)
    parser.add_argument("--repeats", type=int, default=None)
    options = parser.parse_args(argv)
    calls = options.calls or (1000 if options.quick else 4000)
    repeats = options.repeats or (3 if options.quick else 9)
    native = {True: "built", False: "**not built**", None: "unknown"}[native_available()]
    print("## Detector: cost per tool call against parsing its JSON\n")
    print(
        f"{calls:,} distinct tool calls per repeat (no cache hits unless said), best of "
        f"{repeats} interleaved repeats, CPU µs per call and in brackets the multiple of (a). "
        "(a) `orjson.loads` of the arguments and the result; (b) `ToolCall(...)` and "
        "`RunDetector.tool_call`, with a fresh policy (empty signer caches); (e) the same on "
        "records built beforehand: the detector alone; (c) for scale, parse, re-serialise "
        "with sorted keys and hash, what any value-based signature needs; (d) the same texts "
        "again: a looping agent, whose repeated texts hit the signer's cache; (p) (b) with "
        "the compiled canonicaliser off. The `noisy` mix carries a volatile `request_id`, "
        f"escaped newlines and a temp path. Compiled canonicaliser: {native}.\n"
    )
    print(
        "| payload mix | arguments + result | (a) parse | (b) detector | budget | "
        "| (e) records built before | (c) parse, sort, hash | (d) same texts again "
        "| (p) pure Python |"
    )
    print("|---|---:|---:|---:|---:|---|---:|---:|---:|---:|")
    for mix in ("clean", "noisy"):
        parse, canon, cost, alone, again, python = (t * 1e6 for t in times(calls, repeats, mix))

        def cell(value: float, floor: float = parse) -> str:
            return f"{value:.2f} ({value / floor:.2f}x)"

        verdict = "within" if cost / parse <= BUDGET else "over"
        print(
            f"| {mix} | {sizes(mix)} | {parse:.2f} | **{cell(cost)}** | ≤ {BUDGET}x | {verdict} "
            f"| {cell(alone)} | {cell(canon)} | {cell(again)} | {cell(python)} |",
            flush=True,
        )
    print()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
