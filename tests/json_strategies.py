"""Hypothesis strategies for JSON-like values and JSON text, shared by the normaliser's tests."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import strategies as st

UNICODE_SPACES = tuple(chr(c) for c in range(0x80, 0x110000) if chr(c).isspace())
"""Every character outside ASCII that ``str.split`` takes for whitespace."""

NASTY_PIECES = (
    # whitespace, raw and as JSON escapes it, next to quotes and escapes
    *(" ", "  ", "\n", "\t", "\r", "\f", "\b", "\x0b", "\x1c", "\x01", "\x7f", '"', "\\"),
    *UNICODE_SPACES,
    *("\u200b", "\u180e"),  # look like spaces, are not
    # paths: every temp root, temp names, and what must stop them
    *("/", "//", "/t", "/T", "/tmp", "/tmp/", "/TMP/x", "/Tmp", "/Temp", "/temp", "/var/tmp"),
    *("/var/folders/ab/cd/T/", "/private/var/folders/a/b/T", "/var/folder\u017f/ab/cd/T/"),
    *("C:/Users/bob/AppData/Local/Temp/", "C:\\Users\\bob\\AppData\\Local\\Temp\\", "D:\\x\\y"),
    *("$TMPDIR/", "$tmpdir/", "tmpabcd1234", "tmpABCD1234", "tmp_bcd_123", "tmpabcd123"),
    "pytest-of-x/pytest-12",
    # per-run folder names, folded in results: a digit in a last run of 6 or more
    *("xyz123", "xyz12", "tmp.Xa81kQ0pLm", "job-2024_a1b2c3", "a.b-c_d", "abcdef", "12345678"),
    *(
        "./tmp",
        "_/tmp",
        "$/tmp",
        "x/tmp",
        "src/token/x.py",
        "/home/ana/tmpfile",
        "http://host/tmp/x",
    ),
    # letters that lower-case or case-fold to ASCII, and other non-ASCII
    *("\u0130", "\u212a", "\u017f", "\u00e9", "\u00df", "\U0001f600", "\uffff"),
    # values the scrub option rewrites, volatile names, JSON syntax inside strings
    *("7e0b5a4e-1c2d-4e5f-8a9b-0c1d2e3f4a5b", "2024-05-01T10:00:00Z", "ts", "TS", "x_at"),
    *("a", "x y", "0", ":", ",", "{", "["),
)
"""Pieces of text aimed at what normalisation and the compiled pass look at."""

NASTY_TEXT = st.one_of(
    st.lists(st.sampled_from(NASTY_PIECES), max_size=6).map("".join),
    st.text(max_size=12),  # anything, lone surrogates included
)
KEY_NAMES = (
    *("ts", "TS", "Ts", "timestamp", "Request_ID", "trace_id", "SPAN_ID", "nonce", "id", "ID"),
    *("token", "Token", "x:y", "X:Y", "a", "b", "ts ", " ts", "to\u212aen", "\u0130d", "x_at", ""),
    *("k" * 63, "K" * 63, "k" * 64, "k" * 70),
    # results' volatile names in their spellings, and near misses
    *("durationMs", "duration-ms", "DURATION_MS", "_duration__ms-", "duration_m", "runId", "run-"),
    *("x-request-id", "messageID", "message_ids", "elapsed", "latency_us", "-", "_"),
)
"""Keys near the volatile names of every setting the tests use, in any case."""
NASTY_KEYS = st.one_of(NASTY_TEXT, st.sampled_from(KEY_NAMES))


def scalars(text: st.SearchStrategy[str]) -> st.SearchStrategy[Any]:
    """Every JSON scalar orjson writes as it is: null, bools, int64/uint64, finite floats, text."""
    return st.one_of(
        st.none(),
        st.booleans(),
        st.integers(min_value=-(2**63), max_value=2**64 - 1),
        st.floats(allow_nan=False, allow_infinity=False),
        text,
    )


def json_values(
    text: st.SearchStrategy[str], keys: st.SearchStrategy[str], max_leaves: int
) -> st.SearchStrategy[Any]:
    """Nested lists and objects of :func:`scalars`, with keys drawn from ``keys``."""
    return st.recursive(
        scalars(text),
        lambda inner: st.lists(inner, max_size=4) | st.dictionaries(keys, inner, max_size=4),
        max_leaves=max_leaves,
    )


PATH_PIECES = (
    *("/", "//", "/tmp", "/TMP", "/Tmp", "tmp", "/var", "/private", "/var/folders/", "ab"),
    *("/T", "/t", "T", "/Temp", "/temp", "C:", "c:", "1:", "/Users/", "/users/", "bob"),
    *("/AppData/Local/Temp", "/appdata/local/TEMP", "/AppData", "/Local", "$TMPDIR", "$TMPDIR/"),
    *("$tmpdir/", "tmpabcd1234", "tmpABCD1234", "tmp_bcd_123", "tmpabcd123", "pytest-of-"),
    *("pytest-of-x", "/pytest-", "12", "x", ".", "_", "$", "-", " ", "  ", ":", '"', "\u00e9"),
)
"""Pieces of temp roots and temp names, to be shuffled: near misses matter most."""
TEMP_PATHS = st.lists(st.sampled_from(PATH_PIECES), max_size=10).map("".join)

NUMBER_TEXTS = st.one_of(
    st.floats(allow_nan=False, allow_infinity=False).flatmap(
        lambda x: st.sampled_from([repr(x), f"{x:f}", f"{x:.15g}", f"{x:.16g}", f"{x:.17g}"])
    ),
    st.integers(min_value=-(2**65), max_value=2**65).map(str),
    st.sampled_from([2**63, 2**64, -(2**63)]).flatmap(
        lambda edge: st.integers(edge - 1000, edge + 1000).map(str)
    ),
    st.text(alphabet="0123456789.-+eE", min_size=1, max_size=14),  # valid or not
)
"""Number spellings: every double in several forms, integers around int64 and uint64, junk."""


def _layouts(value: Any) -> list[str]:
    compact = json.dumps(value, separators=(",", ":"), ensure_ascii=False)
    return [
        compact,
        compact.replace("/", "\\/"),
        json.dumps(value, indent=1),
        json.dumps(value),  # non-ASCII and lone surrogates escaped
    ]


EDITS = ("insert", "delete", "replace")


def _mutated(text: str, at: int, op: str, char: str) -> str:
    at = at % (len(text) + 1)
    if op == "insert":
        return text[:at] + char + text[at:]
    if op == "delete":
        return text[:at] + text[at + 1 :]
    return text[:at] + char + text[at + 1 :]


def _nested(depth: int, kind: str, inner: str) -> str:
    if kind == "array":
        return "[" * depth + inner + "]" * depth
    if kind == "object":
        return '{"b":' * depth + inner + "}" * depth
    return '{"b":[0,{"a":' * depth + inner + "}]}" * depth


def _duplicated(key: str, other: str, first: Any, second: Any) -> str:
    dump = json.dumps
    return f"{{{dump(key)}:{dump(first)},{dump(other)}:1,{dump(key)}:{dump(second)}}}"


def json_texts(max_leaves: int = 20) -> st.SearchStrategy[str]:
    """JSON text and near-JSON text of nasty values, in every layout a payload arrives in.

    Valid JSON in four layouts; the same with one character inserted, deleted
    or replaced (often not JSON any more); number spellings, bare and nested;
    nesting around the compiled pass's and orjson's depth limits; objects with
    a key twice; strings of shuffled temp-path pieces; and any text at all.
    """
    values = json_values(NASTY_TEXT, NASTY_KEYS, max_leaves)
    layouts = values.flatmap(lambda v: st.sampled_from(_layouts(v)))
    junk = st.sampled_from('{}[],:" \\/ntuef0-.eE+19\n\t\x00\u00e9\u00a0')
    return st.one_of(
        layouts,
        st.builds(_mutated, layouts, st.integers(0, 10_000), st.sampled_from(EDITS), junk),
        NUMBER_TEXTS,
        NUMBER_TEXTS.map(lambda n: f'{{"n":{n},"m":[{n}, 0]}}'),
        st.builds(
            _nested,
            st.integers(1, 300) | st.sampled_from([127, 128, 129, 254, 255, 256]),
            st.sampled_from(["array", "object", "mixed"]),
            st.sampled_from(["1", '"  a  "', '{"ts":1}', '"/tmp/x"', "[]", '{"b":1,"a":0}']),
        ),
        st.builds(_duplicated, NASTY_KEYS, NASTY_KEYS, values, values),
        TEMP_PATHS.flatmap(lambda path: st.sampled_from(_layouts({"p": [path], "q": path}))),
        st.text(),
    )
