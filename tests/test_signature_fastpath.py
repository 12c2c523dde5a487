"""The fast path (C serialisation and byte scans) gives exactly what the Python walk gives."""

from __future__ import annotations

import json
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from json_strategies import json_values

from otel_stall.core.signing import Content, Normaliser, Signer, is_empty

SORT = orjson.OPT_SORT_KEYS | orjson.OPT_NON_STR_KEYS
NORMALISERS = [
    pytest.param(Normaliser(), id="default"),
    pytest.param(Normaliser(scrub_values=True), id="scrub"),
    pytest.param(Normaliser(volatile_keys=("ts", "token", "x:y", "a b", "id")), id="names"),
    pytest.param(Normaliser(volatile_keys=("*_at", "tok?n", "id")), id="globs"),
    pytest.param(Normaliser(volatile_keys=()), id="none"),
]

# Pieces of text aimed at the byte scans: whitespace next to quotes, escapes,
# the end of every temp root, temp names, keys in any case, characters that
# lower-case to ASCII (Kelvin sign, dotted I) or fold to it in a regex (long s),
# and JSON syntax inside strings.
PIECES = st.sampled_from(
    [
        " ",
        "  ",
        "\t",
        "\n",
        "\x0b",
        "\x1c",
        "\x08",
        "\x01",
        "\u00a0",
        "\u2003",
        "\\",
        '"',
        ":",
        ",",
        "{",
        "[",
        "/",
        "/t",
        "/T",
        "/tmp",
        "/TMP/",
        "/temp",
        "/tmp/tmpab12cd34/",
        "/tmp/pytest-of-bob/pytest-3/",
        "$TMPDIR/",
        "$TMPDIR/tmpabcd1234",
        "$TMPDIR/pytest-of-x/pytest-1",
        "/var/folders/ab/cd/T",
        "/var/folder\u017f/ab/cd/T/",
        "C:/Users/bob/AppData/Local/Temp/",
        "src/token/x.py",
        "ts",
        "TS",
        "to\u212aen",
        "\u0130d",
        "x_at",
        "a",
        "0",
    ]
)
TEXT = st.lists(PIECES, max_size=5).map("".join)
KEYS = st.one_of(
    TEXT,
    st.sampled_from(["ts", "Ts", "token", "TOKEN", "id", "ID", "a b", "x:y", "x_AT", "ts "]),
)
JSON = json_values(TEXT, KEYS, max_leaves=20)
PROPERTY = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def walked(normaliser: Normaliser, value: Any) -> tuple[bytes, Content]:
    """What the Python walk alone makes of ``value``."""
    done = normaliser.normalise(value)
    return orjson.dumps(done, option=SORT), Content.EMPTY if is_empty(done) else Content.PRESENT


@pytest.mark.slow
@pytest.mark.parametrize("normaliser", NORMALISERS)
@PROPERTY
@given(value=JSON)
def test_fast_path_equals_the_walk(normaliser: Normaliser, value: Any) -> None:
    """Canonical bytes and content of a value and of its JSON text equal the walk's."""
    expected = walked(normaliser, value)
    if not isinstance(value, str):  # a str is read as JSON text first, by design
        assert normaliser.canonical(value) == expected
    assert normaliser.canonical(json.dumps(value)) == expected
    assert normaliser.canonical(json.dumps(value, ensure_ascii=False).encode()) == expected


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        pytest.param(
            {"a": "$TMPDIR/pytest-of-x/pytest-1/tests"},
            {"a": "$TMPDIR/*/tests"},
            id="temp-name-without-tmp",
        ),
        pytest.param(
            {"a": "/var/folder\u017f/ab/cd/T/x"}, {"a": "$TMPDIR/x"}, id="long-s-in-folders"
        ),
        pytest.param({"a": "/var/folders/ab/cd/T\t"}, {"a": "$TMPDIR"}, id="root-then-tab"),
    ],
)
def test_temp_dirs_the_old_byte_hints_missed(value: Any, expected: Any) -> None:
    """Temp dirs that only the walk used to find are canonical on the fast path too."""
    normaliser = Normaliser()
    blob, _ = normaliser.canonical(value)
    assert blob == orjson.dumps(expected)
    assert blob == normaliser.canonical(json.dumps(value))[0]


def test_key_that_lowercases_to_a_volatile_name_is_dropped() -> None:
    """A key with a Kelvin sign lower-cases to an ASCII volatile name and is dropped."""
    normaliser = Normaliser(volatile_keys=("token",))
    assert normaliser.canonical({"to\u212aen": 1, "q": 2})[0] == b'{"q":2}'


@pytest.mark.parametrize(
    "text",
    [
        pytest.param("src/token/x.py", id="slash-t-word"),
        pytest.param("/home/ana/tmpfile", id="tmp-prefix"),
        pytest.param("see http://host/tmp/x", id="url"),
        pytest.param("a/T b", id="slash-t-then-space"),
    ],
)
def test_paths_that_are_not_temp_dirs_stay(text: str) -> None:
    """Slashes followed by a t that ends no temp root are left as they are, both paths."""
    normaliser = Normaliser()
    assert normaliser.normalise_text(text) == text
    assert normaliser.canonical({"p": text})[0] == orjson.dumps({"p": text})


@pytest.mark.parametrize(
    "text",
    [
        pytest.param("caf\udce9", id="lone-surrogate"),
        pytest.param('{"q": "caf\u00e9"}', id="non-ascii"),
    ],
)
def test_signer_cache_takes_any_text(text: str) -> None:
    """Text that UTF-8 cannot encode strictly still signs, and signs the same twice."""
    signer = Signer()
    first = signer.sign("t", text, text, "ok")
    assert signer.sign("t", text, text, "ok") == first
    assert Signer().sign("t", text, text, "ok") == first
