"""The detector's input and output records.

Spans are turned into these small, OpenTelemetry-free values at the edge
(:mod:`otel_stall.conventions`), so the live processor, the offline replay and
the gateway all feed the very same detector.
"""

from __future__ import annotations

import dataclasses
import enum
import inspect
import types
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field
from typing import Any, Final, TypeVar

_Record = TypeVar("_Record", bound=type)
_T = TypeVar("_T")

_compiled_builder: Callable[..., Callable[..., Any]] | None
_compiled_install: Callable[[Any], None] | None
try:
    from otel_stall.core._canon import builder as _canon_builder
    from otel_stall.core._canon import install as _canon_install
except ImportError:  # not built (no compiler at install time): record_builder builds in Python
    _compiled_builder = _compiled_install = None
else:
    _compiled_builder = _canon_builder
    _compiled_install = _canon_install


class Status(str, enum.Enum):
    """How a tool call ended."""

    OK = "ok"
    ERROR = "error"
    REFUSED = "refused"
    """A guard refused the call before it ran: it produced nothing."""
    OVERLOADED = "overloaded"
    """The tool server hit a rate or capacity limit: a failure that returned nothing."""

    def __str__(self) -> str:
        return self.value


class Action(str, enum.Enum):
    """What the policy tells the agent to do, ordered by :data:`ACTION_SEVERITY`."""

    CONTINUE = "continue"
    REFUSE = "refuse"
    WARN = "warn"
    ESCALATE = "escalate"
    BREAK = "break"

    def __str__(self) -> str:
        return self.value


ACTION_SEVERITY: Final[dict[Action, int]] = {
    Action.CONTINUE: 0,
    Action.REFUSE: 1,
    Action.WARN: 2,
    Action.ESCALATE: 3,
    Action.BREAK: 4,
}


class Kind(str, enum.Enum):
    """Which rule produced a finding."""

    REPEAT = "repeat"
    DUPLICATE_CALL = "duplicate_call"
    NO_NEW_FACTS = "no_new_facts"
    REFUSED_ROUNDS = "refused_rounds"
    FAILURES = "failures"
    BUDGET = "budget"

    def __str__(self) -> str:
        return self.value


class Verdict(str, enum.Enum):
    """A run's overall outcome: the most severe action seen (``refuse`` counts as ``warn``)."""

    OK = "ok"
    WARN = "warn"
    ESCALATE = "escalate"
    BREAK = "break"

    def __str__(self) -> str:
        return self.value

    @property
    def severity(self) -> int:
        """Rank for comparisons and ``--fail-on``: ok < warn < escalate < break."""
        return _VERDICT_SEVERITY[self]

    @classmethod
    def of(cls, action: Action) -> Verdict:
        """The verdict a single action implies."""
        if action is Action.BREAK:
            return cls.BREAK
        if action is Action.ESCALATE:
            return cls.ESCALATE
        if action in (Action.WARN, Action.REFUSE):
            return cls.WARN
        return cls.OK


_VERDICT_SEVERITY: Final[dict[Verdict, int]] = {
    Verdict.OK: 0,
    Verdict.WARN: 1,
    Verdict.ESCALATE: 2,
    Verdict.BREAK: 3,
}


class _Absent:
    """Marks content that was not captured, which is not the same as empty content."""

    _instance: _Absent | None = None

    def __new__(cls) -> _Absent:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "ABSENT"

    def __bool__(self) -> bool:
        return False

    def __reduce__(self) -> str:
        return "ABSENT"


ABSENT: Final = _Absent()
"""Arguments or a result whose content was not captured (content capture off, redacted)."""

RunKey = Hashable
"""Identifies one agent invocation; the caller chooses it (trace id, agent span id, ...)."""


def unfrozen_twin(cls: type) -> Any:
    """A mutable slots class with the layout of the frozen slots dataclass ``cls``.

    :func:`record_builder`'s Python path, where the compiled builder is not
    built: build the twin (plain slot stores, positional arguments in field
    order), then set ``obj.__class__ = cls``. The result is a real ``cls``
    instance, frozen, equal to one built normally, usable with
    ``dataclasses.replace``. The retagging is checked here, once, so a layout
    mismatch fails at import.
    """
    names = [f.name for f in dataclasses.fields(cls)]
    twin: Any = dataclasses.make_dataclass(
        f"_{cls.__name__}Twin", names, slots=True, eq=False, repr=False
    )
    probe = twin(*([None] * len(names)))
    probe.__class__ = cls
    return twin


def record_builder(
    cls: type[_T], *, native: bool = True, leaves: tuple[type, ...] = ()
) -> Callable[..., _T]:
    """A constructor for the frozen slots dataclass ``cls`` that skips its ``__init__``.

    Call it with every field, positionally, in field order: ``build(*values)``
    equals ``cls(*values)`` and is a real, frozen ``cls``. No default is filled
    in and no ``__new__`` or ``__post_init__`` runs, so it suits hot paths that
    know every value. Why: a frozen dataclass stores each field through
    ``object.__setattr__``; :func:`unfrozen_twin` avoids that but pays for the
    twin's ``__init__`` and the ``__class__`` re-tag (its layout check), about
    five times a plain tuple for a 9-field :class:`Finding`. The compiled
    builder (``otel_stall.core._canon``, where it is built) allocates the instance
    and stores its slots, with nothing in between. With ``native=False``, or
    where it is not built, the twin is built and re-tagged: same results.

    ``leaves``: types (enums here) whose members, with ``None`` and exact
    ``str``, ``int``, ``float`` and ``bool``, can be in no garbage cycle. The
    compiled builder untracks a record holding only such values from the
    cyclic GC, which otherwise traverses every kept ledger row at each
    collection: about 2,000 instructions a tool call. The Python path ignores
    it: the same records, only still tracked.

    Refused here with ``TypeError`` rather than when called: a class whose
    instances have a ``__dict__``, or a field that is not a plain slot of
    ``cls`` (a property, say, that shadows it). The Python path also refuses
    what its re-tag cannot do, where the compiled one builds: slots declared on
    a base class, a ``__weakref__`` slot. The records here have neither.
    """
    names = tuple(f.name for f in dataclasses.fields(cls))  # type: ignore[arg-type]
    if cls.__dictoffset__:
        raise TypeError(f"{cls.__qualname__} instances have a __dict__: no builder for them")
    for name in names:
        if not isinstance(getattr(cls, name, None), types.MemberDescriptorType):
            raise TypeError(f"{cls.__qualname__}.{name} is not a slot: no builder for it")
    if native and _compiled_builder is not None:
        built: Callable[..., _T] = _compiled_builder(cls, names, (), None, leaves or None)
        return built
    twin = unfrozen_twin(cls)

    def build(*values: Any) -> _T:
        obj = twin(*values)
        obj.__class__ = cls
        made: _T = obj
        return made

    build.__qualname__ = f"record_builder({cls.__qualname__})"
    return build


def stores_slots_directly(cls: _Record, *, native: bool = True) -> _Record:
    """Give the frozen slots dataclass ``cls`` a constructor that stores its slots plainly.

    A frozen dataclass's ``__init__`` stores each field through
    ``object.__setattr__``, about 200 ns a field: building a 12-field
    :class:`ToolCall` cost more than the detector's rules for it. Here
    ``cls.__new__`` builds the record from its slots and ``__init__`` is gone.
    Where ``otel_stall.core._canon`` is built (and unless ``native=False``), that
    ``__new__`` is its compiled constructor, installed so that a call of
    ``cls`` itself reaches it directly: it binds positional and keyword
    arguments to the fields as the dataclass's ``__init__`` does, fills in the
    defaults and stores the slots, with no Python frame at all. Any call it
    does not build (a subclass, a bad call) goes to the Python ``__new__``
    below, which is also the whole constructor without the compiled one: a call
    with positional arguments only goes to :func:`record_builder`, with the
    defaults filled in; any other call builds the mutable twin (same fields,
    same defaults, plain slot stores, the dataclass's own argument errors) and
    re-tags it as ``cls``. What callers see is unchanged: the same signature,
    a frozen instance equal to one built the usual way, ``dataclasses.replace``,
    copying and pickling. A subclass has a layout of its own, so it is built
    the dataclass's way: with its own ``__init__``, or with this record's.

    Refused with ``TypeError``: a field with a default factory, a field left
    out of ``__init__`` or keyword-only, a ``__post_init__``.
    """
    fields = dataclasses.fields(cls)
    if hasattr(cls, "__post_init__") or any(
        not f.init or f.kw_only or f.default_factory is not dataclasses.MISSING for f in fields
    ):
        raise TypeError(f"{cls.__name__}: only plain fields can be stored directly")
    twin: Any = dataclasses.make_dataclass(
        cls.__name__,
        [
            (f.name, f.type)
            if f.default is dataclasses.MISSING
            else (f.name, f.type, dataclasses.field(default=f.default))
            for f in fields
        ],
        slots=True,
        eq=False,
        repr=False,
        match_args=False,
    )
    twin.__qualname__ = cls.__qualname__  # a bad call's TypeError names the record
    twin.__init__.__qualname__ = f"{cls.__qualname__}.__init__"  # as the dataclass's own does
    record: Any = cls
    signature = inspect.signature(cls)  # the dataclass's, before __init__ goes
    dataclass_init = record.__init__
    build: Callable[..., Any] = record_builder(record, native=native)
    defaults = tuple(f.default for f in fields)
    least = sum(1 for f in fields if f.default is dataclasses.MISSING)  # they come first
    most = len(fields)

    def __new__(klass: Any, *args: Any, **kwargs: Any) -> Any:
        if klass is cls and not kwargs and least <= len(args) <= most:
            return build(*args, *defaults[len(args) :])  # the common call: positional
        if klass is not cls:
            made = object.__new__(klass)
            if klass.__init__ is object.__init__:  # no __init__ of its own: ours, then
                dataclass_init(made, *args, **kwargs)
            return made
        obj = twin(*args, **kwargs)
        obj.__class__ = cls
        return obj

    def __reduce__(self: Any) -> tuple[type, tuple[Any, ...]]:
        # Copying and pickling rebuild through the constructor, with every field.
        return type(self), tuple(getattr(self, f.name) for f in dataclasses.fields(self))

    record.__reduce__ = __reduce__
    record.__signature__ = signature  # what inspect shows: the fields, not __new__'s
    del record.__init__  # __new__ stores every field
    if native and _compiled_builder is not None and _compiled_install is not None:
        names = tuple(f.name for f in fields)
        _compiled_install(_compiled_builder(cls, names, defaults[least:], __new__))
    else:
        record.__new__ = staticmethod(__new__)
    record(*(None for f in fields if f.default is dataclasses.MISSING))  # the re-tag works
    return cls


@stores_slots_directly
@dataclass(frozen=True, slots=True)
class ToolCall:
    """One tool call as the detector sees it: no spans, no OpenTelemetry types.

    ``arguments`` and ``result`` may be JSON text, already-decoded values
    (dicts, lists, scalars, as from an OTLP kvlist) or :data:`ABSENT`.
    """

    tool: str
    arguments: Any = ABSENT
    result: Any = ABSENT
    status: Status = Status.OK
    run_key: RunKey = None
    seq: int | None = None
    """The source's own sequence number, if it has one; the ledger numbers calls itself."""
    call_id: str | None = None
    span_id: str | None = None
    start_ns: int = 0
    end_ns: int = 0
    exempt: bool = False
    """The tool repeats by design (polling, wait-for-subagent): no repeat or duplicate checks."""
    approval: bool = False
    """The tool has side effects that an admin approves: every result counts as new."""


@stores_slots_directly
@dataclass(frozen=True, slots=True)
class ModelCall:
    """A model (chat, completion) call: it opens a new round in its run."""

    run_key: RunKey = None
    span_id: str | None = None
    start_ns: int = 0
    end_ns: int = 0
    model: str | None = None


Event = ToolCall | ModelCall
"""What the detector consumes, in the order the agent made the calls."""


@dataclass(frozen=True, slots=True)
class LedgerRow:
    """One tool call's line in the progress ledger."""

    seq: int
    tool: str
    signature: str
    """Hash of tool, normalised arguments, result digest and status."""
    call_signature: str
    """Hash of tool and normalised arguments: what a guard compares before execution."""
    result_digest: str | None
    """Hash of the normalised result; ``None`` when the result was not captured."""
    repeat_of: int | None
    """``seq`` of the first row with the same ``signature``, or ``None`` for a first occurrence."""
    count: int
    """Occurrences of ``signature`` so far in this run, this one included."""
    consecutive: int
    """Length of the current back-to-back run of this ``signature``."""
    new_fact: bool
    round: int
    status: Status
    action: Action
    span_id: str | None = None


@dataclass(frozen=True, slots=True)
class Finding:
    """A stall report: what fired, where, and a message written for the model."""

    kind: Kind
    action: Action
    tool: str
    signature: str
    count: int
    first_seq: int
    seq: int
    round: int
    message: str


@dataclass(frozen=True, slots=True)
class RunReport:
    """Everything the detector knows about one run: verdict, findings and the ledger."""

    run_key: RunKey
    verdict: Verdict
    stall_score: float
    tool_calls: int
    rounds: int
    findings: tuple[Finding, ...] = ()
    """Every finding, or the newest the detector keeps (the live processor bounds them)."""
    ledger: tuple[LedgerRow, ...] = ()
    """Every row, or the newest the detector keeps; ``tool_calls`` counts them all."""
    attributes: dict[str, Any] = field(default_factory=dict)
    """Free-form context from the edge (trace id, agent name); the detector ignores it."""

    @property
    def detected(self) -> bool:
        """Whether any rule fired: what tail sampling keeps."""
        return bool(self.findings)
