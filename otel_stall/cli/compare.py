"""``otel-stall compare``: the loops of two runs, side by side.

Shared loops point at the prompt or the tool schema, not at one run's bad luck.
Exit code 0 when neither run loops, 1 when one does.
"""

from __future__ import annotations

import argparse
import json
import os
from typing import IO, TYPE_CHECKING, Any

from otel_stall.cli.common import (
    EXIT_OK,
    EXIT_STALL,
    UsageError,
    add_input_arguments,
    add_policy_arguments,
    conventions_from_args,
    no_spans,
    policy_from_args,
    print_errors,
)
from otel_stall.core.escape import printable

if TYPE_CHECKING:
    from otel_stall.conventions import Conventions
    from otel_stall.core.policy import StallPolicy
    from otel_stall.core.records import RunReport

__all__ = ["add_compare_arguments", "cmd_compare"]


def add_compare_arguments(parser: argparse.ArgumentParser) -> None:
    """Arguments of ``otel-stall compare``."""
    parser.add_argument("a", metavar="A", help="FILE, or FILE#RUN (agent, run span or trace id)")
    parser.add_argument("b", metavar="B", help="FILE, or FILE#RUN")
    parser.add_argument("--format", choices=("table", "json"), default="table")
    parser.add_argument(
        "--min-count", type=int, default=3, help="occurrences that make a signature a loop"
    )
    add_policy_arguments(parser)
    add_input_arguments(parser)


def _pick_run(
    spec: str,
    policy: StallPolicy,
    max_message: int,
    stderr: IO[str],
    conventions: Conventions | None = None,
) -> RunReport:
    from otel_stall.offline.replay import Replayer

    path, _, selector = spec.partition("#")
    if not os.path.exists(path) and "#" in spec:
        path, selector = spec, ""
    result = Replayer(policy, conventions, max_message=max_message).analyse([path])
    print_errors(result.errors, stderr, result.skipped)
    if no_spans(result, [path], stderr):
        raise UsageError(f"{spec}: nothing to compare")
    runs = result.reports
    if selector:
        runs = [
            r
            for r in runs
            if selector
            in (
                r.attributes.get("agent"),
                r.attributes.get("run_span_id"),
                r.attributes.get("trace_id"),
            )
        ]
    if not runs:
        raise UsageError(f"{spec}: no run found" + (f" matching {selector!r}" if selector else ""))
    if len(runs) > 1:
        chosen = max(runs, key=lambda r: (r.stall_score, r.tool_calls))
        print(
            f"otel-stall: {spec}: {len(runs)} runs; comparing the most stalled one "
            f"({chosen.attributes.get('agent')}, span {chosen.attributes.get('run_span_id')}); "
            "select another with FILE#AGENT, FILE#SPAN_ID or FILE#TRACE_ID",
            file=stderr,
        )
        return chosen
    return runs[0]


def _wasted_json(wasted: Any) -> dict[str, Any] | None:
    """A run's wasted cost in ``compare --format json``; ``null`` for a run that never stalled."""
    if wasted is None:
        return None
    return {
        "from_seq": wasted.from_seq,
        "calls": wasted.calls,
        "model_calls": wasted.model_calls,
        "tokens": wasted.tokens,
        "seconds": wasted.seconds,
    }


def cmd_compare(args: argparse.Namespace, stdout: IO[str], stderr: IO[str]) -> int:
    """Compare the loops of two runs: shared loops point at the prompt or schema."""
    from otel_stall.core.compare import Conclusion, compare_runs
    from otel_stall.offline.stall_facts import wasted_text

    policy = policy_from_args(args)
    conventions = conventions_from_args(args)
    a = _pick_run(args.a, policy, args.max_message_mib, stderr, conventions)
    b = _pick_run(args.b, policy, args.max_message_mib, stderr, conventions)
    comparison = compare_runs(a, b, min_count=args.min_count)
    sections = (
        ("shared", comparison.shared),
        ("only_a", comparison.only_a),
        ("only_b", comparison.only_b),
    )
    if args.format == "json":
        doc = {
            "a": {k: a.attributes.get(k) for k in ("trace_id", "run_span_id", "agent")},
            "b": {k: b.attributes.get(k) for k in ("trace_id", "run_span_id", "agent")},
            "conclusion": comparison.conclusion.value,
            "explanation": comparison.explanation,
            "wasted_a": _wasted_json(comparison.wasted_a),
            "wasted_b": _wasted_json(comparison.wasted_b),
            **{
                name: [
                    {
                        "signature": s.signature,
                        "tool": s.tool,
                        "count_a": s.count_a,
                        "count_b": s.count_b,
                    }
                    for s in sigs
                ]
                for name, sigs in sections
            },
        }
        stdout.write(json.dumps(doc, indent=2) + "\n")
    else:
        explanation = printable(comparison.explanation)
        stdout.write(f"conclusion: {comparison.conclusion.value}\n{explanation}\n")
        for name, wasted in (("A", comparison.wasted_a), ("B", comparison.wasted_b)):
            if wasted is not None:
                tokens = (
                    "tokens not captured" if wasted.tokens is None else f"{wasted.tokens:,} tokens"
                )
                cost = wasted_text(wasted.calls, wasted.model_calls, tokens, wasted.seconds)
                stdout.write(
                    f"  wasted {name}: {cost} since the stall began (seq {wasted.from_seq})\n"
                )
        for name, sigs in sections:
            for s in sigs:
                stdout.write(
                    f"  {name:7} {printable(s.tool):20} {s.signature[:16]}"
                    f"  A x{s.count_a}  B x{s.count_b}\n"
                )
    return EXIT_OK if comparison.conclusion is Conclusion.NO_LOOP else EXIT_STALL
