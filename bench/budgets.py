"""The performance budgets of issue #26, in one place, and the results file the benchmarks share.

Each benchmark prints a markdown section for the page and, when ``run_all.py``
asks (``BENCH_RESULTS`` names a JSON-lines file), appends one line per measured
row: the row's key, the measured value, the floor measured beside it where the
row has one, and the instruction counts where callgrind counted them.
``run_all.py`` puts the rows side by side with their budgets at the top of the
page, this checkout's beside another's (``--before``).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Budget:
    """One row of the budget table: what is measured, its limit, and which way is better."""

    key: str
    path: str
    limit: float
    unit: str
    """How the value reads: ``x`` (a ratio), ``spans/s``, ``MB``, ``KB``."""
    at_most: bool = True
    """A ceiling (the value must be at most ``limit``) or, if false, a floor."""

    def met(self, value: float) -> bool:
        """Whether ``value`` is within the budget."""
        return value <= self.limit if self.at_most else value >= self.limit

    @property
    def text(self) -> str:
        """The budget as the table spells it: ``≤ 1.45``, ``≥ 30,000 spans/s``."""
        sign = "≤" if self.at_most else "≥"
        limit = f"{self.limit:,.0f}" if self.limit >= 1000 else f"{self.limit:g}"
        return f"{sign} {limit}{'' if self.unit == 'x' else ' ' + self.unit}"


BUDGETS = {
    budget.key: budget
    for budget in (
        Budget("wiring.non_tool", "users' wiring, non-tool spans", 1.05, "x"),
        Budget("wiring.chat", "same wiring, chat spans with no content", 1.15, "x"),
        Budget("wiring.tool", "same wiring, tool spans of 1.4 KB", 1.45, "x"),
        Budget("wiring.looping", "same wiring, a looping run", 1.55, "x"),
        Budget("replay.json", "replay over the orjson walk floor, OTLP/JSON", 2.7, "x"),
        Budget("replay.binary", "replay over the protobuf floor, binary", 2.5, "x"),
        Budget("replay.rss", "replay peak memory, 164k-span capture", 120, "MB"),
        Budget(
            "gateway.mix", "gateway with detection on, 10% agent mix, of pass-through", 0.5, "x",
            at_most=False,
        ),
        Budget("gateway.plain", "gateway with detection on, plain-only traffic, CPU", 1.3, "x"),
        Budget("gateway.agent", "gateway, all-agent", 30_000, "spans/s", at_most=False),
        Budget("memory.open_run", "memory per open live run of 10 calls", 6, "KB"),
        Budget("import", "`import otel_stall` CPU over `import opentelemetry.sdk.trace`", 1.5, "x"),
    )
}  # fmt: skip
"""Issue #26's table, in its order."""


def record(key: str, **fields: Any) -> None:
    """Append what was measured for one row, for ``run_all.py``, if it asked (``BENCH_RESULTS``).

    The fields ``run_all.py`` reads: ``value`` (what the budget limits, by the
    clock or in bytes), ``floor`` (the same for the minimal processor or the
    parse floor), ``instructions`` and ``instructions_floor`` (the same ratios
    by callgrind), ``micros`` (what otel-stall adds per span or call, in CPU µs)
    and ``note`` (a few words). The clock and callgrind rows come from different
    scripts: they add to one another.
    """
    path = os.environ.get("BENCH_RESULTS")
    if not path:
        return
    with open(path, "a", encoding="utf-8") as out:
        out.write(json.dumps({"key": key, **fields}) + "\n")


def read(path: str) -> dict[str, dict[str, Any]]:
    """The rows a run recorded, by key; a later line for a key adds to an earlier one.

    Rows recorded for the other tree (``tree="before"``) come under ``before:KEY``.
    """
    rows: dict[str, dict[str, Any]] = {}
    try:
        with open(path, encoding="utf-8") as lines:
            for line in lines:
                row = json.loads(line)
                other = row.get("tree") == "before"  # a side-by-side script's other tree
                rows.setdefault(("before:" if other else "") + row["key"], {}).update(row)
    except FileNotFoundError:
        pass
    return rows
