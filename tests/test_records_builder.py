"""``record_builder``: a record built from its slots is the record its constructor builds.

Each test runs on both paths, the compiled builder (``otel_stall.core._canon``) and
the Python twin-and-retag (``native=False``), for every frozen record the hot
paths build. The compiled builder's refusals and its memory handling (GC
tracking, references, cycles) are checked directly on ``_canon.builder``. Set
``OTEL_STALL_REQUIRE_NATIVE=1`` (CI with a compiler) to make a missing
extension fail instead of skip.
"""

from __future__ import annotations

import copy
import dataclasses
import enum
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

from otel_stall.core import records
from otel_stall.core.detector import Observation, RunDetector
from otel_stall.core.records import (
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
    stores_slots_directly,
)
from otel_stall.core.signing import NATIVE_AVAILABLE, Content, Digests

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
    """Every dataclass in ``otel_stall.core.records`` has sample values here."""
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
            pytest.fail("otel_stall.core._canon is not built")
        pytest.skip("otel_stall.core._canon is not built")
    return wanted


@pytest.fixture(scope="module")
def canon() -> ModuleType:
    """The compiled module: skipped where it is not built, unless the environment requires it."""
    try:
        return importlib.import_module("otel_stall.core._canon")
    except ImportError:
        if REQUIRE_NATIVE:
            raise
        pytest.skip("otel_stall.core._canon is not built")


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


@pytest.mark.slow
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


# -- the public constructor: stores_slots_directly ---------------------------------


def _record(native: bool | None) -> Any:
    """A fresh frozen slots record; ``stores_slots_directly`` on ``native``'s path, or plain."""

    @dataclasses.dataclass(frozen=True, slots=True)
    class Rec:
        first: Any
        second: Any = 1
        third: Any = ABSENT

    return Rec if native is None else stores_slots_directly(Rec, native=native)


def _outcome(cls: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> object:
    """What a call gives: the class name and field values, or the error and its message."""
    try:
        made = cls(*args, **kwargs)
    except TypeError as error:
        return TypeError, str(error)
    return type(made).__name__, tuple(getattr(made, f.name) for f in dataclasses.fields(made))


CALLS = [
    pytest.param((1,), {}, id="least"),
    pytest.param((1, 2, 3), {}, id="all"),
    pytest.param((1, 2), {"third": 3}, id="mixed"),
    pytest.param((), {"third": 3, "first": 1}, id="keywords-out-of-order"),
    pytest.param((), {"first": 1, "second": 2, "third": 3}, id="keywords-only"),
    pytest.param((), {}, id="missing"),
    pytest.param((), {"second": 2}, id="missing-with-keyword"),
    pytest.param((1, 2, 3, 4), {}, id="too-many"),
    pytest.param((1,), {"first": 2}, id="given-twice"),
    pytest.param((1,), {"fourth": 2}, id="unknown-keyword"),
    pytest.param((1,), {"self": 2}, id="self"),
    pytest.param((1,), {"__dataclass_self__": 2}, id="dataclass-self"),
]


@pytest.mark.parametrize(("args", "kwargs"), CALLS)
def test_constructor_behaves_as_the_dataclass(
    native: bool, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> None:
    """Fields stored, defaults filled, or the same TypeError word for word: on both paths."""
    assert _outcome(_record(native), args, kwargs) == _outcome(_record(None), args, kwargs)


@pytest.mark.parametrize(("args", "kwargs"), CALLS)
def test_tool_call_behaves_as_the_dataclass(args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    """The real record against a plain frozen dataclass with its fields and defaults."""
    plain = dataclasses.make_dataclass(
        "ToolCall",
        [
            (f.name, f.type, dataclasses.field(default=f.default))
            for f in dataclasses.fields(ToolCall)
        ],
        frozen=True,
        slots=True,
    )
    names = {"first": "tool", "second": "arguments", "third": "result", "fourth": "bogus"}
    kwargs = {names.get(name, name): value for name, value in kwargs.items()}
    assert _outcome(ToolCall, args, kwargs) == _outcome(plain, args, kwargs)


def test_constructor_keeps_the_dataclass_signature(native: bool) -> None:
    """``inspect.signature`` shows the fields, as for the dataclass, not ``__new__``'s."""
    import inspect

    assert inspect.signature(_record(native)) == inspect.signature(_record(None))
    assert "tool: 'str'" in str(inspect.signature(ToolCall))


def test_constructor_is_compiled_where_built(canon: ModuleType) -> None:
    """``ToolCall.__new__`` is the compiled constructor, with the Python ``__new__`` behind it."""
    new = vars(ToolCall)["__new__"]
    assert isinstance(new, canon.Builder)
    assert new.cls is ToolCall
    assert new.names == _names(ToolCall)
    assert new.defaults == tuple(f.default for f in dataclasses.fields(ToolCall))[1:]
    assert callable(new.fallback)
    assert new(ToolCall, "t", span_id="s") == ToolCall("t", span_id="s")
    assert isinstance(vars(_record(False))["__new__"], staticmethod)


@pytest.mark.parametrize("rebuild", [copy.copy, copy.deepcopy, pickle.dumps, dataclasses.replace])
def test_constructor_records_copy_and_replace(native: bool, rebuild: Callable[[Any], Any]) -> None:
    """Copies and ``dataclasses.replace`` rebuild through the constructor: equal records."""
    rec = _record(native)
    made = rec("a", third=[3])
    if rebuild is pickle.dumps:  # a local class does not pickle: its reduction does
        cls, args = made.__reduce__()
        again = cls(*args)
    else:
        again = rebuild(made)
    assert type(again) is rec
    assert again == made
    assert dataclasses.replace(made, second=2) == rec("a", 2, [3])


def test_constructor_subclasses_are_built_the_dataclass_way(native: bool) -> None:
    """A dataclass subclass uses its own ``__init__``; a plain one the record's fields."""
    rec = _record(native)

    @dataclasses.dataclass(frozen=True, slots=True)
    class Tagged(rec):  # type: ignore[valid-type,misc]
        tag: Any = "none"

    class Named(rec):  # type: ignore[valid-type,misc]
        __slots__ = ()

    tagged = Tagged("a", tag="x")
    assert (type(tagged), tagged.first, tagged.second, tagged.tag) == (Tagged, "a", 1, "x")
    named = Named("a", third=3)
    assert (type(named), named.first, named.third) == (Named, "a", 3)
    with pytest.raises(TypeError, match="missing 1 required positional argument"):
        Named()


def test_constructor_follows_later_changes_to_the_class(native: bool) -> None:
    """An ``__init__`` or a ``__new__`` set afterwards runs as it would on any class."""
    rec = _record(native)
    seen: list[tuple[Any, ...]] = []
    rec.__init__ = lambda self, *args, **kwargs: seen.append(args)
    assert rec("a", 2) == rec("a", 2, ABSENT)
    assert seen == [("a", 2), ("a", 2, ABSENT)]
    del rec.__init__
    assert rec("b").first == "b"
    rec.__new__ = staticmethod(lambda klass, *args, **kwargs: (klass, args, kwargs))
    assert rec(1, x=2) == (rec, (1,), {"x": 2})


def test_constructor_under_a_metaclass(native: bool) -> None:
    """A metaclass's ``__call__`` still runs: the direct call is only for ``type``'s classes."""
    calls: list[Any] = []

    class Meta(type):
        def __call__(cls, *args: Any, **kwargs: Any) -> Any:
            calls.append(args)
            return super().__call__(*args, **kwargs)

    @dataclasses.dataclass(frozen=True, slots=True)
    class Rec(metaclass=Meta):
        first: Any
        second: Any = 1

    stores_slots_directly(Rec, native=native)
    calls.clear()
    assert (Rec("a").first, Rec("a", second=3).second) == ("a", 3)
    assert calls == [("a",), ("a",)]


def test_refuses_keyword_only_fields(native: bool) -> None:
    """A keyword-only field binds otherwise than in field order: refused at decoration."""

    @dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
    class Keyed:
        value: Any

    with pytest.raises(TypeError, match="only plain fields"):
        stores_slots_directly(Keyed, native=native)


def test_compiled_constructor_keeps_exact_references(canon: ModuleType) -> None:
    """Compiled: a value given positionally, by keyword or as a default, one reference each.

    The compiled path only: on the Python path the interpreter owns the counts,
    and some versions (3.12) keep a reference in their own caches for a while.
    """
    given, default = _Marker(), _Marker()

    @dataclasses.dataclass(frozen=True, slots=True)
    class Rec:
        first: Any
        second: Any = default
        third: Any = None

    stores_slots_directly(Rec)
    twice: dict[str, Any] = {"first": given}
    counts = sys.getrefcount(given), sys.getrefcount(default)
    made = [Rec(given, third=given) for _ in range(50)] + [Rec(given) for _ in range(50)]
    assert (sys.getrefcount(given), sys.getrefcount(default)) == (counts[0] + 150, counts[1] + 100)
    failed = 0
    for _ in range(50):
        try:
            Rec(given, **twice)
        except TypeError:
            failed += 1
    assert failed == 50
    del made
    assert (sys.getrefcount(given), sys.getrefcount(default)) == counts


def test_cycle_through_a_constructor_is_collected(native: bool) -> None:
    """A record class, its constructor and the fallback closing over it are collected."""
    rec = _record(native)
    dead = weakref.ref(rec)
    assert rec(1) == rec(1, 1)
    del rec
    gc.collect()
    assert dead() is None


@pytest.mark.slow
def test_constructor_builds_survive_interleaved_collections() -> None:
    """Keyword builds holding tracked containers stay intact through collections between."""
    threshold = gc.get_threshold()
    kept = []
    try:
        gc.set_threshold(7)
        for i in range(20_000):
            kept.append(ToolCall("t", [i], result={"i": i}, span_id=str(i)))
            if i % 2_000 == 0:
                gc.collect()
    finally:
        gc.set_threshold(*threshold)
    gc.collect()
    assert [(r.arguments, r.result["i"], r.span_id) for r in kept] == [
        ([i], i, str(i)) for i in range(20_000)
    ]


# -- the compiled constructor directly ---------------------------------------------


def test_plain_builder_fills_defaults(canon: ModuleType) -> None:
    """A plain builder with defaults takes from ``required`` to all values, positionally."""
    build = canon.builder(_Plain, ("value", "other"), ("dflt",))
    assert (build(1).value, build(1).other, build(1, 2).other) == (1, "dflt", 2)
    assert "dflt" in repr(build)
    for bad in [(), (1, 2, 3)]:
        with pytest.raises(TypeError, match="from 1 to 2 positional arguments"):
            build(*bad)
    with pytest.raises(TypeError, match="positional arguments only"):
        build(1, other=2)


def test_constructor_falls_back_as_called(canon: ModuleType) -> None:
    """What it does not build goes to the fallback with the very arguments it was given."""
    seen: list[Any] = []

    def fallback(*args: Any, **kwargs: Any) -> Any:
        seen.append((args, kwargs))
        return "fell back"

    new = canon.builder(_Plain, ("value", "other"), (None,), fallback)
    assert new(_Plain, 1, other=2) == _Plain(1, 2)
    assert type(new(_Plain, 1)) is _Plain
    assert new(_Plain) == "fell back"  # missing
    assert new(_Plain, 1, 2, 3) == "fell back"  # too many
    assert new(_Plain, 1, value=2) == "fell back"  # twice
    assert new(_Plain, 1, bogus=2) == "fell back"  # unknown
    assert new(int, 1) == "fell back"  # another class
    assert new() == "fell back"  # no class at all
    assert seen == [
        ((_Plain,), {}),
        ((_Plain, 1, 2, 3), {}),
        ((_Plain, 1), {"value": 2}),
        ((_Plain, 1), {"bogus": 2}),
        ((int, 1), {}),
        ((), {}),
    ]
    assert new.fallback is fallback
    assert "fallback" in repr(new)


class _Key(str):
    """A str subclass as a keyword name: left to the fallback."""


def test_constructor_matches_keywords_by_value(canon: ModuleType) -> None:
    """A keyword name equal to a field's, but another str object, still binds; a subclass not."""
    new = canon.builder(_Plain, ("value", "other"), (None,), lambda *a, **k: "fell back")
    name = "".join(["val", "ue"])
    assert name is not "value"  # noqa: F632
    assert new(_Plain, **{name: 1}) == _Plain(1)
    assert new(_Plain, **{_Key("value"): 1}) in ("fell back", _Plain(1))


@pytest.mark.parametrize(
    ("extra", "reason"),
    [
        pytest.param([[None]], "tuple of defaults", id="defaults-not-tuple"),
        pytest.param([(1, 2, 3)], "3 defaults for 2 fields", id="too-many-defaults"),
        pytest.param([(), 5], "callable fallback", id="fallback-not-callable"),
        pytest.param([(), None, (), None], "from 2 to 5", id="too-many-arguments"),
        pytest.param([(), None, [int]], "tuple of leaf types, not list", id="leaves-not-tuple"),
        pytest.param([(), None, (int, "str")], "leaf types, not str", id="leaf-not-a-type"),
    ],
)
def test_constructor_refuses_when_made(canon: ModuleType, extra: list[Any], reason: str) -> None:
    """Bad defaults, fallback or leaves are refused when the builder is made."""
    with pytest.raises(TypeError, match=reason):
        canon.builder(_Plain, ("value", "other"), *extra)


def test_install_refuses(canon: ModuleType) -> None:
    """Only a constructor is installed, and only on a class without an ``__init__`` of its own."""
    with pytest.raises(TypeError, match="builder"):
        canon.install(len)
    with pytest.raises(TypeError, match="fallback"):
        canon.install(canon.builder(_Plain, ("value", "other")))
    with pytest.raises(TypeError, match="__init__"):
        canon.install(canon.builder(_Plain, ("value", "other"), (), lambda *a, **k: None))
    assert "__new__" not in vars(_Plain)


# -- leaves: records of leaf values untracked by the cyclic GC ---------------------


class _Int(int):
    """An int subclass: instances may hold references, so not a leaf."""


class _Shade(str, enum.Enum):
    """A str enum left out of ``leaves``."""

    DARK = "dark"


@dataclasses.dataclass(frozen=True, slots=True)
class _Leafy:
    text: Any
    number: Any
    ratio: Any
    flag: Any
    nothing: Any
    status: Any
    action: Any = Action.WARN


_LEAVES = (Status, Action)
_LEAF_VALUES = ("text", 2**70, 0.5, True, None, Status.ERROR, Action.BREAK)


def _leaf_builder(canon: ModuleType, constructor: bool, leaves: Any = _LEAVES) -> Any:
    """A compiled builder for ``_Leafy``, called with the field values either way."""
    names = _names(_Leafy)
    if not constructor:
        return canon.builder(_Leafy, names, (Action.WARN,), None, leaves)
    new = canon.builder(_Leafy, names, (Action.WARN,), lambda *a, **k: None, leaves)
    return lambda *values, **keywords: new(_Leafy, *values, **keywords)


BUILDS = [pytest.param(False, id="plain"), pytest.param(True, id="constructor")]


@pytest.mark.parametrize("constructor", BUILDS)
def test_record_of_leaves_is_untracked(canon: ModuleType, constructor: bool) -> None:
    """None, exact str, int, float, bool and members of ``leaves`` only: not GC-tracked."""
    build = _leaf_builder(canon, constructor)
    built = build(*_LEAF_VALUES)
    assert gc.is_tracked(built) is False
    assert built == _Leafy(*_LEAF_VALUES)
    assert gc.is_tracked(build(*_LEAF_VALUES[:-1])) is False  # the default is a leaf too


@pytest.mark.parametrize("constructor", BUILDS)
@pytest.mark.parametrize(
    "value",
    [
        pytest.param(_Key("text"), id="str-subclass"),
        pytest.param(("a", 1), id="tuple"),
        pytest.param([], id="list"),
        pytest.param(_Shade.DARK, id="enum-not-in-leaves"),
        pytest.param(_Int(1), id="int-subclass"),
    ],
)
def test_record_with_another_value_stays_tracked(
    canon: ModuleType, constructor: bool, value: Any
) -> None:
    """One value of another type (a subclass of a leaf type included) keeps the record tracked."""
    build = _leaf_builder(canon, constructor)
    for i in range(len(_LEAF_VALUES)):
        values = list(_LEAF_VALUES)
        values[i] = value
        assert gc.is_tracked(build(*values)) is True


@pytest.mark.parametrize("cls", CLASSES)
def test_records_stay_tracked_without_leaves(cls: type[Any], native: bool) -> None:
    """Without ``leaves`` a record is GC-tracked, whatever it holds."""
    assert gc.is_tracked(record_builder(cls, native=native)(*SAMPLES[cls])) is True


def test_python_path_ignores_leaves() -> None:
    """The Python builder takes ``leaves`` and builds the same record, still tracked."""
    values = SAMPLES[LedgerRow]
    built = record_builder(LedgerRow, native=False, leaves=_LEAVES)(*values)
    assert built == record_builder(LedgerRow, leaves=_LEAVES)(*values)
    assert gc.is_tracked(built) is True


def test_record_builder_passes_leaves(canon: ModuleType) -> None:
    """``record_builder(leaves=...)`` untracks on the compiled path; its builder shows them."""
    build = record_builder(LedgerRow, leaves=_LEAVES)
    assert build.leaves == _LEAVES  # type: ignore[attr-defined]
    assert "Action" in repr(build)
    assert gc.is_tracked(build(*SAMPLES[LedgerRow])) is False
    assert not hasattr(record_builder(LedgerRow), "leaves")
    assert repr(record_builder(LedgerRow)).endswith("'span_id'))")


@pytest.mark.parametrize("constructor", BUILDS)
def test_untracked_record_releases_its_values(canon: ModuleType, constructor: bool) -> None:
    """An untracked record holds one reference per value and drops them when it goes."""
    text = "".join(["leaf-", str(len(_LEAF_VALUES))])  # built here: no other holder
    number = 2**80 + len(_LEAF_VALUES)
    build = _leaf_builder(canon, constructor)
    before = sys.getrefcount(text), sys.getrefcount(number)
    built = [build(text, number, *_LEAF_VALUES[2:]) for _ in range(100)]
    assert not any(gc.is_tracked(r) for r in built)
    assert (sys.getrefcount(text), sys.getrefcount(number)) == (before[0] + 100, before[1] + 100)
    del built
    assert (sys.getrefcount(text), sys.getrefcount(number)) == before


@pytest.mark.slow
def test_untracked_builds_survive_interleaved_collections(canon: ModuleType) -> None:
    """Untracked and tracked builds mixed, with collections between, stay intact."""
    build = _leaf_builder(canon, False)
    threshold = gc.get_threshold()
    kept = []
    try:
        gc.set_threshold(7)
        for i in range(50_000):
            kept.append(build(str(i), i, *_LEAF_VALUES[2:]))
            kept.append(build([i], i, *_LEAF_VALUES[2:]))
            if i % 5_000 == 0:
                gc.collect()
    finally:
        gc.set_threshold(*threshold)
    gc.collect()
    assert [gc.is_tracked(r) for r in kept[:4]] == [False, True, False, True]
    assert [(r.text, r.number) for r in kept[::2]] == [(str(i), i) for i in range(50_000)]
    assert [r.text for r in kept[1::2]] == [[i] for i in range(50_000)]


def test_leaves_builder_is_collected_with_its_class(canon: ModuleType) -> None:
    """A builder with leaves, held by the class it builds, is collected with it."""

    @dataclasses.dataclass(frozen=True, slots=True)
    class Local:
        value: Any

    dead = weakref.ref(Local)
    Local.build = canon.builder(Local, ("value",), (), None, (Status,))  # type: ignore[attr-defined]
    assert gc.is_tracked(Local.build(Status.OK)) is False  # type: ignore[attr-defined]
    del Local
    gc.collect()
    assert dead() is None


def test_detector_rows_and_findings_are_untracked(canon: ModuleType) -> None:
    """The detector's ledger rows and findings are untracked, and equal to constructed ones."""
    detector = RunDetector()
    for i in range(8):
        detector.feed(ToolCall("search", {"q": "x"}, {"hits": [1]}, span_id=f"span-{i}"))
        if i % 3 == 2:
            detector.feed(ModelCall())
    report = detector.report()
    assert report.ledger
    assert report.findings
    assert [gc.is_tracked(row) for row in report.ledger] == [False] * len(report.ledger)
    assert [gc.is_tracked(f) for f in report.findings] == [False] * len(report.findings)
    built: tuple[Any, ...] = (*report.ledger, *report.findings)
    for record in built:
        fields = dataclasses.fields(record)
        assert record == type(record)(*(getattr(record, f.name) for f in fields))
