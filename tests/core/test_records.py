"""The detector's records: plain slots dataclasses that behave as values."""

from __future__ import annotations

import copy
import dataclasses
import pickle
import re
from typing import Any

import pytest

from otel_stall import (
    ABSENT,
    Action,
    Content,
    Digests,
    Finding,
    Kind,
    LedgerRow,
    ModelCall,
    Observation,
    RunReport,
    Status,
    ToolCall,
    Verdict,
)
from otel_stall.core import records
from otel_stall.core.chanting import scan

_ROW = LedgerRow(
    4, "search", "s" * 16, "c" * 16, "r" * 16, 2, 3, 2, False, 1, Status.OK, Action.WARN, "ab"
)
_FINDING = Finding(Kind.REPEAT, Action.WARN, "search", "s" * 16, 3, 2, 4, 1, "stop repeating")

SAMPLES: dict[type[Any], tuple[Any, ...]] = {
    ToolCall: (
        "search",
        '{"q": 1}',
        {"hits": []},
        Status.ERROR,
        ("trace", 7),
        7,
        "call-1",
        "span-1",
        10,
        20,
        True,
        False,
        "TimeoutError",
    ),
    ModelCall: (
        ("trace", 7),
        "span-2",
        1,
        2,
        "gpt",
        Status.ERROR,
        "RateLimitError",
        100,
        20,
        "o" * 16,
        scan("the same few words over and over again " * 12),
    ),
    LedgerRow: dataclasses.astuple(_ROW),
    Finding: dataclasses.astuple(_FINDING),
    RunReport: (
        "run",
        Verdict.WARN,
        0.5,
        3,
        2,
        (_FINDING,),
        (_ROW,),
        {"agent": "a"},
        1,
        120,
        2.5,
        2,
        3,
    ),
    Digests: ("c" * 16, None, "s" * 16, Content.PRESENT, Content.ABSENT, ("i" * 16,), 0x5EED),
    Observation: (_ROW, (_FINDING,)),
}
"""One value per field, in field order, each distinct from its neighbours."""

CLASSES = [pytest.param(cls, id=cls.__name__) for cls in SAMPLES]


def _fields(record: Any) -> tuple[Any, ...]:
    return tuple(getattr(record, f.name) for f in dataclasses.fields(record))


def test_samples_cover_every_record_class() -> None:
    """Every dataclass in ``otel_stall.core.records`` has sample values here."""
    defined = [
        value
        for value in vars(records).values()
        if isinstance(value, type)
        and dataclasses.is_dataclass(value)
        and value.__module__ == records.__name__
    ]
    assert defined
    assert set(defined) <= set(SAMPLES)


@pytest.mark.parametrize("cls", CLASSES)
def test_fields_hold_what_was_given(cls: type[Any]) -> None:
    """Positional values land in their fields, in order."""
    assert _fields(cls(*SAMPLES[cls])) == SAMPLES[cls]


@pytest.mark.parametrize("cls", CLASSES)
def test_records_are_values(cls: type[Any]) -> None:
    """Equal fields make equal records; another value differs; no field outside the slots."""
    values = SAMPLES[cls]
    record = cls(*values)
    assert record == cls(*values)
    assert record != cls("other", *values[1:])
    assert not hasattr(record, "__dict__")


def test_the_run_report_is_frozen() -> None:
    """A run's report, handed to callbacks and readers on other threads, cannot be changed."""
    report = RunReport(*SAMPLES[RunReport])
    with pytest.raises(dataclasses.FrozenInstanceError):
        report.verdict = Verdict.OK  # type: ignore[misc]


@pytest.mark.parametrize(
    "rebuild",
    [
        pytest.param(copy.copy, id="copy"),
        pytest.param(copy.deepcopy, id="deepcopy"),
        pytest.param(lambda r: pickle.loads(pickle.dumps(r)), id="pickle"),
        pytest.param(dataclasses.replace, id="replace"),
    ],
)
@pytest.mark.parametrize("cls", CLASSES)
def test_copies_and_pickles_round_trip(cls: type[Any], rebuild: Any) -> None:
    """Copying, pickling and ``dataclasses.replace`` give an equal record of the same type."""
    record = cls(*SAMPLES[cls])
    again = rebuild(record)
    assert type(again) is cls
    assert again == record


@pytest.mark.parametrize("cls", CLASSES)
def test_repr_names_the_record_and_its_fields(cls: type[Any]) -> None:
    """The repr is the dataclass's: the class name, then each field as ``name=value``."""
    record = cls(*SAMPLES[cls])
    shown = ", ".join(f"{f.name}={getattr(record, f.name)!r}" for f in dataclasses.fields(cls))
    assert repr(record) == f"{cls.__qualname__}({shown})"


CALLS: list[tuple[Any, tuple[Any, ...], dict[str, Any]]] = [
    (ToolCall, ("search",), {}),
    (ToolCall, ("search", '{"q": 1}', "[]", Status.ERROR), {"span_id": "ab", "end_ns": 5}),
    (ToolCall, (), {"tool": "poll", "exempt": True, "approval": True, "run_key": ("t", None)}),
    (ModelCall, (), {}),
    (ModelCall, (("t", "a"), "cd"), {"model": "m", "start_ns": 1}),
]


@pytest.mark.parametrize(("cls", "args", "kwargs"), CALLS)
def test_inputs_take_keywords_and_defaults(
    cls: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> None:
    """Positional and keyword arguments land in their fields; the rest take their defaults."""
    fields = dataclasses.fields(cls)
    expected = {f.name: f.default for f in fields}
    expected.update(zip((f.name for f in fields), args, strict=False))
    expected.update(kwargs)
    assert dataclasses.asdict(cls(*args, **kwargs)) == expected


def test_replace_changes_one_field() -> None:
    """``dataclasses.replace`` builds a new record with one field changed."""
    call = ToolCall("search", "{}", "[]", span_id="ab")
    changed = dataclasses.replace(call, exempt=True)
    assert changed.exempt
    assert not call.exempt
    assert dataclasses.replace(changed, exempt=False) == call


def test_absent_is_one_falsy_marker_that_survives_pickling() -> None:
    """``ABSENT`` is falsy, shows as ``ABSENT`` and unpickles as the very same object."""
    assert not ABSENT
    assert repr(ABSENT) == "ABSENT"
    assert pickle.loads(pickle.dumps(ToolCall("t"))).arguments is ABSENT


@pytest.mark.parametrize(
    ("cls", "args", "kwargs", "message"),
    [
        (ToolCall, (), {}, "ToolCall.__init__() missing 1 required positional argument"),
        (ToolCall, ("a",), {"bogus": 1}, "ToolCall.__init__() got an unexpected keyword"),
        (ModelCall, tuple(range(12)), {}, "ModelCall.__init__() takes"),
    ],
)
def test_bad_arguments_name_the_record(
    cls: Any, args: tuple[Any, ...], kwargs: dict[str, Any], message: str
) -> None:
    """A wrong call raises the usual TypeError, naming the record."""
    with pytest.raises(TypeError, match=re.escape(message)):
        cls(*args, **kwargs)


def test_dataclass_subclass_keeps_its_own_fields() -> None:
    """A dataclass subclass adds its fields after the record's."""

    @dataclasses.dataclass(slots=True)
    class Tagged(ToolCall):
        tag: str = "none"

    tagged = Tagged("search", tag="x")
    assert (tagged.tool, tagged.tag, tagged.result) == ("search", "x", ABSENT)
    assert copy.copy(tagged) == tagged
