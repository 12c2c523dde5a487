"""The compiled canonicaliser (``otel_stall.core._canon``) agrees with the Python reference.

For any text, ``_canon.canonical`` either gives exactly the reference's bytes
and emptiness or hands the text back (``None``), and ``Normaliser()`` always
gives what ``Normaliser(native=False)`` gives. Property tests draw nasty JSON
text (see ``json_strategies.json_texts``); a compact list of hand-picked texts
(the cases that found disagreements, and the C code's boundaries: its stack
buffers, depth limit, number spellings, temp-root rewrites) runs through one
parametrised test; two sweeps put pieces at every offset of the 16-byte scan
and try every Unicode space. Set ``OTEL_STALL_REQUIRE_NATIVE=1`` (CI with a
compiler) to make a missing extension fail instead of skip.
"""

from __future__ import annotations

import datetime
import enum
import functools
import importlib
import json
import os
from types import ModuleType
from typing import Any

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis_profiles import PROPERTY
from json_strategies import (
    NASTY_KEYS,
    NASTY_TEXT,
    UNICODE_SPACES,
    json_texts,
    json_values,
    scalars,
)
from xxhash import xxh3_64_hexdigest

from otel_stall import Content, Normaliser, Signer, Status
from otel_stall.core.signing import NATIVE_AVAILABLE

REQUIRE_NATIVE = os.environ.get("OTEL_STALL_REQUIRE_NATIVE") == "1"

VOLATILE_SETTINGS: list[tuple[str, ...] | None] = [
    None,  # the defaults
    (),
    ("id", "token", "x:y"),
    ("Token", "ID", "k" * 63, "k" * 70),  # any case; long names
]


@pytest.fixture(scope="module")
def canon() -> ModuleType:
    """The compiled module: skipped where it is not built, unless the environment requires it."""
    try:
        return importlib.import_module("otel_stall.core._canon")
    except ImportError:  # as signing.py does: a build that does not load is not there
        if REQUIRE_NATIVE:
            raise
        pytest.skip("otel_stall.core._canon is not built")


@functools.cache
def _normalisers(
    volatile: tuple[str, ...] | None, results: bool = False
) -> tuple[Normaliser, Normaliser]:
    """The reference and the normaliser that may use the compiled pass, same settings.

    ``results``: as results are normalised (their volatile keys, run folders).
    """
    if volatile is None:
        pair = Normaliser(native=False), Normaliser()
    else:
        pair = Normaliser(volatile_keys=volatile, native=False), Normaliser(volatile_keys=volatile)
    return (pair[0].for_results(), pair[1].for_results()) if results else pair


def compiled_names(normaliser: Normaliser) -> tuple[bytes, ...]:
    """The volatile names as the compiled pass takes them: lower case, no ``_`` or ``-``."""
    squashed = {k.lower().replace("_", "").replace("-", "") for k in normaliser.volatile_keys}
    return tuple(sorted(k.encode() for k in squashed))


def assert_agrees(canon: ModuleType, text: str, volatile: tuple[str, ...] | None = None) -> None:
    """The compiled pass gives the reference's bytes, emptiness and items, or hands it back.

    Both as arguments and as results are normalised.
    """
    for results in (False, True):
        reference, native = _normalisers(volatile, results)
        expected = reference.reference_items(text)
        try:
            utf8 = text.encode()
        except UnicodeEncodeError:  # a lone surrogate: never given to the compiled pass
            utf8 = None
        if utf8 is not None:
            names, folders = compiled_names(reference), reference.run_folders
            done = canon.canonical(utf8, names, xxh3_64_hexdigest, folders)
            blob, content, items = expected
            assert done is None or done == (blob, content is Content.EMPTY, items), text
            bare = canon.canonical(utf8, names, None, folders)
            assert done is None or bare == (*done[:2], None), text
        assert native.canonical_items(text) == expected, text
        assert native.canonical(text) == expected[:2], text


# -- properties -----------------------------------------------------------------


@PROPERTY
@given(text=json_texts(), volatile=st.sampled_from(VOLATILE_SETTINGS))
def test_compiled_pass_agrees_with_the_reference(
    canon: ModuleType, text: str, volatile: tuple[str, ...] | None
) -> None:
    """Nasty JSON text, near-JSON text and any text: the compiled pass agrees or hands back."""
    assert_agrees(canon, text, volatile)


CALL_VALUES = json_values(NASTY_TEXT, NASTY_KEYS, max_leaves=12)
ITEM_NAMES = st.sampled_from(["items", "results", "hits", "documents", "Items", "a", "zz", "ts"])
LIST_RESULTS = st.one_of(
    st.lists(CALL_VALUES, max_size=5),
    st.dictionaries(ITEM_NAMES, st.one_of(st.lists(CALL_VALUES, max_size=4), CALL_VALUES)),
)
"""List results: arrays, and objects with item lists (several, or under a volatile key)."""


@PROPERTY
@given(
    result=LIST_RESULTS,
    indent=st.sampled_from([None, 1]),
    volatile=st.sampled_from([*VOLATILE_SETTINGS, ("items", "ts"), ("hits", "results")]),
)
def test_item_spans_agree_with_the_reference(
    canon: ModuleType, result: Any, indent: int | None, volatile: tuple[str, ...] | None
) -> None:
    """A list result's items, found while writing, are the reference's: whichever list wins."""
    text = json.dumps(result, indent=indent, ensure_ascii=False)
    assert_agrees(canon, text, volatile)
    assert_agrees(canon, json.dumps({"x": result, "items": [result, 1]}), volatile)


@PROPERTY
@given(
    arguments=CALL_VALUES,
    result=CALL_VALUES,
    tool=st.sampled_from(["t", "t\u00f6ol", "bad\udc00", "t" * 5000]),
    status=st.sampled_from(["ok", "error", Status.OK, Status.ERROR]),
    volatile=st.sampled_from(VOLATILE_SETTINGS),
)
def test_signer_agrees_with_the_reference(
    arguments: Any, result: Any, tool: str, status: Any, volatile: tuple[str, ...] | None
) -> None:
    """Calls as JSON text sign as the reference signs them, and again from the signer's cache."""
    reference, native = _normalisers(volatile)
    args_text = json.dumps(arguments, ensure_ascii=False)
    result_text = json.dumps(result)
    expected = Signer(reference).sign(tool, args_text, result_text, status)
    signer = Signer(native)
    assert signer.sign(tool, args_text, result_text, status) == expected
    assert signer.sign(tool, args_text, result_text, status) == expected


class Shade(enum.Enum):
    """A plain enum whose values need normalising: signed by value, as orjson writes it."""

    SPACED = " a  b "
    TEMP = "/tmp/tmpabcd1234/x"
    NESTED = {"ts": 1, "k": [" v "]}  # noqa: RUF012  (an enum value, not a class attribute)


class Count(enum.IntEnum):
    """An int enum."""

    ZERO = 0
    BIG = 2**70


WRITTEN_LEAVES = st.one_of(
    scalars(NASTY_TEXT),
    st.floats(),  # NaN and infinities: written as null
    st.sampled_from([*Shade, Count.ZERO, Status.OK]),
)
"""Leaves orjson writes: a payload of these takes the compiled pass as JSON text."""
REFUSED_LEAVES = st.one_of(
    st.integers(min_value=2**64),
    st.binary(max_size=6),
    st.sampled_from([Count.BIG, datetime.date(2024, 5, 1), b"x  y", ("a", " b ")]),
)
"""Leaves orjson refuses (or a tuple, which it writes): the reference does those payloads."""


def structured(leaves: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """Lists, dicts and tuples of ``leaves``."""
    return st.recursive(
        leaves,
        lambda inner: (
            st.lists(inner, max_size=4)
            | st.dictionaries(NASTY_KEYS, inner, max_size=4)
            | st.tuples(inner, inner)
        ),
        max_leaves=16,
    )


@PROPERTY
@given(
    written=structured(WRITTEN_LEAVES),
    refused=structured(st.one_of(WRITTEN_LEAVES, REFUSED_LEAVES)),
    keys=st.dictionaries(st.one_of(st.integers(), st.none(), st.booleans()), NASTY_TEXT),
    volatile=st.sampled_from(VOLATILE_SETTINGS),
)
def test_structured_values_agree_with_the_reference(
    written: Any, refused: Any, keys: dict[Any, str], volatile: tuple[str, ...] | None
) -> None:
    """Dicts and lists (JSONL, OTLP kvlists) with odd Python values inside: as the reference."""
    for results in (False, True):
        reference, native = _normalisers(volatile, results)
        for value in (written, [written], {"v": written}, refused, [refused], keys):
            assert native.canonical_items(value) == reference.reference_items(value)


OTHER_SETTINGS = [
    {"scrub_values": True},
    {"volatile_keys": ("*_at", "tok?n", "id")},
    {"volatile_keys": tuple(f"k{i}" for i in range(65))},
    {"volatile_keys": ("t\u00f6ken", 'a"b', "")},
]
"""Settings the compiled pass does not know: scrubbing, globs, many names, odd names."""


SETTING_WORDS = st.sampled_from(
    ["x_at", "Created_AT", "token", "tokan", "ID", "k7", "k64", "t\u00f6ken", 'a"b', "", "q"]
)
SETTING_VALUES = st.one_of(
    SETTING_WORDS,
    st.sampled_from(
        ["7e0b5a4e-1c2d-4e5f-8a9b-0c1d2e3f4a5b", "done at 2024-06-11 09:30:01+02:00", "  x  ", 0]
    ),
)
SETTING_PAYLOADS = st.recursive(
    SETTING_VALUES,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(SETTING_WORDS, inner, max_size=4),
    max_leaves=10,
)
"""Payloads with what those settings act on: the names they drop, the values they scrub."""


@PROPERTY
@given(payload=SETTING_PAYLOADS, options=st.sampled_from(OTHER_SETTINGS))
def test_settings_beyond_the_compiled_pass_agree(payload: Any, options: dict[str, Any]) -> None:
    """With scrubbing, globs, many or odd volatile names, the result is the reference's."""
    native, reference = Normaliser(**options), Normaliser(native=False, **options)
    for value in (payload, json.dumps(payload), json.dumps(payload, ensure_ascii=False)):
        assert native.canonical(value) == reference.canonical(value)


# -- sweeps ---------------------------------------------------------------------

OFFSET_PIECES = [
    *(" ", "  ", "   ", "\t", "\u00e9", "\u00a0", "\u2003", " \u00e9"),
    *("/tmp", " /tmp ", "$", '"', "\\", "\x7f", "\U0001f600", "/tmp/xyz123", "/tmp/a.b-12345x "),
]
REWRITE_PIECES = [
    *("\n", " \n", "\n ", " \n ", "\t\n", "  ", " ", '"', ' "', "/tmp/x", " /tmp", "$"),
    *(" \u00e9", "\u00e9 ", " \u00a0", "\x7f ", "\\", " \\n"),
]


def test_pieces_at_every_offset_of_the_16_byte_scan_agree(canon: ModuleType) -> None:
    """A piece at every offset of short strings, plain or needing a rewrite, ends included.

    The compiled scan reads 16 bytes at a time; it once stopped at non-ASCII
    bytes it should have stepped over.
    """
    plain = "abcdefgh" * 6
    for piece in OFFSET_PIECES:
        for length in range(1, 37):
            for at in range(length + 1):
                text = plain[:at] + piece + plain[at:length]
                assert_agrees(canon, json.dumps(text, ensure_ascii=False))
                assert_agrees(canon, json.dumps({"k": [text]}, ensure_ascii=False))
    words = "ab cd efg hijk l mnopq rs tuvw xyz " * 2
    for piece in REWRITE_PIECES:  # an escaped newline first: the rewriting scan
        for length in range(1, len(words) + 1):
            for at in range(0, length + 1, 3):
                text = "\n" + words[:at] + piece + words[at:length]
                assert_agrees(canon, json.dumps(text, ensure_ascii=False))
                assert_agrees(canon, json.dumps({"k": [text, "x\ny"]}, ensure_ascii=False))


def test_every_unicode_space_agrees(canon: ModuleType) -> None:
    """Each non-ASCII space, raw or escaped, inside or at the ends of a string."""
    for space in UNICODE_SPACES:
        for text in (f"a{space}b", f"{space}a", f"a{space}", space, f"a {space} b", f"\na{space}b"):
            assert_agrees(canon, json.dumps({"k": text}, ensure_ascii=False))
            assert_agrees(canon, json.dumps([text]))


# -- hand-picked texts ----------------------------------------------------------

LONG = 5000  # past the compiled pass's 4096-byte stack buffers


def _many(count: int, inner: Any = 1) -> dict[str, Any]:
    """An object of ``count`` members in reverse key order, volatile keys among them."""
    members: dict[str, Any] = {}
    for i in reversed(range(count)):
        members[f"k{i:03d}"] = inner
        if i % 10 == 0:
            members[f"TS{i}" if i % 20 else "Ts"] = i
    return members


NUMBER_EDGES = [
    "0",
    "-0",
    "-0.0",
    "0.0",
    "1.50",
    "2.000",
    "100.0",
    "0.0001",
    "0.00010",
    "0.00001",
    "0.0000",
    "-0.00001",
    "0.000099999999999999999999",
    "1e5",
    "1E-3",
    "1e+2",
    "1E+02",
    "0.1e1",
    "-0e0",
    "0e0",
    "1e-400",
    "-1e-400",
    "1e400",
    "-1e400",
    "1e16",
    "1e15",
    "999999999999999.9",
    "9999999999999999.0",
    "123456789012345.6",
    "1234567890123456.7",
    "123456789012345.000",
    "12345678901234.5",
    "0.123456789012345",
    "0.1234567890123456",
    "9.982628422468331",
    "813971.3273962647",
    "9179478121.290841",
    "0.1000000000000000055511151231257827",
    "1.00000000000000011102230246251565404236316680908203125",
    "1.00000000000000011102230246251565404236316680908203126",
    "9007199254740993.0",
    "9007199254740993",
    "2.2250738585072011e-308",
    "4.9406564584124654e-324",
    "1.7976931348623157e308",
    "1.7976931348623158e308",
    "99999999999999999999e-20",
    "123456789012345678",
    "-123456789012345678",
    "1234567890123456789",
    "9223372036854775807",
    "9223372036854775808",
    "-9223372036854775808",
    "-9223372036854775809",
    "18446744073709551615",
    "18446744073709551616",
    "1" + "0" * 62,
    "1." + "0" * 62,
    "0." + "0" * 70 + "1",
    "01",
    "-01",
    "00",
    "1.",
    ".5",
    "-",
    "+1",
    "1e",
    "1e+",
    "1.5e",
    "0x10",
    "--1",
    "1.2.3",
    "NaN",
    "Infinity",
    "-Infinity",
]
"""Number spellings at the compiled pass's rules: digit counts, tiny floats, 64-bit edges, junk."""

EDGE_TEXTS: dict[str, str] = {
    # not JSON, or only nearly
    "empty": "",
    "whitespace-only": "   \n\t",
    "truncated": '{"a":1',
    "truncated-string": '{"a":"b',
    "truncated-key": '{"a"',
    "trailing-comma": '{"a":1,}',
    "leading-comma": "[,1]",
    "missing-value": '{"a":}',
    "missing-colon": '{"a" 1}',
    "bare-key": "{a:1}",
    "missing-comma": "[1 2]",
    "nan": "[NaN]",
    "truncated-literal": "tru",
    "literal-then-garbage": "truex",
    "long-literal": "[nulll]",
    "trailing-garbage": '{"a":1}x',
    "two-values": '{"a":1}{"b":2}',
    "trailing-whitespace": '{"a":1} \n',
    "bom": '\ufeff{"a":1}',
    "raw-nul": '"a\x00b"',
    "raw-tab": '"a\tb"',
    "raw-del": '"a\x7fb"',
    "bad-escape": '"a\\x"',
    "short-u-escape": '"a\\u12"',
    "escaped-lone-surrogate": '"\\ud800"',
    "raw-lone-surrogate": '"\ud800"',
    "escape-at-end": '"a\\',
    # duplicate keys: the last one wins in the reference
    "duplicate": '{"a":1,"a":2}',
    "duplicate-last-empty": '{"a":1,"a":0}',
    "duplicate-apart": '{"a":1,"b":2,"a":3}',
    "volatile-in-two-cases": '{"ts":1,"TS":2,"a":3}',
    "duplicate-once-escaped": '{"a\\/b":1,"a/b":2}',
    # emptiness
    "spaces-string": '"   "',
    "escaped-whitespace": '"\\n\\t \\r\\f"',
    "nested-empties": '{"rows":[{}, [], "", " ", 0, 0.0, -0.0, false, null]}',
    "empty-once-dropped": '{"rows":[], "ts": "2024"}',
    "only-volatile": '[{"nonce": 7}]',
    # whitespace and escapes next to each other
    "crlf": '{\r\n"b":1,\r\n"a":2\r\n}',
    "space-before-escaped-quote": '" a\\"b "',
    "escaped-quotes-around-spaces": '"\\"  \\""',
    "escaped-backslash": '"a\\\\b"',
    "u-escape": '"\\u0041"',
    "escaped-nbsp": '"a\\u00a0b"',
    "zero-width-space-stays": '"a\u200bb"',
    "mongolian-vowel-separator-stays": '"a\u180eb"',
    # keys: escapes, ones that lower-case to a volatile name, code point order
    "key-escaped-quote": '{"a\\"b":1}',
    "key-escaped-volatile": '{"t\\u0073":1}',
    "key-spaces-kept": '{" ts":1,"ts ":2}',
    "kelvin-key": '{"to\u212aen":1,"q":2}',
    "dotted-capital-i-key": '{"\u0130d":1}',
    "empty-key": '{"":1,"a":2}',
    "key-code-point-order": '{"\u00e9":1,"e":2,"\U0001f600":3,"\uffff":4}',
    "prefix-keys": '{"ab":1,"a":2,"aa":3,"b":4,"A":5}',
    "temp-key-stays": '{"/tmp/x":1}',
    "nested-sort": '{"b":{"d":1,"c":{"f":1,"e":2}},"a":[{"z":1,"y":2}]}',
    # temp roots and temp names: the compiled rewrite against the reference's regexes
    "temp-twice": '"/tmp/tmpabcd1234/a/tmp/b"',
    "temp-after-escape": '"/tmp/x\\n/tmp/y"',
    "word-then-temp": '"x\\/tmp"',
    "escaped-slash-temp": '"\\/tmp\\/x"',
    "pytest-name-without-slash-t": '"$TMPDIR/pytest-of-x/pytest-1"',
    "pytest-name-with-slash-t": '"$TMPDIR/pytest-of-x/pytest-1/tests"',
    "root-then-tab": '"/var/folders/ab/cd/T\\t"',
    "temp-then-non-ascii": '"/tmp/\u00e9"',
    "long-s-in-folders": '"/var/folder\u017f/ab/cd/T/x"',
    "dotted-i-then-temp": '"/\u0130/tmp/x"',
    "upper-temp": '"/TMP/TMPABCD1234"',
    "upper-name": '"/tmp/tmpABCD1234/x"',
    "name-brackets": '"$TMPDIR/tmp[bcd]1234/tmp"',
    "name-too-long": '"/tmp/tmpabcd12345/x"',
    "name-too-short": '"/tmp/tmpabcd123/x"',
    "pytest-no-user": '"/tmp/pytest-of-/pytest-1/x"',
    "pytest-no-number": '"/tmp/pytest-of-x/pytest-/x"',
    "windows-temp": '"C:\\\\Users\\\\bob\\\\AppData\\\\Local\\\\Temp\\\\x"',
    "macos-private": '"/private/var/folders/a/b/T/tmp_bcd_123/"',
    # temp rewrites that enable more: the reference stops after four passes
    **{
        f"passes-{name}{repeats}": json.dumps(prefix + "/tmp/tmpabcd1234" * repeats + "/tmp")
        for prefix, name in (("$TMPDIR/tmpabcd1234", "named-"), ("", ""))
        for repeats in (3, 4, 5)
    },
    # numbers: the compiled spelling rules against orjson's
    **{f"number-{i}:{n[:24]}": n for i, n in enumerate(NUMBER_EDGES)},
    **{f"nested-number:{n}": f'{{"n":{n},"a":[{n}, 0]}}' for n in ("-0", "1.50", "1e16")},
    # more of the hand-written texts of the first differential tests
    "truncated-array": "[1,2",
    "trailing-comma-array": "[1,]",
    "single-quotes": "{'a':1}",
    "leading-zero": "[01]",
    "bare-word": "hello",
    "python-true": "True",
    "duplicate-first-empty": '{"a":0,"a":1}',
    "duplicate-volatile": '{"ts":1,"ts":2}',
    "duplicate-equal-values": '{"a":{"x":1},"a":{"x":1}}',
    "empty-object": "{}",
    "empty-array": "[]",
    "empty-string": '""',
    "empty-only-object": '{"items": [], "count": 0}',
    "empty-after-volatile-drop": '{"rows":[], "ts": "2024-01-01"}',
    "not-empty": '{"a":[0, 0.0, "x"]}',
    "true-not-empty": "[true]",
    "false": "false",
    "null": "null",
    "spaced": '{ "b" : 1 , "a" : [ 1 , 2 ] }',
    "string-spaces": '"  a  b  "',
    "space-then-escaped-quote": '"a \\"b"',
    "escaped-slash": '"a\\/b"',
    "raw-nbsp": '"a\u00a0b"',
    "raw-unicode-spaces": '"\u3000a\u2029"',
    "key-escaped-newline": '{"a\\nb":1}',
    "key-folds-to-ascii": '{"\u0130d":1,"to\u212aen":2}',
    "temp-key-and-value": '{"/tmp/x":"/tmp/x"}',
    "temp-name-upper-then-root": '"$TMPDIR/tmpABCD1234/tmp"',
    # temp paths the first property tests pinned as examples
    **{
        f"pinned-path:{path[:24]}": json.dumps({"p": path})
        for path in (
            "/tmp/tmpabcd1234/x",
            "$TMPDIR/pytest-of-x/pytest-12/tests",
            "C:/Users/bob/AppData/Local/Temp/tmpabcd1234",
            "/private/var/folders/a/b/T/tmp_bcd_123/",
            "x/tmp /tmp",
        )
    },
    # payloads the compiled signer once handed back beside clean ones
    "surrogate-in-json": '{"q": "a\udfffb"}',
    "surrogate-in-array": '["\ud83d"]',
    "surrogate-string": '"\udc80"',
    "big-int-argument": '{"n": 123456789012345678901}',
    "u-escape-and-space": '"\\u0041 b"',
    "not-json": "not json",
    # the compiled pass's stack buffers, member stack and depth limit
    "long-plain": json.dumps("a" * LONG),
    "long-doubled-spaces": json.dumps("ab  " * LONG),
    "long-with-ends": json.dumps(" a" * LONG + " "),
    "long-escapes": json.dumps("a\n" * LONG),
    "long-temp-roots": json.dumps("/tmp/x " * LONG),
    "temp-after-buffer": json.dumps("x" * LONG + " /tmp/tmpabcd1234/y"),
    "at-buffer-edge": json.dumps(["a" * 4094]),
    "collapse-at-buffer-edge": json.dumps(["a" * 4093 + "  b"]),
    "long-sorted-members": json.dumps({"b": "b" * LONG, "a": "a " * LONG}),
    "sorted-twice": json.dumps([{"z": "z" * 3000, "y": "y  " * 1000}, {"b": "/tmp/" * 900}]),
    "long-dropped-member": json.dumps({"ts": "t" * LONG, "a": "a"}),
    "members-64": json.dumps(_many(64)),
    "members-65": json.dumps(_many(65)),
    "members-70x70": json.dumps(_many(70, _many(70))),
    "members-65-empty": json.dumps({"a": _many(65, {"z": 0, "y": []}), "b": ""}),
    **{f"depth-{d}": "[" * d + '{"b":1,"a":"  x"}' + "]" * d for d in (127, 128, 129)},
    **{f"mixed-depth-{d}": '{"b":[0,{"a":' * d + "1" + "}]}" * d for d in (127, 128)},
    **{f"empty-depth-{d}": "[" * d + "]" * d for d in (254, 255, 300)},
}


@pytest.mark.parametrize("text", EDGE_TEXTS.values(), ids=EDGE_TEXTS.keys())
def test_hand_picked_texts_agree(canon: ModuleType, text: str) -> None:
    """Hand-picked texts, bare and inside an array, agree with the reference in every setting."""
    for volatile in VOLATILE_SETTINGS:
        assert_agrees(canon, text, volatile)
        assert_agrees(canon, f"[{text}]", volatile)


# -- the compiled module --------------------------------------------------------


def test_extension_is_built_where_required() -> None:
    """With OTEL_STALL_REQUIRE_NATIVE=1 the compiled path must be there: no silent fallback."""
    if not REQUIRE_NATIVE:
        pytest.skip("OTEL_STALL_REQUIRE_NATIVE is not set")
    assert NATIVE_AVAILABLE


CLEAN_PAYLOADS = [
    {"b": 1, "a": "x y"},
    {"q": "  padded  text ", "ts": 123, "Trace_ID": "t"},
    {"z": {"y": [1, 2.5, -3, 1.5, True, None]}, "a": []},
    {"n": 0.0001, "m": 123456789012345.6, "k": -0.0},
    {
        "p": "/tmp/tmpabcd1234/out.txt",
        "q": "src/token.py",
        "w": "C:/Users/bob/AppData/Local/Temp/x",
    },
    {"s": "x" * LONG},
    _many(70),
    {"items": [], "count": 0},
    {"z": 1, "items": [{"b": 1, "a": "x"}, 3], "hits": [2]},
    [{"id": 2, "t": "/tmp/x"}, {"id": 1}],
]


def test_compiled_pass_does_ordinary_payloads(canon: ModuleType) -> None:
    """Ordinary payloads are done in C, never handed back: the differential tests are not idle."""
    reference = Normaliser(native=False)
    names = compiled_names(reference)
    for value in CLEAN_PAYLOADS:
        for text in (orjson.dumps(value).decode(), json.dumps(value, indent=2)):
            blob, content, items = reference.reference_items(text)
            done = canon.canonical(text.encode(), names, xxh3_64_hexdigest, False)
            assert done == (blob, content is Content.EMPTY, items)


def test_compiled_pass_drops_volatile_names_in_any_case(canon: ModuleType) -> None:
    """The compiled pass drops a volatile key whatever its case, at any depth."""
    text = '{"TS":1,"a":{"Ts":2,"b":[{"tS":3}],"c":"x"}}'
    done = canon.canonical(text.encode(), (b"ts",), None, False)
    assert done == (b'{"a":{"b":[{}],"c":"x"}}', False, None)
