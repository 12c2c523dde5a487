"""Instructions per tool call of the detector, for ``valgrind --tool=callgrind``.

Wall time on a shared 2-core machine swings by tens of percent; instruction
counts do not. Run it under callgrind twice, with ``--calls`` N and 2N: the
difference divided by N is the per-call cost, free of start-up. Two modes,
on the payloads of ``bench_detector.py``:

  ``alone``: ``RunDetector.tool_call`` on records whose digests were computed
  before; minus ``sign`` (the same set-up without the calls), the detector's
  own work: the rules and the ledger;
  ``whole``: building the record and signing it as well (what a span costs);
  minus ``setup`` (making the payloads, which grows with ``--calls`` too, at
  about 390k instructions a call: more than the call itself), a call's cost.
  ``whole`` alone is no per-call cost: its difference is mostly the payloads'.

Side by side against another checkout: run the same command with
``PYTHONPATH=<other root>:<site-packages> python -S`` from outside either root.

    valgrind --tool=callgrind python bench/detector_instructions.py --calls 4000
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from bench_detector import make_payloads

from otel_stall.core.detector import RunDetector
from otel_stall.core.policy import StallPolicy
from otel_stall.core.records import ModelCall, ToolCall


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--calls", type=int, default=4000)
    parser.add_argument("--mode", choices=("alone", "whole", "sign", "setup"), default="alone")
    parser.add_argument("--noisy", action="store_true")
    parser.add_argument(
        "--no-items", action="store_true", help="item_novelty off: no item digests to work out"
    )
    options = parser.parse_args(argv)
    payloads = make_payloads(options.calls, noisy=options.noisy)
    policy = StallPolicy(item_novelty=not options.no_items)
    run = RunDetector(policy)
    if options.mode in ("alone", "sign"):
        sign = StallPolicy(item_novelty=not options.no_items).signer.sign
        calls = [ToolCall(t, a, r) for t, a, r in payloads]
        signed = [(c, sign(c.tool, c.arguments, c.result, c.status)) for c in calls]
        if options.mode == "sign":  # the signing alone: subtract it from ``alone``
            signed = []
        for n, (call, digests) in enumerate(signed):
            if n % 4 == 0:
                run.model_call(ModelCall())
            run.tool_call(call, digests)
    elif options.mode == "whole":
        for n, (tool, args, result) in enumerate(payloads):
            if n % 4 == 0:
                run.model_call(ModelCall())
            run.tool_call(ToolCall(tool, args, result))
    print(run.report().tool_calls)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
