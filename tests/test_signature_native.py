"""The compiled canonicaliser (``otel_stall.core._canon``) gives exactly what the Python path gives.

Every test compares ``Normaliser()`` (the C path where it is built) with
``Normaliser(native=False)`` on the same text. The inputs aim at the C code:
whitespace next to quotes and escapes, temp roots it rewrites by hand, number
spellings, invalid JSON it must not accept, its stack buffers and depth limit.
Set ``OTEL_STALL_REQUIRE_NATIVE=1`` (CI with a compiler) to make a missing
extension fail instead of skip.
"""

from __future__ import annotations

import enum
import gc
import importlib
import json
import os
from types import ModuleType
from typing import Any

import orjson
import pytest
import xxhash
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from json_strategies import json_values

from otel_stall.core.records import Status
from otel_stall.core.signing import (
    CACHE_ENTRIES,
    DEFAULT_VOLATILE_KEYS,
    NATIVE_AVAILABLE,
    Content,
    Normaliser,
    Signer,
)

REQUIRE_NATIVE = os.environ.get("OTEL_STALL_REQUIRE_NATIVE") == "1"

VOLATILE_SETTINGS = [
    pytest.param(None, id="default"),
    pytest.param((), id="none"),
    pytest.param(("id", "token", "x:y"), id="names"),
    pytest.param(("Token", "ID", "k" * 63, "k" * 70), id="cased-and-long"),
]

# Text aimed at the C scans: whitespace at a string's ends and doubled, escapes
# JSON writes (\n \t \" \\ \b), slashes, every temp root and temp name and what
# must stop them (a word character, "." or "$" just before), non-ASCII letters,
# non-ASCII spaces, and the characters that lower-case or case-fold to ASCII.
PIECES = st.sampled_from(
    [
        " ",
        "  ",
        "\n",
        "\t",
        "\r",
        "\f",
        "\b",
        "\x1c",
        '"',
        "\\",
        "/",
        "/t",
        "/T",
        "/tmp",
        "/tmp/",
        "/TMP/x",
        "/Temp",
        "/var/tmp",
        "/var/folders/ab/cd/T/",
        "/private/var/folders/a/b/T",
        "C:/Users/bob/AppData/Local/Temp/",
        "$TMPDIR/",
        "tmpabcd1234",
        "pytest-of-x/pytest-12",
        "./tmp",
        "_/tmp",
        "$/tmp",
        "a",
        "x y",
        "\u00e9",
        "\u00df",
        "\u00a0",
        "\u2003",
        "\u0130",
        "\u212a",
        "\u017f",
    ]
)
TEXT = st.lists(PIECES, max_size=6).map("".join)
KEYS = st.one_of(
    TEXT,
    st.sampled_from(
        [
            "ts",
            "TS",
            "Ts",
            "timestamp",
            "Request_ID",
            "trace_id",
            "SPAN_ID",
            "nonce",
            "id",
            "ID",
            "token",
            "Token",
            "x:y",
            "X:Y",
            "a",
            "b",
            "ts ",
            "to\u212aen",
            "k" * 63,
            "K" * 63,
            "k" * 64,
            "k" * 70,
        ]
    ),
)
JSON = json_values(TEXT, KEYS, max_leaves=20)

# Pieces of temp roots and temp names, shuffled: the C rewrites these itself,
# so near misses (a segment short, a wrong case, a letter before) matter most.
PATH_PIECES = st.sampled_from(
    [
        "/",
        "//",
        "/tmp",
        "/TMP",
        "/Tmp",
        "tmp",
        "/var",
        "/private",
        "/var/folders/",
        "ab",
        "/T",
        "/t",
        "T",
        "/Temp",
        "/temp",
        "C:",
        "c:",
        "1:",
        "/Users/",
        "/users/",
        "bob",
        "/AppData/Local/Temp",
        "/appdata/local/TEMP",
        "/AppData",
        "/Local",
        "$TMPDIR",
        "$TMPDIR/",
        "$tmpdir/",
        "tmpabcd1234",
        "tmpABCD1234",
        "tmp_bcd_123",
        "tmpabcd123",
        "pytest-of-",
        "pytest-of-x",
        "/pytest-",
        "12",
        "x",
        ".",
        "_",
        "$",
        "-",
        " ",
        "  ",
        ":",
        '"',
        "\u00e9",
    ]
)
PATHS = st.lists(PATH_PIECES, max_size=10).map("".join)

PROPERTY = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def normalisers(volatile: tuple[str, ...] | None) -> tuple[Normaliser, Normaliser]:
    """The pure-Python normaliser and the one that may use the C path, same settings."""
    if volatile is None:
        return Normaliser(native=False), Normaliser()
    return Normaliser(volatile_keys=volatile, native=False), Normaliser(volatile_keys=volatile)


def assert_agree(volatile: tuple[str, ...] | None, text: str) -> None:
    """Both paths give the same (bytes, content) for ``text``, through both entry points."""
    python, native = normalisers(volatile)
    expected = python.canonical(text)
    assert native.canonical(text) == expected, text
    assert native.canonical_text(text, text.encode()) == expected, text


def serialised(value: Any) -> list[str]:
    """The JSON texts of ``value``: compact, pretty, non-ASCII kept or escaped, ``/`` escaped."""
    compact = orjson.dumps(value).decode()
    return [
        compact,
        compact.replace("/", "\\/"),
        json.dumps(value, indent=1),
        json.dumps(value, ensure_ascii=False),
        json.dumps(value),
    ]


@pytest.fixture(scope="module")
def canon() -> ModuleType:
    """The compiled module: skipped where it is not built, unless the environment requires it."""
    try:
        return importlib.import_module("otel_stall.core._canon")
    except (
        ImportError
    ):  # as otel_stall.core.signing catches: a build that does not load is not there
        if REQUIRE_NATIVE:
            raise
        pytest.skip("otel_stall.core._canon is not built")


# -- random values -------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("volatile", VOLATILE_SETTINGS)
@PROPERTY
@given(value=JSON)
def test_random_json_texts_agree(volatile: tuple[str, ...] | None, value: Any) -> None:
    """Random JSON values, serialised five ways, canonicalise the same on both paths."""
    for text in serialised(value):
        assert_agree(volatile, text)


@pytest.mark.parametrize("volatile", VOLATILE_SETTINGS)
@PROPERTY
@given(path=PATHS, where=st.sampled_from(["{}", "[{}]", '{{"p":{}}}', '{{"ts":1,"p":[{}]}}']))
@example(path="/tmp/tmpabcd1234/x", where="{}")
@example(path="$TMPDIR/pytest-of-x/pytest-12/tests", where="{}")
@example(path="C:/Users/bob/AppData/Local/Temp/tmpabcd1234", where="{}")
@example(path="/private/var/folders/a/b/T/tmp_bcd_123/", where="{}")
@example(path="x/tmp /tmp", where="{}")
def test_temp_paths_agree(volatile: tuple[str, ...] | None, path: str, where: str) -> None:
    """Strings built from temp-root pieces, near misses included, rewrite the same."""
    for text in serialised(path):
        assert_agree(volatile, where.format(text))


@PROPERTY
@given(
    value=JSON,
    data=st.data(),
    op=st.sampled_from(["insert", "delete", "replace"]),
    char=st.sampled_from([*'{}[],:" \\/ntuef0-.eE+19\n\t', "\x00", "\u00e9", "\u00a0"]),
)
def test_mutated_json_texts_agree(value: Any, data: st.DataObject, op: str, char: str) -> None:
    """Valid JSON with one character inserted, deleted or replaced: often not JSON any more."""
    text = orjson.dumps(value).decode()
    at = data.draw(st.integers(min_value=0, max_value=len(text)), label="at")
    if op == "insert":
        text = text[:at] + char + text[at:]
    elif op == "delete":
        text = text[:at] + text[at + 1 :]
    else:
        text = text[:at] + char + text[at + 1 :]
    assert_agree(None, text)


# -- numbers -------------------------------------------------------------------

NUMBER_TEXTS = [
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


@pytest.mark.parametrize("where", ["{}", "[{}]", '{{"n":{},"a":[{}, 0]}}', " {} "])
@pytest.mark.parametrize("number", NUMBER_TEXTS)
def test_number_spellings_agree(number: str, where: str) -> None:
    """Hand-written number texts, alone and inside containers, give the same bytes and content."""
    assert_agree(None, where.format(number, number))


@settings(max_examples=400, deadline=None)
@given(number=st.floats(allow_nan=False, allow_infinity=False))
def test_random_floats_agree(number: float) -> None:
    """Every finite double, spelled by repr, orjson, %f and to 15-17 digits, agrees."""
    spellings = {f"{number:.{digits}g}" for digits in (15, 16, 17)}
    for text in {repr(number), orjson.dumps(number).decode(), f"{number:f}", *spellings}:
        assert_agree(None, text)
        assert_agree(None, f'{{"n":{text},"m":[{text}]}}')


@settings(max_examples=300, deadline=None)
@given(
    number=st.one_of(
        st.integers(min_value=-(2**65), max_value=2**65),
        st.integers(min_value=2**63 - 1000, max_value=2**63 + 1000),
        st.integers(min_value=2**64 - 1000, max_value=2**64 + 1000),
        st.integers(min_value=-(2**63) - 1000, max_value=-(2**63) + 1000),
        st.integers(min_value=10**17 - 10, max_value=10**18 + 10),
    )
)
def test_random_integers_agree(number: int) -> None:
    """Integers in and around the int64/uint64 edges give the same bytes on both paths."""
    assert_agree(None, str(number))
    assert_agree(None, f'[{number},{{"k":{number}}}]')


@settings(max_examples=400, deadline=None)
@given(text=st.text(alphabet="0123456789.-+eE", min_size=1, max_size=14))
def test_number_like_texts_agree(text: str) -> None:
    """Random strings of number characters, valid JSON or not, give the same bytes."""
    assert_agree(None, text)
    assert_agree(None, "[" + text + "]")


# -- hand-written texts --------------------------------------------------------

EDGE_TEXTS = [
    pytest.param("", id="empty"),
    pytest.param("   \n\t", id="whitespace-only"),
    pytest.param('{"a":1', id="truncated-object"),
    pytest.param('{"a":"b', id="truncated-string"),
    pytest.param('{"a"', id="truncated-key"),
    pytest.param("[1,2", id="truncated-array"),
    pytest.param('{"a":1,}', id="trailing-comma-object"),
    pytest.param("[1,]", id="trailing-comma-array"),
    pytest.param("[,1]", id="leading-comma"),
    pytest.param('{"a":}', id="missing-value"),
    pytest.param('{"a" 1}', id="missing-colon"),
    pytest.param("{a:1}", id="bare-key"),
    pytest.param("{'a':1}", id="single-quotes"),
    pytest.param("[1 2]", id="missing-comma"),
    pytest.param("[01]", id="leading-zero"),
    pytest.param("[NaN]", id="nan"),
    pytest.param("hello", id="bare-word"),
    pytest.param("tru", id="truncated-literal"),
    pytest.param("truex", id="literal-then-garbage"),
    pytest.param("[nulll]", id="long-literal"),
    pytest.param("True", id="python-true"),
    pytest.param('{"a":1}x', id="trailing-garbage"),
    pytest.param('{"a":1}{"b":2}', id="two-values"),
    pytest.param('{"a":1} \n', id="trailing-whitespace"),
    pytest.param('\ufeff{"a":1}', id="bom"),
    pytest.param('"a\x00b"', id="raw-nul"),
    pytest.param('"a\tb"', id="raw-tab"),
    pytest.param('"a\x7fb"', id="raw-del"),
    pytest.param('"a\\x"', id="bad-escape"),
    pytest.param('"a\\u12"', id="short-u-escape"),
    pytest.param('"\\ud800"', id="lone-surrogate-escape"),
    pytest.param('"a\\', id="escape-at-end"),
    pytest.param('{"a":1,"a":2}', id="duplicate-key"),
    pytest.param('{"a":1,"a":0}', id="duplicate-key-last-empty"),
    pytest.param('{"a":0,"a":1}', id="duplicate-key-first-empty"),
    pytest.param('{"a":1,"b":2,"a":3}', id="duplicate-key-apart"),
    pytest.param('{"ts":1,"TS":2,"a":3}', id="volatile-in-two-cases"),
    pytest.param('{"ts":1,"ts":2}', id="duplicate-volatile"),
    pytest.param('{"a":{"x":1},"a":{"x":1}}', id="duplicate-equal-values"),
    pytest.param("{}", id="empty-object"),
    pytest.param("[]", id="empty-array"),
    pytest.param('""', id="empty-string"),
    pytest.param('"   "', id="spaces-string"),
    pytest.param('"\\n\\t \\r\\f"', id="escaped-whitespace-string"),
    pytest.param('{"items": [], "count": 0}', id="empty-only-object"),
    pytest.param('{"rows":[{}, [], "", " ", 0, 0.0, -0.0, false, null]}', id="nested-empties"),
    pytest.param('{"rows":[], "ts": "2024-01-01"}', id="empty-after-volatile-drop"),
    pytest.param('[{"nonce": 7}]', id="only-volatile"),
    pytest.param('{"a":[0, 0.0, "x"]}', id="not-empty"),
    pytest.param("[true]", id="true-not-empty"),
    pytest.param("false", id="false"),
    pytest.param("null", id="null"),
    pytest.param('{ "b" : 1 , "a" : [ 1 , 2 ] }', id="spaced"),
    pytest.param('{\r\n"b":1,\r\n"a":2\r\n}', id="crlf"),
    pytest.param('"  a  b  "', id="string-spaces"),
    pytest.param('" a\\"b "', id="space-before-escaped-quote"),
    pytest.param('"a \\"b"', id="space-then-escaped-quote"),
    pytest.param('"\\"  \\""', id="escaped-quotes-around-spaces"),
    pytest.param('"a\\/b"', id="escaped-slash"),
    pytest.param('"\\/tmp\\/x"', id="escaped-slash-temp"),
    pytest.param('"a\\\\b"', id="escaped-backslash"),
    pytest.param('"C:\\\\Users\\\\bob\\\\AppData\\\\Local\\\\Temp\\\\x"', id="windows-temp"),
    pytest.param('"\\u0041"', id="u-escape"),
    pytest.param('"a\\u00a0b"', id="escaped-nbsp"),
    pytest.param('"a\u00a0b"', id="raw-nbsp"),
    pytest.param('"\u3000a\u2029"', id="raw-unicode-spaces"),
    pytest.param('"a\u200bb"', id="zero-width-space-stays"),
    pytest.param('"a\u180eb"', id="mongolian-separator-stays"),
    pytest.param('{"a\\"b":1}', id="key-escaped-quote"),
    pytest.param('{"a\\nb":1}', id="key-escaped-newline"),
    pytest.param('{"t\\u0073":1}', id="key-escaped-volatile"),
    pytest.param('{"a\\/b":1,"a/b":2}', id="key-escaped-slash-duplicate"),
    pytest.param('{" ts":1,"ts ":2}', id="key-spaces-kept"),
    pytest.param('{"\u0130d":1,"to\u212aen":2}', id="key-folds-to-ascii"),
    pytest.param('{"\u00e9":1,"e":2,"\U0001f600":3,"\uffff":4}', id="key-code-point-order"),
    pytest.param('{"":1,"a":2}', id="empty-key"),
    pytest.param('{"/tmp/x":"/tmp/x"}', id="temp-key-stays"),
    pytest.param('{"b":{"d":1,"c":{"f":1,"e":2}},"a":[{"z":1,"y":2}]}', id="nested-sort"),
    pytest.param('{"ab":1,"a":2,"aa":3,"b":4,"A":5}', id="prefix-keys"),
    pytest.param('"/tmp/tmpabcd1234/a/tmp/b"', id="temp-twice"),
    pytest.param('"/tmp/x\\n/tmp/y"', id="temp-after-escape"),
    pytest.param('"x\\/tmp"', id="word-then-temp"),
    pytest.param('"$TMPDIR/pytest-of-x/pytest-1"', id="temp-name-without-t"),
    pytest.param('"$TMPDIR/pytest-of-x/pytest-1/tests"', id="temp-name-with-t"),
    pytest.param('"/var/folders/ab/cd/T\\t"', id="root-then-tab"),
    pytest.param('"/var/folder\u017f/ab/cd/T/x"', id="long-s-folders"),
    pytest.param('"/\u0130/tmp/x"', id="non-ascii-with-temp"),
    pytest.param('"/tmp/\u00e9"', id="temp-then-non-ascii"),
    pytest.param('"/TMP/TMPABCD1234"', id="upper-temp-name"),
    pytest.param('"/tmp/tmpABCD1234/x"', id="temp-name-upper-letters"),
    pytest.param('"$TMPDIR/tmpABCD1234/tmp"', id="temp-name-upper-then-root"),
    pytest.param('"$TMPDIR/tmp[bcd]1234/tmp"', id="temp-name-brackets"),
    pytest.param('"/tmp/tmpabcd12345/x"', id="temp-name-too-long"),
    pytest.param('"/tmp/pytest-of-/pytest-1/x"', id="pytest-empty-user"),
    pytest.param('"/tmp/pytest-of-x/pytest-/x"', id="pytest-no-number"),
]

# Every character outside ASCII that str.split() takes for whitespace.
UNICODE_SPACES = [chr(c) for c in range(0x80, 0x110000) if chr(c).isspace()]


@pytest.mark.parametrize("space", UNICODE_SPACES, ids=[f"U+{ord(c):04X}" for c in UNICODE_SPACES])
def test_unicode_whitespace_collapses_the_same(space: str) -> None:
    """Each non-ASCII space, raw or escaped, inside or at the ends of a string, agrees."""
    for text in (f"a{space}b", f"{space}a", f"a{space}", space, f"a {space} b"):
        assert_agree(None, json.dumps({"k": text}, ensure_ascii=False))
        assert_agree(None, json.dumps([text]))


@pytest.mark.parametrize("volatile", VOLATILE_SETTINGS)
@pytest.mark.parametrize("text", EDGE_TEXTS)
def test_edge_texts_agree(volatile: tuple[str, ...] | None, text: str) -> None:
    """Invalid JSON, duplicates, empties, escapes, key order and temp paths agree."""
    assert_agree(volatile, text)


@pytest.mark.parametrize("repeats", range(7))
@pytest.mark.parametrize("prefix", ["$TMPDIR/tmpabcd1234", " ", ""])
def test_temp_rewrites_stop_after_the_same_number_of_passes(prefix: str, repeats: int) -> None:
    """Rewrites that enable further rewrites stop where Python stops (four passes)."""
    text = prefix + "/tmp/tmpabcd1234" * repeats + "/tmp"
    assert_agree(None, json.dumps(text))
    assert_agree(None, json.dumps({"b": text, "a": [text + " "]}))


# Settings the compiled path is not meant to take: whatever path they end up on,
# they must still give what the pure-Python normaliser gives.
OTHER_SETTINGS = [
    pytest.param({"scrub_values": True}, id="scrub"),
    pytest.param({"volatile_keys": ("*_at", "tok?n", "id")}, id="globs"),
    pytest.param({"volatile_keys": tuple(f"k{i}" for i in range(65))}, id="65-names"),
    pytest.param({"volatile_keys": ("t\u00f6ken", 'a"b', "")}, id="odd-names"),
]


@pytest.mark.parametrize("options", OTHER_SETTINGS)
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(value=JSON)
def test_other_settings_agree(options: dict[str, Any], value: Any) -> None:
    """Scrubbing, globs, many or odd volatile names: native=True still gives the same bytes."""
    python, native = Normaliser(native=False, **options), Normaliser(**options)
    for text in serialised(value):
        assert native.canonical(text) == python.canonical(text), text


def nested(depth: int, kind: str, inner: str) -> str:
    """``inner`` wrapped in ``depth`` arrays or objects (keys needing a sort at every level)."""
    if kind == "array":
        return "[" * depth + inner + "]" * depth
    if kind == "object":
        return '{"b":' * depth + inner + "}" * depth
    return '{"b":[0,{"a":' * depth + inner + "}]}" * depth


@pytest.mark.parametrize("inner", ["1", '"  a  "', '{"ts":1}', '"/tmp/x"', "[]", '{"b":1,"a":0}'])
@pytest.mark.parametrize("kind", ["array", "object", "mixed"])
@pytest.mark.parametrize("depth", [1, 63, 64, 127, 128, 129, 255, 300])
def test_deep_nesting_agrees(depth: int, kind: str, inner: str) -> None:
    """Nesting around the C depth limit and Python's gives the same bytes or the same UNKNOWN."""
    assert_agree(None, nested(depth, kind, inner))


LONG = 5000  # past the C code's 4096-byte stack buffers


@pytest.mark.parametrize(
    "text",
    [
        pytest.param(json.dumps("a" * LONG), id="plain"),
        pytest.param(json.dumps(" a" * LONG + " "), id="leading-and-trailing-spaces"),
        pytest.param(json.dumps("ab  " * LONG), id="double-spaces"),
        pytest.param(json.dumps("a\n" * LONG), id="escapes"),
        pytest.param(json.dumps("/tmp/x " * LONG), id="temp-roots"),
        pytest.param(json.dumps("x" * LONG + " /tmp/tmpabcd1234/y"), id="temp-after-buffer"),
        pytest.param(json.dumps({"b": "b" * LONG, "a": "a " * LONG}), id="sorted-members"),
        pytest.param(
            json.dumps([{"z": "z" * 3000, "y": "y  " * 1000}, {"b": "/tmp/" * 900, "a": 1}]),
            id="sorted-members-twice",
        ),
        pytest.param(json.dumps({"ts": "t" * LONG, "a": "a"}), id="dropped-long-member"),
        pytest.param(json.dumps(["a" * 4094]), id="at-buffer-edge"),
        pytest.param(json.dumps(["a" * 4093 + "  b"]), id="collapse-at-buffer-edge"),
    ],
)
def test_long_strings_agree(text: str) -> None:
    """Strings and objects longer than the C stack buffers give the same bytes."""
    assert_agree(None, text)


@pytest.mark.parametrize(
    "piece",
    [
        *(" ", "  ", "   ", "\t", "\u00e9", "\u00a0", "\u2003", " \u00e9"),
        *("/tmp", " /tmp ", "$", '"', "\\", "\x7f", "\U0001f600"),
    ],
)
def test_pieces_at_every_offset_across_16_byte_blocks(piece: str) -> None:
    """A piece at every offset of strings 1-36 long, ends included: block-wise scans agree."""
    for length in range(1, 37):
        for at in range(length + 1):
            text = ("abcdefgh" * 6)[:length]
            text = text[:at] + piece + text[at:]
            assert_agree(None, json.dumps(text, ensure_ascii=False))
            assert_agree(None, json.dumps({"k": [text]}, ensure_ascii=False))


@pytest.mark.parametrize(
    "piece",
    [
        *("\n", " \n", "\n ", " \n ", "\t\n", "  ", " ", '"', ' "', "/tmp/x", " /tmp", "$"),
        *(" \u00e9", "\u00e9 ", " \u00a0", "\x7f ", "\\", " \\n"),
    ],
)
def test_rewritten_strings_with_single_spaces_agree(piece: str) -> None:
    """Strings that need rewriting (an escaped newline) keep single spaces and collapse the rest."""
    words = "ab cd efg hijk l mnopq rs tuvw xyz " * 2
    for length in range(1, len(words) + 1):
        for at in range(0, length + 1, 3):
            text = words[:length]
            text = "\n" + text[:at] + piece + text[at:]
            assert_agree(None, json.dumps(text, ensure_ascii=False))
            assert_agree(None, json.dumps({"k": [text, "x\ny"]}, ensure_ascii=False))


def many(count: int, inner: Any = 1) -> dict[str, Any]:
    """An object of ``count`` members, written in reverse key order, with volatile keys in it."""
    members: dict[str, Any] = {}
    for i in reversed(range(count)):
        members[f"k{i:03d}"] = inner
        if i % 10 == 0:
            members[f"TS{i}" if i % 20 else "Ts"] = i
    return members


@pytest.mark.parametrize(
    "value",
    [
        pytest.param(many(64), id="64"),
        pytest.param(many(65), id="65"),
        pytest.param(many(200, "  x  "), id="200"),
        pytest.param(many(70, many(70)), id="nested-70x70"),
        pytest.param([many(65, [many(3)]), many(66)], id="siblings"),
        pytest.param({"a": many(65, {"z": 0, "y": []}), "b": ""}, id="empty-members"),
    ],
)
def test_many_members_agree(value: Any) -> None:
    """Objects with more members than the C member stack holds give the same bytes."""
    for text in serialised(value):
        assert_agree(None, text)
        assert_agree(("id", "token", "x:y"), text)


# -- the signer ----------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("volatile", VOLATILE_SETTINGS)
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(arguments=JSON, result=JSON, status=st.sampled_from(["ok", "error"]))
def test_signer_digests_agree(
    volatile: tuple[str, ...] | None, arguments: Any, result: Any, status: str
) -> None:
    """Signing JSON text gives the same digests with the C path and without it."""
    python, native = normalisers(volatile)
    for args_text, result_text in zip(serialised(arguments), serialised(result), strict=True):
        expected = Signer(python).sign("tool", args_text, result_text, status)
        assert Signer(native).sign("tool", args_text, result_text, status) == expected


@pytest.mark.parametrize(
    ("arguments", "result"),
    [
        pytest.param('{"q": "a  b", "ts": 1}', '{"rows": [], "count": 0}', id="empty-result"),
        pytest.param('{"p": "/tmp/tmpabcd1234/x"}', '"done"', id="temp-path"),
        pytest.param("not json", '{"a":1,"a":2}', id="not-json-and-duplicate"),
        pytest.param('{"n": 1.50}', "[" * 300 + "]" * 300, id="float-and-too-deep"),
    ],
)
def test_signer_digests_agree_by_hand(arguments: str, result: str) -> None:
    """Hand-picked arguments and results sign the same on both paths, twice (cached)."""
    expected = Signer(Normaliser(native=False)).sign("tool", arguments, result, "ok")
    signer = Signer()
    assert signer.sign("tool", arguments, result, "ok") == expected
    assert signer.sign("tool", arguments, result, "ok") == expected


# -- the compiled module's contract ---------------------------------------------


def test_extension_is_built_where_required() -> None:
    """With OTEL_STALL_REQUIRE_NATIVE=1 the compiled path must be there: no silent fallback."""
    if not REQUIRE_NATIVE:
        pytest.skip("OTEL_STALL_REQUIRE_NATIVE is not set")
    assert NATIVE_AVAILABLE


@pytest.mark.parametrize(
    "value",
    [
        pytest.param({"b": 1, "a": "x y"}, id="small"),
        pytest.param({"q": "  padded  text ", "ts": 123, "Trace_ID": "t"}, id="collapse-and-drop"),
        pytest.param({"z": {"y": [1, 2.5, -3, 1.5, True, None]}, "a": []}, id="nested"),
        pytest.param({"n": 0.0001, "m": 123456789012345.6, "k": -0.0}, id="floats"),
        pytest.param({"p": "/tmp/tmpabcd1234/out.txt", "q": "src/token.py"}, id="paths"),
        pytest.param({"s": "x" * LONG}, id="long"),
        pytest.param(many(70), id="many-members"),
        pytest.param({"items": [], "count": 0}, id="empty"),
    ],
)
def test_compiled_path_handles_clean_payloads(canon: ModuleType, value: Any) -> None:
    """Ordinary payloads are done in C (no hand-back to Python), with the Python path's bytes."""
    python = Normaliser(native=False)
    for text in (orjson.dumps(value).decode(), json.dumps(value, indent=2)):
        blob, content = python.canonical(text)
        keys = tuple(sorted(k.encode() for k in python.volatile_keys))
        assert canon.canonical(text.encode(), keys, True) == (blob, content is Content.EMPTY)


def test_compiled_path_matches_volatile_names_in_any_case(canon: ModuleType) -> None:
    """The compiled path drops a volatile key whatever its case, at any depth."""
    text = '{"TS":1,"a":{"Ts":2,"b":[{"tS":3}],"c":"x"}}'
    blob, _ = Normaliser(volatile_keys=("ts",), native=False).canonical(text)
    assert blob == b'{"a":{"b":[{}],"c":"x"}}'
    assert canon.canonical(text.encode(), (b"ts",), True) == (blob, False)


# -- the compiled signer (_canon.sign) --------------------------------------------


class OtherStatus(str, enum.Enum):
    """A str enum that is not ``Status``: the signer signs its ``str()``, not its value."""

    OK = "ok"


class TextStatus(str):
    """A str subclass that is not ``Status``."""


STATUSES = [
    pytest.param("ok", id="str-ok"),
    pytest.param("error", id="str-error"),
    pytest.param(Status.OK, id="Status.OK"),
    pytest.param(Status.ERROR, id="Status.ERROR"),
    pytest.param(Status.REFUSED, id="Status.REFUSED"),
    pytest.param(Status.OVERLOADED, id="Status.OVERLOADED"),
    pytest.param("", id="str-empty"),
    pytest.param("d\u00e9j\u00e0 vu \U0001f600", id="str-non-ascii"),
    pytest.param("x" * 300, id="str-long"),
    pytest.param(OtherStatus.OK, id="other-str-enum"),
    pytest.param(TextStatus("ok"), id="str-subclass"),
    pytest.param(7, id="int"),
]

TOOLS = [
    pytest.param("search", id="ascii"),
    pytest.param("", id="empty"),
    pytest.param("b\u00fccher_suche", id="latin-1"),
    pytest.param("\u691c\u7d22\U0001f50d", id="cjk-and-emoji"),
    pytest.param("bad\ud800tool", id="lone-surrogate"),
    pytest.param("t" * 5000, id="past-stack-buffer"),
]

CLEAN_ARGUMENTS = '{"q": "login  timeout", "ts": 17, "path": "/tmp/tmpabcd1234/x"}'
CLEAN_RESULT = '{"rows": [{"id": 1, "name": "a"}], "count": 1, "request_id": "r-1"}'


def assert_signs_agree(
    tool: str,
    arguments: str,
    result: str,
    status: Any,
    volatile: tuple[str, ...] | None = None,
) -> None:
    """Fresh signers on both paths give equal digests, and the compiled one again from its cache."""
    python, native = normalisers(volatile)
    expected = Signer(python).sign(tool, arguments, result, status)
    signer = Signer(native)
    assert signer.sign(tool, arguments, result, status) == expected, (arguments, result)
    assert signer.sign(tool, arguments, result, status) == expected, (arguments, result)


@pytest.mark.parametrize("status", STATUSES)
@pytest.mark.parametrize("tool", TOOLS)
def test_sign_agrees_for_every_tool_and_status(tool: str, status: Any) -> None:
    """Non-ASCII and lone-surrogate tools, Status members, plain and odd statuses sign the same."""
    assert_signs_agree(tool, CLEAN_ARGUMENTS, CLEAN_RESULT, status)
    assert_signs_agree(tool, '{"rows":[]}', '"  "', status)


@pytest.mark.parametrize("status", ["\ud800", "ok\udfff"])
def test_sign_rejects_a_lone_surrogate_status_on_both_paths(status: str) -> None:
    """A status that is not UTF-8 raises the same error with the compiled path and without it."""
    for normaliser in (Normaliser(native=False), Normaliser()):
        with pytest.raises(UnicodeEncodeError):
            Signer(normaliser).sign("tool", CLEAN_ARGUMENTS, CLEAN_RESULT, status)


@pytest.mark.slow
@pytest.mark.parametrize("volatile", VOLATILE_SETTINGS)
@PROPERTY
@given(
    arguments=JSON,
    result=JSON,
    tool=st.sampled_from(["t", "t\u00f6ol", "bad\udc00"]),
    status=st.sampled_from(["ok", "error", Status.OK, Status.ERROR, OtherStatus.OK]),
)
def test_sign_agrees_on_random_json_calls(
    volatile: tuple[str, ...] | None, arguments: Any, result: Any, tool: str, status: Any
) -> None:
    """Random JSON arguments and results, serialised five ways, sign the same on both paths."""
    for args_text, result_text in zip(serialised(arguments), serialised(result), strict=True):
        assert_signs_agree(tool, args_text, result_text, status, volatile)


@pytest.mark.parametrize("volatile", VOLATILE_SETTINGS)
@pytest.mark.parametrize("where", ["arguments", "result", "both"])
@pytest.mark.parametrize("text", EDGE_TEXTS)
def test_sign_agrees_on_edge_texts(volatile: tuple[str, ...] | None, text: str, where: str) -> None:
    """Each hand-written edge text as arguments, as result or as both, next to a clean payload."""
    arguments = text if where != "result" else CLEAN_ARGUMENTS
    result = text if where != "arguments" else CLEAN_RESULT
    assert_signs_agree("tool", arguments, result, Status.OK, volatile)


@PROPERTY
@given(path=PATHS, status=st.sampled_from(["ok", Status.ERROR]))
def test_sign_agrees_on_temp_paths(path: str, status: Any) -> None:
    """Temp-root pieces, near misses included, in arguments and result sign the same."""
    for text in serialised(path):
        assert_signs_agree("tool", f'{{"p":{text}}}', f"[{text}]", status)


@pytest.mark.parametrize("number", NUMBER_TEXTS)
def test_sign_agrees_on_number_spellings(number: str) -> None:
    """Hand-written number texts, valid or not, sign the same as arguments and as results."""
    assert_signs_agree("tool", f'{{"n":{number}}}', number, "ok")
    assert_signs_agree("tool", number, f"[{number}, 0]", "ok")


@pytest.mark.parametrize(
    ("arguments", "result"),
    [
        pytest.param("\ud800", CLEAN_RESULT, id="arguments-bare-surrogate"),
        pytest.param('{"q": "a\udfffb"}', CLEAN_RESULT, id="arguments-surrogate-in-json"),
        pytest.param(CLEAN_ARGUMENTS, '["\ud83d"]', id="result-surrogate"),
        pytest.param('"\udc80"', '"\udc80"', id="both-surrogate"),
        pytest.param('{"n": 123456789012345678901}', CLEAN_RESULT, id="arguments-big-int"),
        pytest.param(CLEAN_ARGUMENTS, '"\\u0041 b"', id="result-u-escape"),
        pytest.param(CLEAN_ARGUMENTS, "[" * 300 + "]" * 300, id="result-too-deep"),
        pytest.param("[" * 300 + "]" * 300, CLEAN_RESULT, id="arguments-too-deep"),
        pytest.param(CLEAN_ARGUMENTS, '{"a":1,"a":2}', id="result-duplicate-key"),
        pytest.param("not json", CLEAN_RESULT, id="arguments-not-json"),
        pytest.param("", "", id="both-empty"),
    ],
)
def test_sign_agrees_when_one_payload_is_handed_back(arguments: str, result: str) -> None:
    """A payload the compiled pass hands back, beside one it does, signs the same (and cached)."""
    assert_signs_agree("tool", arguments, result, Status.OK)


@pytest.mark.parametrize("order", ["bail-first", "clean-first"])
def test_sign_agrees_across_payloads_sharing_a_signer(order: str) -> None:
    """Calls sharing cached arguments or results, some handed back, sign the same in any order."""
    texts = [CLEAN_ARGUMENTS, CLEAN_RESULT, '"\\u0041"', "[" * 300 + "]" * 300, "\ud800", "{}"]
    if order == "bail-first":
        texts.reverse()
    python, native = Signer(Normaliser(native=False)), Signer()
    for _ in range(2):
        for arguments in texts:
            for result in texts:
                expected = python.sign("tool", arguments, result, "ok")
                assert native.sign("tool", arguments, result, "ok") == expected


def test_sign_agrees_after_the_caches_are_cleared() -> None:
    """More distinct texts than the caches hold: both paths still agree once they are cleared."""
    python, native = Signer(Normaliser(native=False)), Signer()
    calls = [
        (f'{{"q":"query {i}","ts":{i}}}', f'{{"hits":[{i % 7}],"n":{i}}}')
        for i in range(CACHE_ENTRIES + 50)
    ]
    for round_ in range(2):
        for arguments, result in calls[: 100 if round_ else None]:
            expected = python.sign("tool", arguments, result, Status.OK)
            assert native.sign("tool", arguments, result, Status.OK) == expected


def compiled_sign(
    canon: ModuleType,
    arguments: str,
    result: str,
    calls: dict[Any, Any],
    results: dict[Any, Any],
    limit: int = CACHE_ENTRIES,
    status: Any = Status.OK,
) -> Any:
    """``_canon.sign`` with the default volatile keys, as ``Signer.sign`` calls it."""
    keys = tuple(sorted(k.encode() for k in DEFAULT_VOLATILE_KEYS))
    return canon.sign(
        "tool",
        arguments,
        result,
        status,
        keys,
        True,
        calls,
        results,
        limit,
        Content.PRESENT,
        Content.EMPTY,
        Status,
    )


@pytest.mark.parametrize(
    ("arguments", "result"),
    [
        pytest.param(CLEAN_ARGUMENTS, CLEAN_RESULT, id="clean"),
        pytest.param('{"items": [], "ts": 1}', '{"rows":[],"count":0}', id="empty"),
        pytest.param(json.dumps({"s": "x" * LONG}), json.dumps(many(70)), id="long"),
        pytest.param('{"q": "caf\u00e9"}', '"\u00fcber  alles"', id="non-ascii"),
    ],
)
def test_compiled_sign_does_clean_calls_and_fills_the_caches(
    canon: ModuleType, arguments: str, result: str
) -> None:
    """Clean text/text calls are signed in C, with the Python path's digests and cache entries."""
    expected = Signer(Normaliser(native=False)).sign("tool", arguments, result, Status.OK)
    calls: dict[Any, Any] = {}
    results: dict[Any, Any] = {}
    signed = compiled_sign(canon, arguments, result, calls, results)
    assert signed == (
        expected.call_signature,
        expected.result_digest,
        expected.signature,
        expected.arguments,
        expected.result,
    )
    call_key = ("tool", xxhash.xxh3_128_digest(arguments.encode()))
    assert calls == {call_key: (expected.call_signature, expected.arguments)}
    result_key = xxhash.xxh3_128_digest(result.encode())
    assert results == {result_key: (expected.result_digest, expected.result)}


def test_compiled_sign_leaves_its_cache_entries_untracked(canon: ModuleType) -> None:
    """The entries a miss writes hold no references back, so the cyclic GC never walks them."""
    calls: dict[Any, Any] = {}
    results: dict[Any, Any] = {}
    assert compiled_sign(canon, CLEAN_ARGUMENTS, CLEAN_RESULT, calls, results) is not None
    entries = [*calls.items(), *results.items()]
    assert len(entries) == 2
    assert not any(gc.is_tracked(part) for entry in entries for part in entry)
    gc.collect()
    assert compiled_sign(canon, CLEAN_ARGUMENTS, CLEAN_RESULT, calls, results) is not None


def test_compiled_sign_returns_cached_digests_without_rehashing(canon: ModuleType) -> None:
    """A cache hit gives the cached objects back as they are: the payload is not canonicalised."""
    call_signature, result_digest = "0123456789abcdef", "fedcba9876543210"
    calls = {("tool", xxhash.xxh3_128_digest(b"not json")): (call_signature, Content.EMPTY)}
    results = {xxhash.xxh3_128_digest(b"[1,"): (result_digest, Content.PRESENT)}
    signed = compiled_sign(canon, "not json", "[1,", calls, results)
    assert signed is not None
    assert signed[0] is calls["tool", xxhash.xxh3_128_digest(b"not json")][0]
    assert signed[1:] == (
        result_digest,
        xxhash.xxh3_64_hexdigest(f"{call_signature}\x1f{result_digest}\x1fok".encode()),
        Content.EMPTY,
        Content.PRESENT,
    )


def test_compiled_sign_hands_back_a_result_cached_without_digest(canon: ModuleType) -> None:
    """A result the Python path could not fingerprint (digest None) is left to that path."""
    results = {xxhash.xxh3_128_digest(b"[]"): (None, Content.UNKNOWN)}
    assert compiled_sign(canon, "{}", "[]", {}, results) is None


@pytest.mark.parametrize(
    ("arguments", "result", "status"),
    [
        pytest.param('"\\u0041"', "{}", Status.OK, id="arguments-u-escape"),
        pytest.param("{}", '"\ud800"', Status.OK, id="result-surrogate"),
        pytest.param("{}", "{}", OtherStatus.OK, id="foreign-str-enum"),
        pytest.param("{}", "{}", 200, id="int-status"),
    ],
)
def test_compiled_sign_hands_back_what_it_does_not_know(
    canon: ModuleType, arguments: str, result: str, status: Any
) -> None:
    """Escapes, lone surrogates and statuses other than str or Status give None."""
    assert compiled_sign(canon, arguments, result, {}, {}, status=status) is None


def test_compiled_sign_clears_a_full_cache_before_adding(canon: ModuleType) -> None:
    """At the limit a cache is cleared, then the new entry added: the signer's rule."""
    calls: dict[Any, Any] = {}
    results: dict[Any, Any] = {}
    sizes = []
    for i in range(5):
        compiled_sign(canon, f"[{i}]", f'"r{i}"', calls, results, limit=2)
        sizes.append((len(calls), len(results)))
    assert sizes == [(1, 1), (2, 2), (1, 1), (2, 2), (1, 1)]
    assert ("tool", xxhash.xxh3_128_digest(b"[4]")) in calls
