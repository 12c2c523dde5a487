"""The detection rules, one module each, and the order the detector asks them in.

Each module holds one rule's state, kind, thresholds (read from
:class:`~otel_stall.core.policy.StallPolicy`), guidance message and the
decisions behind it. :class:`~otel_stall.core.detector.RunDetector` works out
a call's facts once and asks the rules in :data:`RULES` order, hook by hook;
that order is the order of their findings. A new rule is one module here,
plus its entry in :data:`RULES` (and in :data:`GATES`, if the live gate
should refuse on its word): live, replay and the gateway feed the same
detector, so none of them changes.
"""

from __future__ import annotations

from typing import Final

from otel_stall.core.rules.base import Facts, Round, Rule, Streak
from otel_stall.core.rules.budgets import Budgets
from otel_stall.core.rules.chanting import Chanting
from otel_stall.core.rules.cycle import Cycle
from otel_stall.core.rules.delegate_stalled import DelegateStalled
from otel_stall.core.rules.duplicate_call import DuplicateCall
from otel_stall.core.rules.failure_loop import FailureLoop
from otel_stall.core.rules.failures import Failures
from otel_stall.core.rules.model_failure_loop import ModelFailureLoop
from otel_stall.core.rules.monologue import Monologue
from otel_stall.core.rules.near_duplicate import NearDuplicate
from otel_stall.core.rules.no_new_facts import NoNewFacts
from otel_stall.core.rules.recurrence import Recurrence
from otel_stall.core.rules.refused_rounds import RefusedRounds
from otel_stall.core.rules.repeat import Repeat

RULES: Final[tuple[type[Rule], ...]] = (
    Repeat,
    Cycle,
    Recurrence,
    DuplicateCall,
    Failures,
    FailureLoop,
    Budgets,
    ModelFailureLoop,
    Monologue,
    Chanting,
    NoNewFacts,
    RefusedRounds,
    DelegateStalled,
    NearDuplicate,
)
"""Every rule, in the order the detector asks them: a tool call's findings come out in
this order (repeat, cycle, repeat apart, duplicate, failures, failure loop, budget), a
model call's too (model failure loop, monologue, chanting)."""

GATES: Final[tuple[type[Rule], ...]] = (FailureLoop, DuplicateCall)
"""The rules the live gate asks, in this order, before a call runs: the first refusal wins."""

__all__ = [
    "GATES",
    "RULES",
    "Budgets",
    "Chanting",
    "Cycle",
    "DelegateStalled",
    "DuplicateCall",
    "Facts",
    "FailureLoop",
    "Failures",
    "ModelFailureLoop",
    "Monologue",
    "NearDuplicate",
    "NoNewFacts",
    "Recurrence",
    "RefusedRounds",
    "Repeat",
    "Round",
    "Rule",
    "Streak",
]
