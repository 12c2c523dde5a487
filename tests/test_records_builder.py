"""``record_builder``: a record built from its slots is the record its constructor builds.

Each test runs on both paths, the compiled builder (``otel_stall._canon``) and
the Python twin-and-retag (``native=False``), for every frozen record the hot
paths build. The compiled builder's refusals and its memory handling (GC
tracking, references, cycles) are checked directly on ``_canon.builder``. Set
``OTEL_STALL_REQUIRE_NATIVE=1`` (CI with a compiler) to make a missing
extension fail instead of skip.
"""

from __future__ import annotations

import copy
import dataclasses
import gc
import importlib
import os
import pickle
import sys
import weakref
from collections.abc import Callable
from types import ModuleType
from typing import Any

import pytest

from otel_stall import records
from otel_stall.detector import Observation
from otel_stall.records import (
    ABSENT,
    Action,
    Finding,
    Kind,
    LedgerRow,
    ModelCall,
    RunReport,
    Status,
    ToolCall,
    Verdict,
    record_builder,
)
from otel_stall.signature import NATIVE_AVAILABLE, Content, Digests

REQUIRE_NATIVE = os.environ.get("OTEL_STALL_REQUIRE_NATIVE") == "1"


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
    ),
    ModelCall: (("trace", 7), "span-2", 1, 2, "gpt"),
    LedgerRow: tuple(getattr(_ROW, f.name) for f in dataclasses.fields(LedgerRow)),
    Finding: tuple(getattr(_FINDING, f.name) for f in dataclasses.fields(Finding)),
    RunReport: ("run", Verdict.WARN, 0.5, 3, 2, (_FINDING,), (_ROW,), {"agent": "a"}),
    Digests: ("c" * 16, None, "s" * 16, Content.PRESENT, Content.ABSENT),
    Observation: (_ROW, (_FINDING,)),
}
"""One value per field, in field order, each distinct from its neighbours."""

RECORD_CLASSES = [
    value
    for value in vars(records).values()
    if isinstance(value, type)
    and dataclasses.is_dataclass(value)
    and value.__module__ == records.__name__
]


def test_samples_cover_every_record_class() -> None:
    """Every dataclass in ``otel_stall.records`` has sample values here."""
    assert RECORD_CLASSES
    assert set(RECORD_CLASSES) <= set(SAMPLES)


CLASSES = [pytest.param(cls, id=cls.__name__) for cls in SAMPLES]
PATHS = [pytest.param(True, id="native"), pytest.param(False, id="python")]


@pytest.fixture(params=PATHS)
def native(request: pytest.FixtureRequest) -> bool:
    """Which builder: the compiled one (skipped where it is not built) or the Python one."""
    wanted: bool = request.param
    if wanted and not NATIVE_AVAILABLE:
        if REQUIRE_NATIVE:
            pytest.fail("otel_stall._canon is not built")
        pytest.skip("otel_stall._canon is not built")
    return wanted


@pytest.fixture(scope="module")
def canon() -> ModuleType:
    """The compiled module: skipped where it is not built, unless the environment requires it."""
    try:
        return importlib.import_module("otel_stall._canon")
    except ImportError:
        if REQUIRE_NATIVE:
            raise
        pytest.skip("otel_stall._canon is not built")


def _names(cls: type[Any]) -> tuple[str, ...]:
    return tuple(f.name for f in dataclasses.fields(cls))


def _hash_or_refusal(value: Any) -> object:
    """``hash(value)``, or ``TypeError`` for a record with an unhashable field."""
    try:
        return hash(value)
    except TypeError:
        return TypeError


# -- what gets built -------------------------------------------------------------


@pytest.mark.parametrize("cls", CLASSES)
def test_built_equals_constructed(cls: type[Any], native: bool) -> None:
    """The built record is a ``cls``, equal to ``cls(*values)``, each value in its field."""
    values = SAMPLES[cls]
    built = record_builder(cls, native=native)(*values)
    assert type(built) is cls
    assert built == cls(*values)
    assert tuple(getattr(built, name) for name in _names(cls)) == values
    assert repr(built) == repr(cls(*values))


@pytest.mark.parametrize("cls", CLASSES)
def test_built_record_is_frozen(cls: type[Any], native: bool) -> None:
    """No field of a built record can be set or deleted."""
    built = record_builder(cls, native=native)(*SAMPLES[cls])
    for name in _names(cls):
        with pytest.raises(dataclasses.FrozenInstanceError):
            setattr(built, name, "changed")
        with pytest.raises(dataclasses.FrozenInstanceError):
            delattr(built, name)


@pytest.mark.parametrize("cls", CLASSES)
def test_built_record_hashes_and_compares_as_constructed(cls: type[Any], native: bool) -> None:
    """Hash and equality are the constructed record's; another value in a field makes it differ."""
    values = SAMPLES[cls]
    build = record_builder(cls, native=native)
    built = build(*values)
    assert _hash_or_refusal(built) == _hash_or_refusal(cls(*values))
    assert built == build(*values)
    assert built != build("other", *values[1:])


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
def test_built_record_copies_and_pickles(
    cls: type[Any], native: bool, rebuild: Callable[[Any], Any]
) -> None:
    """Copying, pickling and ``dataclasses.replace`` give an equal record of the same class."""
    built = record_builder(cls, native=native)(*SAMPLES[cls])
    again = rebuild(built)
    assert type(again) is cls
    assert again == built


@pytest.mark.parametrize("cls", CLASSES)
def test_both_paths_build_the_same(cls: type[Any]) -> None:
    """The compiled and the Python builder give equal records (one path alone where not built)."""
    values = SAMPLES[cls]
    python = record_builder(cls, native=False)(*values)
    assert record_builder(cls)(*values) == python
    assert type(record_builder(cls)(*values)) is type(python)


def test_compiled_builder_is_used_where_built(canon: ModuleType) -> None:
    """``record_builder`` hands back the compiled builder, which names its class and fields."""
    build = record_builder(Finding)
    assert isinstance(build, canon.Builder)
    assert build.cls is Finding
    assert build.names == _names(Finding)
    assert "Finding" in repr(build)
    assert "first_seq" in repr(build)


# -- bad calls -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("shift", "keywords"),
    [
        pytest.param(None, {}, id="none"),
        pytest.param(-1, {}, id="one-short"),
        pytest.param(1, {}, id="one-over"),
        pytest.param(-1, {"last": 1}, id="keyword-for-the-last"),
        pytest.param(None, {"first": 1}, id="keywords-only"),
    ],
)
@pytest.mark.parametrize("cls", [Finding, LedgerRow, Observation])
def test_wrong_arguments_raise_type_error(
    cls: type[Any], native: bool, shift: int | None, keywords: dict[str, Any]
) -> None:
    """Another number of values than fields, or any keyword, is a TypeError naming the class."""
    values = SAMPLES[cls]
    given = () if shift is None else (*values, *values)[: len(values) + shift]
    build = record_builder(cls, native=native)
    with pytest.raises(TypeError, match=cls.__name__):
        build(*given, **keywords)


# -- refusals when the builder is made --------------------------------------------


@dataclasses.dataclass(frozen=True)
class _WithDict:
    value: Any


@dataclasses.dataclass(frozen=True, slots=True)
class _Plain:
    value: Any
    other: Any = None


class _Shadowed(_Plain):
    """A field of the base shadowed by a property: the slot is no longer what ``value`` reads."""

    __slots__ = ()

    @property
    def value(self) -> Any:
        return "shadow"


@pytest.mark.parametrize(
    ("cls", "reason"),
    [
        pytest.param(_WithDict, "__dict__", id="dict"),
        pytest.param(_Shadowed, "not a slot", id="property"),
        pytest.param(int, "dataclass", id="not-a-dataclass"),
    ],
)
def test_record_builder_refuses_when_made(cls: type[Any], reason: str, native: bool) -> None:
    """A class with a ``__dict__``, or a field that is not its slot, is refused at once."""
    with pytest.raises(TypeError, match=reason):
        record_builder(cls, native=native)


class _Slots:
    __slots__ = ("a", "b")


class _SlotsAndWeakref:
    __slots__ = ("__weakref__", "a", "b")


class _Borrower:
    """Holds another class's slot descriptor: its offset means nothing here."""

    __slots__ = ("mine",)
    a = vars(_Slots)["a"]


class _DictSubclass(dict[str, Any]):
    """A slot on a C base with state of its own, which only ``dict.__new__`` sets up."""

    __slots__ = ("a",)


class _WithProperty:
    __slots__ = ("a",)

    @property
    def b(self) -> int:
        return 1


class _Open:
    """Instances with a ``__dict__`` next to their slot."""

    __slots__ = ("__dict__", "a")


@pytest.mark.parametrize(
    ("cls", "names", "reason"),
    [
        pytest.param(_WithDict, ("value",), "__dict__", id="dataclass-with-dict"),
        pytest.param(_Open, ("a",), "__dict__", id="slots-and-dict"),
        pytest.param(_Slots, ("a", "c"), "no attribute", id="not-an-attribute"),
        pytest.param(_WithProperty, ("a", "b"), "property", id="property"),
        pytest.param(_Slots, ("a", "__init__"), "not a slot", id="method"),
        pytest.param(_Slots, ("a", "__doc__"), "not a slot", id="class-attribute"),
        pytest.param(_Borrower, ("mine", "a"), "another class", id="foreign-slot"),
        pytest.param(_Slots, ("a",), "more than", id="slot-left-out"),
        pytest.param(_Slots, ("a", "a"), "same slot", id="slot-twice"),
        pytest.param(_Slots, ("a", 1), "str", id="name-not-str"),
        pytest.param(_Slots, ["a", "b"], "tuple", id="names-not-tuple"),
        pytest.param(_DictSubclass, ("a",), "more than", id="c-base-with-state"),
        pytest.param(slice, ("start", "stop", "step"), "writable", id="read-only-members"),
        pytest.param(tuple, (), "cannot be built", id="variable-size"),
        pytest.param(_Slots(), ("a", "b"), "class", id="not-a-class"),
    ],
)
def test_compiled_builder_refuses_when_made(
    canon: ModuleType, cls: Any, names: Any, reason: str
) -> None:
    """Anything but a class made of exactly the named writable slots is refused when made."""
    with pytest.raises(TypeError, match=reason):
        canon.builder(cls, names)


def test_compiled_builder_accepts_a_weakref_slot(canon: ModuleType) -> None:
    """A ``__weakref__`` slot starts empty: built instances can be weakly referenced."""
    build = canon.builder(_SlotsAndWeakref, ("b", "a"))
    built = build(2, 1)
    assert (built.a, built.b) == (1, 2)
    ref = weakref.ref(built)
    assert ref() is built
    del built
    gc.collect()
    assert ref() is None


class _Base:
    __slots__ = ("first", "second")
    first: Any
    second: Any


class _Derived(_Base):
    """Some of its slots are the base's (a 3.10 slots dataclass would declare them again)."""

    __slots__ = ("third",)
    third: Any


def test_compiled_builder_finds_slots_on_a_base(canon: ModuleType) -> None:
    """Values stored in a base's slots land where the base's descriptors read them."""
    built = canon.builder(_Derived, ("third", "first", "second"))(3, 1, ABSENT)
    assert type(built) is _Derived
    assert (built.first, built.second, built.third) == (1, ABSENT, 3)


# -- memory ------------------------------------------------------------------------


class _Marker:
    """A weakly referenceable object to tell whether a cycle was collected."""


@pytest.mark.parametrize("cls", CLASSES)
def test_builds_survive_interleaved_collections(cls: type[Any], canon: ModuleType) -> None:
    """100k compiled builds holding tracked containers stay intact through collections between."""
    values = SAMPLES[cls]
    build = canon.builder(cls, _names(cls))
    threshold = gc.get_threshold()
    kept = []
    try:
        gc.set_threshold(7)  # a young collection every few allocations, builds included
        for i in range(100_000):
            kept.append(build([i], *values[1:]))
            if i % 5_000 == 0:
                gc.collect()
    finally:
        gc.set_threshold(*threshold)
    gc.collect()
    assert all(type(r) is cls for r in kept)
    assert [getattr(r, _names(cls)[0]) for r in kept] == [[i] for i in range(100_000)]
    assert kept[-1] == cls([99_999], *values[1:])


@pytest.mark.parametrize("cls", CLASSES)
def test_cycle_through_a_record_is_collected(cls: type[Any], native: bool) -> None:
    """A list holding the record that holds the list is collected once unreachable."""
    cycle: list[Any] = [_Marker()]
    marker = weakref.ref(cycle[0])
    cycle.append(record_builder(cls, native=native)(cycle, *SAMPLES[cls][1:]))
    del cycle
    gc.collect()
    assert marker() is None


def test_cycle_through_a_builder_is_collected(native: bool) -> None:
    """A class that holds its own builder is collected with it: the builder is GC-aware."""

    @dataclasses.dataclass(frozen=True, slots=True)
    class Local:
        value: Any

    dead = weakref.ref(Local)
    Local.build = record_builder(Local, native=native)  # type: ignore[attr-defined]
    assert Local.build(1) == Local(1)  # type: ignore[attr-defined]
    del Local
    gc.collect()
    assert dead() is None


@pytest.mark.parametrize("cls", CLASSES)
def test_builds_keep_exact_references(cls: type[Any], native: bool) -> None:
    """Each build holds one reference per field, released when the record goes."""
    value = _Marker()
    build = record_builder(cls, native=native)
    before = sys.getrefcount(value)
    built = [build(value, *SAMPLES[cls][1:]) for _ in range(100)]
    assert sys.getrefcount(value) == before + 100
    del built
    assert sys.getrefcount(value) == before
