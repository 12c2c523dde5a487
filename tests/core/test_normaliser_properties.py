"""Properties of the normaliser over generated JSON values, plus hostile extremes."""

from __future__ import annotations

import json
import random
from typing import Any

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis_profiles import PROPERTY
from json_strategies import json_values, scalars
from xxhash import xxh3_64_hexdigest as xxh3

from otel_stall import Content, Normaliser, Signer, Status
from otel_stall.core.signing import ITEM_KEYS

SORT = orjson.OPT_SORT_KEYS | orjson.OPT_NON_STR_KEYS
NORMALISERS = [
    Normaliser(),
    Normaliser(scrub_values=True),
    Normaliser(volatile_keys=("*_at", "id", "é?")),
]

# Text biased toward what normalisation touches: whitespace of every kind,
# separators, temp directories, ids and times, and volatile key names.
PIECES = st.sampled_from(
    [
        " ",
        "  ",
        "\t",
        "\n",
        "\u00a0",
        "\u2003",
        "\x0b",
        "\\",
        "/",
        "/tmp/",
        "/tmp/tmpab12cd34/",
        "/var/folders/ab/cd/T/",
        "C:\\Users\\bob\\AppData\\Local\\Temp\\",
        "D:\\x\\y",
        "7e0b5a4e-1c2d-4e5f-8a9b-0c1d2e3f4a5b",
        "2024-05-01T10:00:00Z",
        "ts",
        "created_at",
        "é",
        "a",
        "0",
        '"',
    ]
)
TEXT = st.one_of(
    st.text(alphabet=st.characters(exclude_categories=["Cs"]), max_size=20),
    st.lists(PIECES, max_size=6).map("".join),
)
KEYS = st.one_of(TEXT, st.sampled_from(["ts", "timestamp", "request_id", "Nonce", "x_at", "id"]))
SCALARS = scalars(TEXT)
JSON = json_values(TEXT, KEYS, max_leaves=24)
CONTAINERS = st.one_of(
    st.lists(JSON, max_size=4), st.dictionaries(KEYS, JSON, min_size=1, max_size=4)
)
ANY_VALUE = st.recursive(
    st.one_of(SCALARS, st.floats(), st.integers(), st.binary(max_size=8), st.text(max_size=8)),
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(
            st.one_of(st.text(max_size=4), st.integers(), st.none()), inner, max_size=3
        )
        | st.tuples(inner, inner)
    ),
    max_leaves=16,
)


def shuffled(value: Any, rng: random.Random) -> Any:
    """The same value with every object's keys in a new order."""
    if isinstance(value, dict):
        items = list(value.items())
        rng.shuffle(items)
        return {k: shuffled(v, rng) for k, v in items}
    if isinstance(value, list):
        return [shuffled(v, rng) for v in value]
    return value


@pytest.mark.parametrize("normaliser", NORMALISERS)
@PROPERTY
@given(value=ANY_VALUE)
def test_never_crashes(normaliser: Normaliser, value: Any) -> None:
    """Any value, JSON or not, gives canonical bytes or a content verdict, never an exception."""
    blob, content = normaliser.canonical(value)
    assert (blob is None) is (content in (Content.ABSENT, Content.UNKNOWN))
    Signer(normaliser).sign("tool", value, value, Status.OK)


@pytest.mark.parametrize("normaliser", NORMALISERS)
@PROPERTY
@given(value=JSON, seed=st.integers())
def test_key_order_does_not_matter(normaliser: Normaliser, value: Any, seed: int) -> None:
    """Reordering the keys of every object never changes the canonical bytes."""
    assert normaliser.canonical(shuffled(value, random.Random(seed))) == normaliser.canonical(value)


@pytest.mark.parametrize("normaliser", NORMALISERS)
@PROPERTY
@given(value=JSON)
def test_normalise_is_idempotent(normaliser: Normaliser, value: Any) -> None:
    """Normalising a normalised value changes nothing."""
    once = normaliser.normalise(value)
    assert normaliser.normalise(once) == once


@pytest.mark.slow
@pytest.mark.parametrize("normaliser", NORMALISERS)
@PROPERTY
@given(value=CONTAINERS, indent=st.sampled_from([None, 1, 4]))
def test_json_text_equals_value(normaliser: Normaliser, value: Any, indent: int | None) -> None:
    """JSON text in any layout gives the same canonical bytes as the decoded value."""
    text = json.dumps(value, indent=indent, ensure_ascii=bool(indent))
    assert normaliser.canonical(text) == normaliser.canonical(value)
    assert normaliser.canonical(text.encode()) == normaliser.canonical(value)


@pytest.mark.slow
@pytest.mark.parametrize("normaliser", NORMALISERS)
@PROPERTY
@given(value=CONTAINERS)
def test_canonical_bytes_are_the_normalised_value_sorted(
    normaliser: Normaliser, value: Any
) -> None:
    """The canonical bytes are the normalised value written compact with sorted keys."""
    blob, _ = normaliser.canonical(value)
    assert blob == orjson.dumps(normaliser.normalise(value), option=SORT)
    assert normaliser.canonical(blob.decode())[0] == blob


ITEM_LISTS = st.one_of(
    st.lists(JSON, max_size=4),
    st.dictionaries(st.sampled_from(["items", "results", "hits", "documents", "ts", "k"]), JSON),
)


@pytest.mark.parametrize("normaliser", NORMALISERS)
@PROPERTY
@given(value=ITEM_LISTS)
def test_item_digests_are_slices_of_the_canonical_bytes(normaliser: Normaliser, value: Any) -> None:
    """A list result's item digests hash its items as the canonical bytes write them.

    Read back from the bytes, as signing once did (parse them, take the list,
    write each item): the digests from the single pass are those.
    """
    blob, _, items = normaliser.canonical_items(value)
    if blob is None:
        return
    found = orjson.loads(blob)
    if type(found) is dict:
        found = next((found[k] for k in ITEM_KEYS if type(found.get(k)) is list), None)
    expected = None if found is None else tuple(xxh3(orjson.dumps(item)) for item in found)
    assert items == expected
    assert normaliser.canonical_items(json.dumps(value))[2] == items  # as text: the C pass


def nested(depth: int, leaf: Any, kind: str) -> Any:
    """A value ``depth`` containers deep."""
    value = leaf
    for _ in range(depth):
        value = [value] if kind == "list" else {"k": value}
    return value


@pytest.mark.parametrize("kind", ["list", "dict"])
@pytest.mark.parametrize("form", ["value", "json-text"])
@pytest.mark.parametrize("depth", [10_000, 300])
def test_deep_nesting_is_unknown_not_a_crash(kind: str, form: str, depth: int) -> None:
    """Nesting beyond the limit is unknown content, as a value or as JSON text."""
    value = nested(depth, "leaf", kind)
    if form == "json-text":
        opening, closing = ("[", "]") if kind == "list" else ('{"k":', "}")
        value = opening * depth + '"leaf"' + closing * depth
    assert Normaliser().canonical(value) == (None, Content.UNKNOWN)
    digests = Signer().sign("t", value, value, Status.OK)
    assert not digests.comparable


def test_nesting_within_the_limit_is_fingerprinted() -> None:
    """Values nested up to orjson's limit still get a digest."""
    blob, content = Normaliser().canonical(nested(250, "leaf  ", "dict"))
    assert content is Content.PRESENT
    assert blob is not None
    assert b"leaf" in blob


@pytest.mark.slow
@pytest.mark.parametrize(
    "text",
    [
        pytest.param("a" * 10_000_000, id="plain"),
        pytest.param("word " * 2_000_000, id="spaces"),
        pytest.param("\\tmp\\x" * 1_500_000, id="backslashes"),
    ],
)
def test_huge_strings(text: str) -> None:
    """Ten-megabyte strings are fingerprinted, raw or inside JSON text."""
    normaliser = Normaliser()
    blob, content = normaliser.canonical({"s": text})
    assert content is Content.PRESENT
    assert blob is not None
    assert normaliser.canonical(orjson.dumps({"s": text}).decode()) == (blob, content)
