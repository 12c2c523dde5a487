"""The detector's input records: a fast constructor that behaves as the dataclass's own."""

from __future__ import annotations

import copy
import dataclasses
import pickle
import re
from typing import Any

import pytest

from otel_stall.core.records import ABSENT, ModelCall, Status, ToolCall, stores_slots_directly

CASES: list[tuple[Any, tuple[Any, ...], dict[str, Any]]] = [
    (ToolCall, ("search",), {}),
    (ToolCall, ("search", '{"q": 1}', "[]", Status.ERROR), {"span_id": "ab", "end_ns": 5}),
    (ToolCall, (), {"tool": "poll", "exempt": True, "approval": True, "run_key": ("t", None)}),
    (ModelCall, (), {}),
    (ModelCall, (("t", "a"), "cd"), {"model": "m", "start_ns": 1}),
]


def _expected(cls: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
    """Field values as the dataclass's own ``__init__`` would store them."""
    fields = dataclasses.fields(cls)
    values = {f.name: f.default for f in fields}
    values.update(zip((f.name for f in fields), args, strict=False))
    values.update(kwargs)
    return values


@pytest.mark.parametrize(("cls", "args", "kwargs"), CASES)
def test_fields_are_stored_as_given_with_defaults(
    cls: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> None:
    """Positional and keyword arguments land in their fields; the rest take their defaults."""
    record = cls(*args, **kwargs)
    assert type(record) is cls
    assert dataclasses.asdict(record) == _expected(cls, args, kwargs)


@pytest.mark.parametrize(("cls", "args", "kwargs"), CASES)
def test_records_stay_frozen_hashable_and_equal(
    cls: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> None:
    """Records are frozen values: equal and hash-equal when their fields are."""
    record, twin = cls(*args, **kwargs), cls(*args, **kwargs)
    assert record == twin
    assert hash(record) == hash(twin)
    name = dataclasses.fields(cls)[0].name
    with pytest.raises(dataclasses.FrozenInstanceError):
        setattr(record, name, "changed")


@pytest.mark.parametrize(
    "rebuild", [copy.copy, copy.deepcopy, lambda r: pickle.loads(pickle.dumps(r))]
)
@pytest.mark.parametrize(("cls", "args", "kwargs"), CASES)
def test_copies_and_pickles_round_trip(
    cls: Any, args: tuple[Any, ...], kwargs: dict[str, Any], rebuild: Any
) -> None:
    """Copying and pickling give an equal record of the same type."""
    record = cls(*args, **kwargs)
    again = rebuild(record)
    assert again == record
    assert type(again) is cls


def test_replace_changes_one_field() -> None:
    """``dataclasses.replace`` builds a new record through the constructor."""
    call = ToolCall("search", "{}", "[]", span_id="ab")
    changed = dataclasses.replace(call, exempt=True)
    assert changed.exempt
    assert not call.exempt
    assert dataclasses.replace(changed, exempt=False) == call


@pytest.mark.parametrize(
    ("cls", "args", "kwargs", "message"),
    [
        (ToolCall, (), {}, "ToolCall.__init__() missing 1 required positional argument"),
        (ToolCall, ("a",), {"bogus": 1}, "ToolCall.__init__() got an unexpected keyword"),
        (ModelCall, (1, 2, 3, 4, 5, 6), {}, "ModelCall.__init__() takes"),
    ],
)
def test_bad_arguments_name_the_record(
    cls: Any, args: tuple[Any, ...], kwargs: dict[str, Any], message: str
) -> None:
    """A wrong call raises the usual TypeError, naming the record."""
    with pytest.raises(TypeError, match=re.escape(message)):
        cls(*args, **kwargs)


def test_dataclass_subclass_keeps_its_own_fields() -> None:
    """A dataclass subclass (its own layout) is built the dataclass's way."""

    @dataclasses.dataclass(frozen=True, slots=True)
    class Tagged(ToolCall):
        tag: str = "none"

    tagged = Tagged("search", tag="x")
    assert (tagged.tool, tagged.tag, tagged.result) == ("search", "x", ABSENT)
    assert copy.copy(tagged) == tagged


def test_plain_subclass_gets_the_record_fields() -> None:
    """A subclass without an ``__init__`` of its own still stores the record's fields."""

    class Named(ToolCall):
        __slots__ = ()

    named = Named("search", "{}")
    assert (type(named), named.tool, named.arguments) == (Named, "search", "{}")


def test_refuses_records_it_cannot_store_directly() -> None:
    """A record with a default factory or ``__post_init__`` is refused at decoration."""

    @dataclasses.dataclass(frozen=True, slots=True)
    class Bag:
        items: list[int] = dataclasses.field(default_factory=list)

    with pytest.raises(TypeError, match="only plain fields"):
        stores_slots_directly(Bag)
