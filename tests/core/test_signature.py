"""Normalisation, emptiness and the three digests."""

from __future__ import annotations

import enum
import gc
import json
import tracemalloc
from typing import Any

import orjson
import pytest

from otel_stall import ABSENT, Content, Normaliser, Signer, Status
from otel_stall.core.signing import CACHE_ENTRIES, CACHE_ITEMS, digest, is_empty
from otel_stall.core.volatile import DEFAULT_VOLATILE_KEYS, parse_volatile_keys

ARGS = {"query": "login timeout", "filters": {"repo": "web", "langs": ["py", "ts"]}, "limit": 10}
# An OTLP kvlist arrives as (key, value) pairs; arrays may come back as tuples.
INNER_PAIRS = [("repo", "web"), ("langs", ("py", "ts"))]
KVLIST_PAIRS = [("query", "login timeout"), ("limit", 10), ("filters", dict(INNER_PAIRS))]


def _same(a: Any, b: Any, normaliser: Normaliser | None = None) -> bool:
    n = normaliser or Normaliser()
    return n.canonical(a) == n.canonical(b)


@pytest.mark.parametrize(
    "variant",
    [
        pytest.param(
            {
                "limit": 10,
                "filters": {"langs": ["py", "ts"], "repo": "web"},
                "query": "login timeout",
            },
            id="key-order",
        ),
        pytest.param(json.dumps(ARGS), id="json-text"),
        pytest.param(json.dumps(ARGS, indent=4, sort_keys=True), id="json-pretty"),
        pytest.param(
            ' {  "query" :"login timeout","limit":10 ,\n'
            '"filters":{"repo":"web","langs":["py","ts"]}}\n',
            id="json-whitespace",
        ),
        pytest.param(json.dumps(ARGS).encode(), id="json-bytes"),
        pytest.param(
            dict(KVLIST_PAIRS),
            id="kvlist-pairs-and-tuple",
        ),
    ],
)
def test_equal_values_hash_the_same(variant: Any) -> None:
    """JSON text, bytes, dicts in any key order and list-of-pairs dicts give the same bytes."""
    assert _same(ARGS, variant)
    assert Signer().sign("search", ARGS, None, Status.OK) == Signer().sign(
        "search", variant, None, Status.OK
    )


@pytest.mark.parametrize(
    ("a", "b"),
    [
        pytest.param({"q": "a"}, {"q": "b"}, id="value"),
        pytest.param({"q": "a"}, {"query": "a"}, id="key"),
        pytest.param([1, 2], [2, 1], id="list-order"),
        pytest.param({"n": 1}, {"n": "1"}, id="type"),
        pytest.param(
            {"id": "7e0b5a4e-1c2d-4e5f-8a9b-0c1d2e3f4a5b"},
            {"id": "0b1c2d3e-4f5a-4b6c-8d7e-9f0a1b2c3d4e"},
            id="uuid-kept-by-default",
        ),
        pytest.param(
            {"at": "2024-05-01T10:00:00Z"},
            {"at": "2024-05-02T10:00:00Z"},
            id="timestamp-kept-by-default",
        ),
    ],
)
def test_different_values_hash_differently(a: Any, b: Any) -> None:
    """Normalisation stops at noise: real differences, ids and times in values stay."""
    assert not _same(a, b)


@pytest.mark.parametrize("key", DEFAULT_VOLATILE_KEYS)
def test_default_volatile_keys_are_dropped_at_any_depth(key: str) -> None:
    """Each default volatile key is dropped at the top, nested in objects and in lists."""
    base = {"a": 1, "b": {"c": [{"d": 2}]}}
    noisy = {"a": 1, key: "x1", "b": {key: 9, "c": [{"d": 2, key: [1, 2]}]}}
    assert _same(base, noisy)


@pytest.mark.parametrize(
    ("patterns", "key"),
    [
        pytest.param(("*_at",), "created_at", id="suffix-glob"),
        pytest.param(("x-*",), "X-Request-Start", id="prefix-glob-case"),
        pytest.param(("req?id",), "req_id", id="question-mark"),
        pytest.param(("req?id",), "reqéid", id="question-mark-non-ascii"),
        pytest.param(("[ab]_seq",), "b_seq", id="char-class"),
        pytest.param(("ÉTAPE",), "étape", id="non-ascii-exact"),
        pytest.param(("Trace_ID",), "TRACE_id", id="exact-case"),
    ],
)
def test_configured_volatile_keys_and_globs(patterns: tuple[str, ...], key: str) -> None:
    """Configured names and globs are matched case-insensitively at depth."""
    normaliser = Normaliser(volatile_keys=patterns)
    base = {"data": [{"v": 1}]}
    noisy = {"data": [{"v": 1, key: "2024"}], key: 3}
    assert _same(base, noisy, normaliser)
    assert normaliser.is_volatile(key)


def test_volatile_key_only_dropped_when_configured() -> None:
    """With an empty volatile set, ``ts`` is a value like any other."""
    normaliser = Normaliser(volatile_keys=())
    assert not _same({"a": 1}, {"a": 1, "ts": 5}, normaliser)


def test_key_that_lowercases_to_a_volatile_name_is_dropped() -> None:
    """A key with a Kelvin sign lower-cases to an ASCII volatile name and is dropped."""
    normaliser = Normaliser(volatile_keys=("token",))
    assert normaliser.canonical({"to\u212aen": 1, "q": 2})[0] == b'{"q":2}'
    assert normaliser.canonical('{"to\u212aen": 1, "q": 2}')[0] == b'{"q":2}'


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        pytest.param("/tmp/tmpab12cd_9/out.txt", "$TMPDIR/*/out.txt", id="tmp-tempfile"),
        pytest.param("/var/tmp/tmpzz99yy88/x", "$TMPDIR/*/x", id="var-tmp"),
        pytest.param("/tmp/build.log", "$TMPDIR/build.log", id="tmp-plain"),
        pytest.param(
            "/var/folders/x7/k2l9m/T/tmpq1w2e3r4/data.csv", "$TMPDIR/*/data.csv", id="macos"
        ),
        pytest.param(
            "/private/var/folders/x7/k2l9m/T/report.pdf", "$TMPDIR/report.pdf", id="macos-private"
        ),
        pytest.param(
            "C:\\Users\\bob\\AppData\\Local\\Temp\\tmpab12cd34\\a.txt",
            "$TMPDIR/*/a.txt",
            id="windows-temp",
        ),
        pytest.param("src\\app\\main.py", "src/app/main.py", id="backslash-separators"),
        pytest.param("D:\\work\\repo\\setup.cfg", "D:/work/repo/setup.cfg", id="drive-path"),
        pytest.param(
            "cannot open C:\\Users\\bob\\AppData\\Local\\Temp\\tmpab12cd34\\a.txt: denied",
            "cannot open $TMPDIR/*/a.txt: denied",
            id="windows-temp-in-text",
        ),
        pytest.param(
            "/tmp/pytest-of-ci/pytest-42/test_x0/f", "$TMPDIR/*/test_x0/f", id="pytest-tmp"
        ),
        pytest.param("see http://host/tmp/x", "see http://host/tmp/x", id="url-untouched"),
        pytest.param("/home/ana/tmpfile", "/home/ana/tmpfile", id="not-temp"),
    ],
)
def test_temp_paths_and_separators(text: str, expected: str) -> None:
    """Temp directories, tempfile names and path separators are made canonical."""
    assert Normaliser().normalise_text(text) == expected


def test_two_temp_dirs_hash_the_same() -> None:
    """The same file in two different tempfile directories is the same argument."""
    assert _same({"path": "/tmp/tmpaaaa1111/x.json"}, {"path": "/tmp/tmpbbbb2222/x.json"})


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        pytest.param("/tmp/x/tmpab12cd34/out.txt", "$TMPDIR/x/tmpab12cd34/out.txt", id="under-tmp"),
        pytest.param("/scratch/tmp.Xy12/out.txt", "/scratch/tmp.Xy12/out.txt", id="elsewhere"),
        pytest.param("/home/ci/tmp/tmpab12cd34/f", "/home/ci/tmp/tmpab12cd34/f", id="home-tmp"),
    ],
)
def test_a_custom_temp_dir_is_only_a_path(text: str, expected: str) -> None:
    """A temp dir outside the fixed roots is a path like any other, whatever TMPDIR says here."""
    assert Normaliser().normalise_text(text) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        pytest.param("$TMPDIR/pytest-of-x/pytest-1/tests", "$TMPDIR/*/tests", id="pytest-name"),
        pytest.param("/var/folder\u017f/ab/cd/T/x", "$TMPDIR/x", id="long-s-in-folders"),
        pytest.param("/var/folders/ab/cd/T\t", "$TMPDIR", id="root-then-tab"),
        pytest.param(
            "$TMPDIR/pytest-of-x/pytest-1", "$TMPDIR/pytest-of-x/pytest-1", id="no-slash-t"
        ),
    ],
)
def test_temp_dirs_once_missed(text: str, expected: str) -> None:
    """Temp dirs that a byte scan once missed (and one the definition leaves), in text and JSON."""
    normaliser = Normaliser()
    assert normaliser.normalise_text(text) == expected
    assert normaliser.canonical({"a": text})[0] == orjson.dumps({"a": expected})
    assert normaliser.canonical(json.dumps({"a": text}))[0] == orjson.dumps({"a": expected})


@pytest.mark.parametrize(
    "text",
    [
        pytest.param("src/token/x.py", id="slash-t-word"),
        pytest.param("a/T b", id="slash-t-then-space"),
        pytest.param("x/tmp", id="word-before-root"),
    ],
)
def test_paths_that_are_not_temp_dirs_stay(text: str) -> None:
    """Slashes followed by a t that ends no temp root are left as they are."""
    assert Normaliser().canonical({"p": text})[0] == orjson.dumps({"p": text})


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        pytest.param("a  b", "a b", id="double-space"),
        pytest.param("  a b ", "a b", id="strip"),
        pytest.param("a\tb\nc\r\nd", "a b c d", id="tabs-newlines"),
        pytest.param("a\u00a0\u2003b", "a b", id="unicode-spaces"),
        pytest.param("a\x0b\x1fb", "a b", id="control-spaces"),
        pytest.param("   ", "", id="only-space"),
    ],
)
def test_whitespace_collapses(text: str, expected: str) -> None:
    """Runs of whitespace become one space and the ends are stripped."""
    assert Normaliser().normalise_text(text) == expected
    assert _same({"q": text}, {"q": expected})


@pytest.mark.parametrize(
    ("a", "b"),
    [
        pytest.param(
            {"id": "7e0b5a4e-1c2d-4e5f-8a9b-0c1d2e3f4a5b"},
            {"id": "0b1c2d3e-4f5a-4b6c-8d7e-9f0a1b2c3d4e"},
            id="uuid",
        ),
        pytest.param(
            {"m": "done at 2024-05-01T10:00:00.123Z"},
            {"m": "done at 2024-06-11 09:30:01+02:00"},
            id="iso-timestamp",
        ),
    ],
)
def test_scrub_values_option(a: Any, b: Any) -> None:
    """Scrubbing is off by default and, when on, makes ids and times in strings equal."""
    assert not _same(a, b)
    assert _same(a, b, Normaliser(scrub_values=True))


@pytest.mark.parametrize(
    "value",
    [
        None,
        "",
        "   ",
        0,
        0.0,
        False,
        [],
        {},
        {"items": [], "count": 0},
        {"rows": [], "rowCount": 0},
        {"data": {"hits": [], "next": None, "more": False}, "message": ""},
        [[], {}, [None]],
        float("nan"),
        '{"items": [], "count": 0}',
        "null",
    ],
)
def test_structurally_empty(value: Any) -> None:
    """Containers of nothing, blank strings, 0, false and null are empty, by structure."""
    assert Normaliser().canonical(value)[1] is Content.EMPTY


@pytest.mark.parametrize(
    "value",
    [
        {"items": [], "count": 1},
        {"rows": [{}], "note": "x"},
        [0, 0, 1],
        True,
        "0 results",
        -1,
        {"ok": True},
    ],
)
def test_not_empty(value: Any) -> None:
    """Anything holding a true value, a number or text is present."""
    assert not is_empty(value)
    assert Normaliser().canonical(value)[1] is Content.PRESENT


def test_volatile_only_result_is_empty() -> None:
    """A result that holds only volatile keys carries nothing once they are dropped."""
    assert Normaliser().canonical({"ts": 17, "request_id": "r1"})[1] is Content.EMPTY


def test_absent_is_not_empty() -> None:
    """Not captured is distinct from captured-and-empty, in content and digests."""
    n = Normaliser()
    assert n.canonical(ABSENT) == (None, Content.ABSENT)
    signer = Signer()
    absent = signer.sign("t", {}, ABSENT, Status.OK)
    empty = signer.sign("t", {}, None, Status.OK)
    assert absent.result_digest is None
    assert empty.result_digest is not None
    assert absent.signature != empty.signature
    assert not absent.comparable
    assert empty.comparable


@pytest.mark.parametrize(
    "value",
    [
        pytest.param({1, 2}, id="set"),
        pytest.param(object(), id="object"),
        pytest.param("[" * 2000 + "]" * 2000, id="json-text-too-deep"),
    ],
)
def test_unknown_content(value: Any) -> None:
    """Values that cannot be fingerprinted are unknown, never an exception."""
    assert Normaliser().canonical(value) == (None, Content.UNKNOWN)


def test_deep_dict_is_unknown_both_ways() -> None:
    """Too-deep values are unknown whether they force the walk or not."""
    deep: Any = "leaf"
    noisy: Any = "leaf  "
    for _ in range(300):
        deep, noisy = [deep], [noisy]
    assert Normaliser().canonical(deep)[1] is Content.UNKNOWN
    assert Normaliser().canonical(noisy)[1] is Content.UNKNOWN


def test_truncated_json_is_hashed_as_text() -> None:
    """Content cut at a length limit is not JSON: it is compared as text."""
    cut = '{"documents": [{"id": "kb-12", "title": "Ref'
    blob, content = Normaliser().canonical(cut)
    assert content is Content.PRESENT
    assert blob == json.dumps(cut).encode()


@pytest.mark.parametrize(
    ("a", "b"),
    [
        pytest.param({True: 1}, {"true": 1}, id="bool-key"),
        pytest.param({None: 1, "x": "a  b"}, {"null": 1, "x": "a b"}, id="none-key-walk"),
        pytest.param({"n": 2**70}, {"n": str(2**70)}, id="big-int"),
        pytest.param({"b": b"bytes"}, {"b": "bytes"}, id="bytes-value"),
    ],
)
def test_python_values_match_their_json_form(a: Any, b: Any) -> None:
    """Non-JSON Python values hash like the JSON that stands for them."""
    assert _same(a, b)


def test_digests_separate_call_result_and_status() -> None:
    """The call signature ignores the result; the full signature covers result and status."""
    sign = Signer().sign
    ok = sign("search", ARGS, {"hits": [1]}, Status.OK)
    other_result = sign("search", ARGS, {"hits": [2]}, Status.OK)
    failed = sign("search", ARGS, {"hits": [1]}, Status.ERROR)
    other_tool = sign("find", ARGS, {"hits": [1]}, Status.OK)
    assert ok.call_signature == other_result.call_signature == failed.call_signature
    assert ok.result_digest == failed.result_digest != other_result.result_digest
    assert len({ok.signature, other_result.signature, failed.signature}) == 3
    assert other_tool.call_signature != ok.call_signature
    assert all(len(d.signature) == 16 for d in (ok, other_result, failed))


def test_signer_accepts_status_text() -> None:
    """A status given as text signs like the enum member."""
    assert Signer().sign("t", {}, 1, "error") == Signer().sign("t", {}, 1, Status.ERROR)


def test_digest_helper() -> None:
    """``digest`` is the result digest of one value, ``None`` when absent."""
    assert digest({"b": 1, "a": 2}) == digest('{"a":2,"b":1}')
    assert digest(ABSENT) is None


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ("ts,nonce", ("ts", "nonce")),
        (" ts , *_at ,", ("ts", "*_at")),
        ("+job_started", (*DEFAULT_VOLATILE_KEYS, "job_started")),
        ("", ()),
        (["a", "b"], ("a", "b")),
    ],
)
def test_parse_volatile_keys(spec: Any, expected: tuple[str, ...]) -> None:
    """Volatile keys come as a comma list, ``+`` extends the defaults, or an iterable."""
    assert parse_volatile_keys(spec) == expected


class Shade(enum.Enum):
    """A plain enum."""

    SPACED = " a  b "
    ZERO = 0


@pytest.mark.parametrize(
    ("value", "same_as"),
    [
        pytest.param(Shade.SPACED, "a b", id="plain-enum"),
        pytest.param({"k": [Shade.SPACED]}, {"k": ["a b"]}, id="plain-enum-inside"),
        pytest.param({"k": Shade.ZERO}, {"k": 0}, id="falsy-plain-enum"),
        pytest.param({"k": Status.OK}, {"k": "ok"}, id="str-enum"),
    ],
)
def test_an_enum_member_signs_as_its_value(value: Any, same_as: Any) -> None:
    """An enum member is its value, as JSON has it: normalised, empty when its value is."""
    assert _same(value, same_as)
    assert _same(value, same_as, Normaliser(native=False))


class OtherStatus(str, enum.Enum):
    """A str enum that is not ``Status``."""

    OK = "ok"


class TextStatus(str):
    """A str subclass that is not ``Status``."""


@pytest.mark.parametrize(
    ("status", "same_as"),
    [
        pytest.param(Status.REFUSED, "refused", id="Status-member"),
        pytest.param(TextStatus("error"), "error", id="str-subclass"),
        pytest.param(OtherStatus.OK, str(OtherStatus.OK), id="other-str-enum"),
        pytest.param(7, "7", id="int"),
    ],
)
def test_status_signs_as_its_text(status: Any, same_as: str) -> None:
    """A ``Status`` signs as its value, text as itself, anything else as its ``str()``."""
    assert Signer().sign("t", "{}", "[]", status) == Signer().sign("t", "{}", "[]", same_as)


@pytest.mark.parametrize("status", ["\ud800", "ok\udfff"])
def test_a_status_that_is_not_utf8_is_refused(status: str) -> None:
    """A status with a lone surrogate raises: a caller's bug, not a payload to fingerprint."""
    with pytest.raises(UnicodeEncodeError):
        Signer().sign("tool", "{}", "[]", status)


@pytest.mark.parametrize(
    ("tool", "text"),
    [
        pytest.param("t", "caf\udce9", id="lone-surrogate-text"),
        pytest.param("t", '{"q": "a\udfffb"}', id="lone-surrogate-in-json"),
        pytest.param("bad\ud800tool", '{"q": 1}', id="lone-surrogate-tool"),
        pytest.param("t", '{"q": "caf\u00e9"}', id="non-ascii"),
    ],
)
def test_signer_cache_takes_any_text(tool: str, text: str) -> None:
    """Text that UTF-8 cannot encode strictly still signs, the same twice and in a new signer."""
    signer = Signer()
    first = signer.sign(tool, text, text, "ok")
    assert signer.sign(tool, text, text, "ok") == first
    assert Signer().sign(tool, text, text, "ok") == first


def test_signer_cache_is_keyed_by_tool_and_text() -> None:
    """A cached call signature is per tool; a cached result digest is shared by every tool."""
    signer = Signer()
    search = signer.sign("search", '{"q": 1}', '"hit"', "ok")
    fetch = signer.sign("fetch", '{"q": 1}', '"hit"', "ok")
    assert search.call_signature != fetch.call_signature
    assert search.result_digest == fetch.result_digest
    assert signer.sign("search", '{"q": 1}', '"hit"', "ok") == search


def test_signer_still_agrees_once_its_caches_are_cleared() -> None:
    """More distinct texts than a cache holds: a full cache is cleared and signing goes on."""
    signer = Signer()
    calls = [(f'{{"q":"query {i}"}}', f'{{"hits":[{i}]}}') for i in range(CACHE_ENTRIES + 50)]
    first = [signer.sign("tool", a, r, Status.OK) for a, r in calls]
    again = [signer.sign("tool", a, r, Status.OK) for a, r in calls[:100]]
    assert again == first[:100]
    assert first[:100] == [Signer().sign("tool", a, r, Status.OK) for a, r in calls[:100]]


def test_remembered_results_hold_a_bounded_number_of_item_digests() -> None:
    """Long new list results, one after another (issue 27): the signer's caches stay small.

    300 results of 200 new items would hold 60,000 item digests (about 4 MB) if
    remembered; a long list is signed the same whether remembered or not.
    """
    signer = Signer()
    results = [
        orjson.dumps({"items": [f"row {n}-{i}" for i in range(200)]}).decode() for n in range(300)
    ]
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        first = [signer.sign("list", '{"page": 1}', r, Status.OK) for r in results]
        kept = first[0]
        del first
        gc.collect()
        held = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert held < 1 << 20, f"the signer holds {held} bytes after 300 long lists"
    assert signer.sign("list", '{"page": 1}', results[0], Status.OK) == kept
    assert kept.items is not None
    assert len(kept.items) == 200
    assert CACHE_ITEMS < 200 <= CACHE_ENTRIES
