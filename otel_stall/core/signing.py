"""Normalisation and hashing: how two tool calls come to "look the same".

A signature is (tool, normalised arguments, result digest, status), hashed with
xxh3. Normalisation removes the noise that would make every call look unique
(volatile keys, temp paths, whitespace, key order) and nothing more, because
aggressive normalisation collapses genuinely different calls into one
signature and produces false loops. That is also why scrubbing UUIDs and
timestamps inside string values is an option that is off by default: an id
in a value is often the very thing that makes two calls different.

JSON text first goes to the compiled canonicaliser (``_canon.c``), where it is
built: one pass over the bytes that writes the canonical bytes directly, with
no Python objects, about half the cost of ``orjson.loads`` alone. It hands back
what it does not know, and then the Python path below does that payload.

The Python path parses JSON and re-serialises it with sorted keys in C
(orjson), then scans the compact bytes for anything that needs the Python
walk: one folded copy (ASCII lower-cased, quotes read as spaces) and three
regex scans that each start only at a space, a slash or a colon. Most payloads
never take the walk. Each scan still costs about a third of the parse.
Rewriting the bytes with regexes instead of walking was measured and dropped:
in CPython's regex engine it cost as much as the walk it saved. The Python path
defines the canonical bytes; the compiled one is tested against it.
"""

from __future__ import annotations

import enum
import fnmatch
import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

import orjson
import xxhash

from otel_stall.core.records import ABSENT, Status


def _not_built(*args: Any) -> None:
    """Stands in for the compiled canonicaliser and signer where they are not built.

    Never called then: ``Normaliser._native_keys`` is ``None`` without the extension.
    """


try:
    from otel_stall.core._canon import canonical as _native_canonical
    from otel_stall.core._canon import sign as _native_sign
except ImportError:  # not built (no compiler at install time): the Python path does it all
    _native_canonical = _not_built
    _native_sign = _not_built

NATIVE_AVAILABLE: Final = _native_canonical is not _not_built
"""Whether the compiled canonicaliser (``otel_stall.core._canon``) is built here.

It is an accelerator only. It gives the very bytes the Python path gives, and
hands anything it does not know (temp paths, escapes, floats that orjson
writes with an exponent, big integers) back to the Python path.
"""

DEFAULT_VOLATILE_KEYS: Final[tuple[str, ...]] = (
    "ts",
    "timestamp",
    "request_id",
    "trace_id",
    "span_id",
    "nonce",
)
"""Keys dropped at any depth before hashing: they differ on every call by design."""

MAX_DEPTH: Final = 256
"""Deeper values are not fingerprinted: they count as unknown, never as a loop.

orjson itself refuses to write deeper than about 255 levels, so the limit is
the same whether a value takes the fast path or the Python walk.
"""

_SORT: Final = orjson.OPT_SORT_KEYS | orjson.OPT_NON_STR_KEYS
_SORT_STR_KEYS: Final = orjson.OPT_SORT_KEYS
_dumps = orjson.dumps
_loads = orjson.loads
_hash = xxhash.xxh3_64_hexdigest
_MAX_TEXT_PASSES: Final = 4
_INT_MIN: Final = -(1 << 63)
_INT_END: Final = 1 << 64
_KEY_CACHE_ENTRIES: Final = 1024
_NATIVE_MAX_KEYS: Final = 64
"""More volatile names than the compiled path holds: the Python path does it."""


class Content(str, enum.Enum):
    """What could be learned about a payload's content."""

    PRESENT = "present"
    EMPTY = "empty"
    """Holds nothing but empty containers, empty strings, 0, false and null."""
    ABSENT = "absent"
    """Not captured: content capture off, or redacted at the source."""
    UNKNOWN = "unknown"
    """Captured but cannot be fingerprinted (too deep, unserialisable)."""

    @property
    def known(self) -> bool:
        """Whether the payload has a digest that can be compared."""
        return self is Content.PRESENT or self is Content.EMPTY


@dataclass(frozen=True, slots=True)
class Digests:
    """The three hashes of one call, and what was known about its payloads."""

    call_signature: str
    result_digest: str | None
    signature: str
    arguments: Content
    result: Content

    @property
    def comparable(self) -> bool:
        """Both payloads were captured and fingerprinted, so equal signatures mean equal calls.

        With content capture off (the GenAI default) every call of a tool has
        the same signature; treating those as repeats would flag every run.
        """
        return self.arguments.known and self.result.known


class _TooDeep:
    """JSON text nested beyond the parser's limit: a value too deep to fingerprint."""


_TOO_DEEP: Final = _TooDeep()

# -- strings -----------------------------------------------------------------

_PATHLIKE = re.compile(r'^(?:[A-Za-z]:|\.{1,2})?[\\/]?[^\\/\s:*?"<>|]+(?:[\\/][^\\/\s:*?"<>|]*)+$')
_WIN_PATH = re.compile(r'(?<![A-Za-z0-9])[A-Za-z]:\\[^\s:*?"<>|]*')
"""A Windows drive path inside free text, such as an error message."""
_UUID = re.compile(
    r"\b[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\b"
)
_ISO_TS = re.compile(
    r"\b\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(?::\d{2}(?:[.,]\d+)?)?(?:Z|[+-]\d{2}:?\d{2})?\b"
)
_TMP_NAME = re.compile(r"\$TMPDIR/(?:tmp[a-z0-9_]{8}|pytest-of-[^/]+/pytest-\d+)(?=/|$)")


_TEMP_ROOTS: Final = (
    r"(?:/private)?/var/folders/[^/]+/[^/]+/T",  # macOS
    r"[A-Za-z]:/Users/[^/]+/AppData/Local/Temp",  # Windows, once backslashes are slashes
    r"(?:/var)?/tmp",  # Linux and the BSDs
)
"""The temp roots of every platform, the same on every host: never ``tempfile.gettempdir()``.

The canonical form is a function of the payload alone, so a call signs the
same live, in a replay and in a gateway, on any machine.
"""
_TMP_DIR = re.compile(r"(?<![\w.$])(?:" + "|".join(_TEMP_ROOTS) + r")(?=/|$)", re.IGNORECASE)

# Bytes in compact JSON that mean a string may need canonicalising. A false
# alarm costs only the slower walk; a miss would make the two paths disagree.
_UNICODE_SPACES: Final = (
    b"\xc2\x85",
    b"\xc2\xa0",
    b"\xe1\x9a\x80",
    b"\xe2\x81\x9f",
    b"\xe3\x80\x80",
)
"""U+0085, U+00A0, U+1680, U+205F and U+3000 in UTF-8: whitespace to ``str.split``."""
_E2_SPACE: Final = re.compile(rb"\xe2\x80[\x80-\x8a\xa8\xa9\xaf]")
"""U+2000-U+200A, U+2028, U+2029 and U+202F, among the common U+20xx punctuation."""
_FOLDS_TO_ASCII: Final = (b"\xc4\xb0", b"\xe2\x84\xaa")
"""U+0130 and U+212A (Kelvin): the only non-ASCII characters that ``str.lower`` maps to ASCII.

A key holding one can lower-case to a volatile key name that the ASCII-only
byte patterns do not see, so such payloads take the walk.
"""
_SCRUB_HINT: Final = re.compile(rb"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-|\d{4}-\d{2}-\d{2}[T ]\d{2}:")

_FOLD: Final = bytes.maketrans(b'"ABCDEFGHIJKLMNOPQRSTUVWXYZ', b" abcdefghijklmnopqrstuvwxyz")
"""One pass that lower-cases ASCII and reads quotes as spaces, for all the scans at once.

A quote read as a space lets one search for two spaces find a double space,
a space after an opening quote and one before a closing quote (compact JSON
has no other spaces); a key reads as `` name :``.
"""
_TWO_SPACES: Final = re.compile(b"  ")
"""A compiled literal: faster than ``b"  " in blob`` on text full of single spaces."""
_ESCAPE: Final = re.compile(rb"\\[ntrfbu\\]")
"""Escaped whitespace, control characters and backslashes (an escaped quote needs nothing)."""
_ESCAPED_QUOTE: Final = re.compile(rb'\\"')
"""Compiled: a regex that starts with a backslash skips from one to the next, unlike ``in``."""


_TEMP_SCAN: Final = re.compile(rb"/t(?:mp|emp|[/ ])")
"""A temp root's end in folded bytes, tried at each slash (a string's end ``/T"`` reads ``/t ``)."""
_TEMP_NAME: Final = b"$TMPDIR/"
_TEMP_MARK: Final = re.compile(r"/t(?:mp|emp|/|$)|\$tmpdir/")
"""The same markers in lower-cased text: without one, the temp regexes cannot match."""


def _glob_to_bytes_regex(pattern: str) -> bytes:
    out = []
    for ch in pattern:
        if ch == "*":
            out.append(rb'[^"\\]*')
        elif ch == "?":
            out.append(rb'[^"\\]{1,4}')  # one character is 1 to 4 bytes of UTF-8
        else:
            out.append(re.escape(ch).encode())
    return b"".join(out)


@dataclass(frozen=True, slots=True)
class Normaliser:
    """Turns an argument or result value into canonical bytes for hashing.

    Arguments and results given as JSON text, dicts or lists compare as
    values: key order, JSON whitespace and list-vs-tuple do not matter.
    """

    volatile_keys: tuple[str, ...] = DEFAULT_VOLATILE_KEYS
    """Key names or glob patterns (``*_at``), matched case-insensitively at any depth."""
    scrub_values: bool = False
    """Replace UUIDs and ISO-8601 timestamps inside strings. Off: it can make false loops."""
    native: bool = field(default=True, compare=False)
    """Use the compiled canonicaliser where it is built. Off gives the same bytes, slower."""
    _exact: frozenset[str] = field(init=False, repr=False, compare=False)
    _globs: tuple[str, ...] = field(init=False, repr=False, compare=False)
    _keys: re.Pattern[bytes] | None = field(init=False, repr=False, compare=False)
    """Finds a volatile key in a payload's bytes, folded or lower-cased (``_keys_folded``)."""
    _keys_folded: bool = field(init=False, repr=False, compare=False)
    _volatile: dict[str, bool] = field(init=False, repr=False, compare=False)
    """Key -> dropped? Keys repeat across payloads; bounded, and safe to share between threads."""
    _native_keys: tuple[bytes, ...] | None = field(init=False, repr=False, compare=False)
    """The volatile names for the compiled path, or ``None`` where only Python knows the rules."""

    def __post_init__(self) -> None:
        keys = tuple(k.lower() for k in self.volatile_keys)
        globs = tuple(k for k in keys if any(c in k for c in "*?["))
        exact = frozenset(k for k in keys if k not in globs)
        set_ = object.__setattr__
        set_(self, "_exact", exact)
        set_(self, "_volatile", {})
        set_(self, "_globs", globs)
        names = [k.encode() for k in sorted(exact) if _plain_key(k)]
        native = (
            self.native
            and NATIVE_AVAILABLE
            and not self.scrub_values
            and not globs
            and len(names) == len(exact) <= _NATIVE_MAX_KEYS
        )
        set_(self, "_native_keys", tuple(names) if native else None)
        if not globs and names and len(names) == len(exact):
            # Plain names: found in the folded bytes, where ``"ts":`` reads
            # `` ts :``, by a regex tried at each colon only.
            set_(self, "_keys", _key_scan(names))
            set_(self, "_keys_folded", True)
            return
        # Patterns: one regex over the lower-cased bytes finds any of them,
        # tried at each quote. Character classes and case folding beyond
        # ASCII, which bytes cannot do, match any key: objects always walk.
        patterns = [re.escape(orjson.dumps(k)[1:-1]) for k in sorted(exact)]
        patterns += [_glob_to_bytes_regex(g) for g in globs if "[" not in g]
        if any("[" in g for g in globs) or not all(k.isascii() for k in keys):
            pattern: bytes | None = b'":'
        elif patterns:
            pattern = b'"(?:' + b"|".join(patterns) + b')":'
        else:
            pattern = None
        set_(self, "_keys", None if pattern is None else re.compile(pattern))
        set_(self, "_keys_folded", False)

    # -- public API ----------------------------------------------------------

    def canonical(self, value: Any) -> tuple[bytes | None, Content]:
        """Canonical bytes of ``value`` and what kind of content it was.

        Bytes are ``None`` when the content is absent or cannot be fingerprinted.
        """
        if type(value) is str and self._native_keys is not None:
            try:
                utf8 = value.encode()
            except UnicodeEncodeError:  # a lone surrogate: for the Python path
                return self._canonical(value)
            return self.canonical_text(value, utf8)
        return self._canonical(value)

    def canonical_text(self, text: str, utf8: bytes) -> tuple[bytes | None, Content]:
        """:meth:`canonical` of ``text``, given also as strict UTF-8 (``text.encode()``).

        The signer has these bytes already, for its cache key. The compiled path
        reads them in one pass and builds no Python objects; whatever it hands
        back (``None``) takes the Python path.
        """
        keys = self._native_keys
        if keys is not None:
            done = _native_canonical(utf8, keys)
            if done is not None:
                return done[0], _EMPTY if done[1] else _PRESENT
        return self._canonical(text)

    def _canonical(self, value: Any) -> tuple[bytes | None, Content]:
        """The Python path: parse, re-serialise sorted in C, walk only when a scan says so."""
        if value is ABSENT:
            return None, Content.ABSENT
        if type(value) is str:  # _decode's common case, inline
            try:
                value = _loads(value)
            except orjson.JSONDecodeError as exc:
                if exc.msg.startswith("depth limit"):
                    return None, Content.UNKNOWN
        else:
            value = self._decode(value)
            if value is _TOO_DEEP:
                return None, Content.UNKNOWN
        # The fast path. Without OPT_NON_STR_KEYS, which costs half as much again:
        # a key that is not a string fails here and takes the walk, which converts it.
        try:
            blob: bytes | None = _dumps(value, option=_SORT_STR_KEYS)
        except (TypeError, orjson.JSONEncodeError):
            blob = None
        if blob is not None and not self._needs_walk(blob):
            return blob, Content.EMPTY if is_empty(value) else Content.PRESENT
        try:
            value = self.normalise(value)
            blob = orjson.dumps(value, option=_SORT)
        except (RecursionError, TypeError, ValueError, orjson.JSONEncodeError):
            return None, Content.UNKNOWN
        return blob, Content.EMPTY if is_empty(value) else Content.PRESENT

    def normalise(self, value: Any, _depth: int = 0) -> Any:
        """Return ``value`` with volatile keys dropped and strings made canonical."""
        if _depth > MAX_DEPTH:
            raise RecursionError("value nested deeper than MAX_DEPTH")
        kind = type(value)  # exact types first: this walk is the slow path's hot loop
        if kind is str:
            return self.normalise_text(value)
        if kind is list:
            return self._list(value, _depth + 1)
        if kind is float:
            return value if math.isfinite(value) else None  # orjson writes these as null
        if kind is dict or isinstance(value, Mapping):
            return self._dict(value, _depth + 1)
        if isinstance(value, list | tuple):
            return self._list(value, _depth + 1)
        if kind is int:
            if _INT_MIN <= value < _INT_END:
                return value
            return str(value)  # beyond what orjson writes (int64 and uint64): as text
        if value is None or kind is bool:
            return value
        if isinstance(value, str):
            return self.normalise_text(value)
        if isinstance(value, bytes | bytearray | memoryview):
            return self.normalise_text(bytes(value).decode("utf-8", "backslashreplace"))
        if isinstance(value, float):
            return value if math.isfinite(value) else None
        if isinstance(value, int) and not isinstance(value, bool):
            if _INT_MIN <= value < _INT_END:
                return int(value)
            return str(value)
        return value

    def _dict(self, value: Mapping[Any, Any], depth: int) -> dict[str, Any]:
        """An object's members, volatile keys dropped; the common leaves are handled inline."""
        out: dict[str, Any] = {}
        volatile = self._volatile
        text = self.normalise_text
        plain = not self.scrub_values
        for k, v in value.items():
            key = k if type(k) is str else _key_text(k)
            drop = volatile.get(key)
            if drop is None:
                drop = self.is_volatile(key)
                if len(volatile) < _KEY_CACHE_ENTRIES and len(key) <= 64:
                    volatile[key] = drop
            if drop:
                continue
            kind = type(v)
            if depth > MAX_DEPTH:
                raise RecursionError("value nested deeper than MAX_DEPTH")
            if kind is str:
                # The whitespace step inline; the rest only for text that may hold a
                # temp dir (the tests of _paths_and_values, which leaves the rest alone).
                collapsed = " ".join(v.split())
                out[key] = (
                    collapsed
                    if plain
                    and "\\" not in collapsed
                    and ("/" not in collapsed or _no_temp_dir(collapsed.lower()))
                    else text(collapsed)
                )
            elif (kind is int and _INT_MIN <= v < _INT_END) or v is None or kind is bool:
                out[key] = v
            elif kind is float:
                out[key] = v if math.isfinite(v) else None
            elif kind is dict:  # what normalise does, one call fewer
                out[key] = self._dict(v, depth + 1)
            elif kind is list:
                out[key] = self._list(v, depth + 1)
            else:
                out[key] = self.normalise(v, depth)
        return out

    def _list(self, value: list[Any] | tuple[Any, ...], depth: int) -> list[Any]:
        if depth > MAX_DEPTH and value:
            raise RecursionError("value nested deeper than MAX_DEPTH")
        text, normalise = self.normalise_text, self.normalise
        return [text(v) if type(v) is str else normalise(v, depth) for v in value]

    def normalise_text(self, text: str) -> str:
        """Collapse whitespace, make path separators and temp directories canonical.

        Path steps can enable each other (a temp directory replaced inside an
        odd path makes it path-like), so they repeat until nothing changes: the
        result is a fixed point, and normalising it again is a no-op.
        """
        text = " ".join(text.split())  # the same whitespace as ``\s``, in C
        if "\\" not in text and "/" not in text and not self.scrub_values:
            return text
        for _ in range(_MAX_TEXT_PASSES):
            done = self._paths_and_values(text)
            if done == text:
                break
            text = done
        return text

    def _paths_and_values(self, text: str) -> str:
        if "\\" in text:
            if _PATHLIKE.match(text):
                text = text.replace("\\", "/")
            else:
                text = _WIN_PATH.sub(_forward_slashes, text)
        if "/" in text and not _no_temp_dir(text.lower()):
            text = _TMP_DIR.sub("$TMPDIR", text)
            if "$TMPDIR/" in text:
                text = _TMP_NAME.sub("$TMPDIR/*", text)
        if self.scrub_values:
            text = _UUID.sub("<uuid>", text)
            text = _ISO_TS.sub("<timestamp>", text)
        return text

    def is_volatile(self, key: str) -> bool:
        """Whether ``key`` is dropped before hashing."""
        low = key.lower()
        if low in self._exact:
            return True
        return any(fnmatch.fnmatchcase(low, g) for g in self._globs)

    # -- internals -----------------------------------------------------------

    @staticmethod
    def _decode(value: Any) -> Any:
        """Parse JSON text; text that is not JSON (cut at a length limit) stays text.

        JSON nested beyond orjson's parse limit is not text that happens to
        look like JSON: it is a value too deep to fingerprint.
        """
        if type(value) is str:  # the common case first
            try:
                return _loads(value)
            except orjson.JSONDecodeError as exc:
                return _TOO_DEEP if exc.msg.startswith("depth limit") else value
        if isinstance(value, bytes | bytearray | memoryview):
            raw = bytes(value)
            try:
                return orjson.loads(raw)
            except orjson.JSONDecodeError as exc:
                if exc.msg.startswith("depth limit"):
                    return _TOO_DEEP
                return raw.decode("utf-8", "backslashreplace")
        if isinstance(value, str):
            try:
                return orjson.loads(value)
            except orjson.JSONDecodeError as exc:
                return _TOO_DEEP if exc.msg.startswith("depth limit") else value
        return value

    def _needs_walk(self, blob: bytes) -> bool:
        """Whether compact JSON holds anything the Python walk would change.

        Single-byte tests gate the costlier scans. They test an int (``92 in
        blob``): a one-byte *bytes* needle costs ten times as much in CPython
        3.11 (buffer set-up). Every scan over the whole payload costs about a
        third of parsing it, so one folded copy (ASCII lower-cased, quotes read
        as spaces) serves all three: whitespace, temp paths and volatile keys.
        """
        if 92 in blob:  # backslash: an escape
            if _ESCAPE.search(blob):
                return True
            if self._globs and _ESCAPED_QUOTE.search(blob):
                return True  # a glob's byte pattern cannot step over an escaped quote
        slash = 47 in blob
        if not blob.isascii():
            for marker in _UNICODE_SPACES:
                if marker in blob:
                    return True
            if b"\xe2\x80" in blob and _E2_SPACE.search(blob):
                return True
            if self._keys is not None and (
                _FOLDS_TO_ASCII[0] in blob or _FOLDS_TO_ASCII[1] in blob
            ):
                return True
        folded = blob.translate(_FOLD)
        if (
            32 in blob
            and _TWO_SPACES.search(folded)
            and (b"  " in blob or b'" ' in blob or b' "' in blob)  # not an empty string
        ):
            return True
        if slash and (_TEMP_SCAN.search(folded) or (36 in blob and _TEMP_NAME in blob)):
            return True
        keys = self._keys
        if (
            keys is not None
            and 58 in blob  # every key is followed by a colon
            and keys.search(folded if self._keys_folded else blob.lower())
        ):
            return True
        return self.scrub_values and _SCRUB_HINT.search(blob) is not None


def _plain_key(key: str) -> bool:
    """A volatile key name that compact JSON writes as it is, and ASCII: found in folded bytes."""
    return bool(key) and key.isascii() and orjson.dumps(key)[1:-1] == key.encode()


def _key_scan(names: list[bytes]) -> re.Pattern[bytes]:
    """Finds any of ``names`` as a key in folded bytes (`` name :``), tried at each colon.

    Lookbehinds grouped by the name's last letter: most colons fail the
    group's one-byte test and never reach a whole name.
    """
    by_last: dict[int, list[bytes]] = {}
    for name in names:
        by_last.setdefault(name[-1], []).append(name)
    groups = []
    for last, group in sorted(by_last.items()):
        whole = b"|".join(b"(?<= " + re.escape(n) + b" :)" for n in group)
        groups.append(b"(?<=" + re.escape(bytes([last])) + b" :)(?:" + whole + b")")
    return re.compile(b":(?:" + b"|".join(groups) + b")")


def _no_temp_dir(low: str) -> bool:
    """Whether lower-cased text with a slash is sure to hold no temp dir nor temp name.

    Without ``/t`` the temp steps never run; without a root's end (``/tmp``,
    ``/temp``, ``/t/``, a final ``/t``) or ``$tmpdir/`` they cannot match.
    """
    return "/t" not in low or _TEMP_MARK.search(low) is None


def _key_text(key: Any) -> str:
    """A non-string key as orjson writes it, so both paths give the same bytes."""
    if key is None:
        return "null"
    if isinstance(key, bool):
        return "true" if key else "false"
    return str(key)


def _forward_slashes(match: re.Match[str]) -> str:
    return match.group(0).replace("\\", "/")


def is_empty(value: Any, _depth: int = 0) -> bool:
    """Structural emptiness: nothing but empty containers, blank strings, 0, false, null.

    Judged by walking the value rather than by a list of key names, so a new
    tool's ``{"rows": [], "rowCount": 0}`` is recognised without configuration.
    The walk stops at the first thing that is not empty, which for real
    results is within a few steps.
    """
    kind = type(value)
    if kind is str:
        return not value or value.isspace()
    if kind is dict or kind is list:
        if _depth > MAX_DEPTH:
            return False
        # Text, the usual first member, is judged here: one call fewer per level.
        for item in value.values() if kind is dict else value:
            if type(item) is str:
                if item and not item.isspace():
                    return False
            elif not is_empty(item, _depth + 1):
                return False
        return True
    if value is None or value is False:
        return True
    if kind is bool:
        return False
    if kind is int:
        return bool(value == 0)
    if kind is float:
        return bool(value == 0) or not math.isfinite(value)  # NaN and inf: written as null
    if isinstance(value, str):
        return not value or value.isspace()
    if isinstance(value, Mapping):
        return _depth <= MAX_DEPTH and all(is_empty(v, _depth + 1) for v in value.values())
    if isinstance(value, list | tuple):
        return _depth <= MAX_DEPTH and all(is_empty(v, _depth + 1) for v in value)
    if isinstance(value, int):
        return bool(value == 0)
    if isinstance(value, float):
        return bool(value == 0) or not math.isfinite(value)
    return False


_ABSENT_MARK: Final = b"\x00absent"
_UNKNOWN_MARK: Final = b"\x00unknown"


CACHE_ENTRIES: Final = 4096
"""Payload texts whose digests each :class:`Signer` remembers (per cache; digests only).

Agents stuck in a loop send the very same argument and result text again and
again, so a repeat costs a hash of the raw text instead of a parse, a
re-serialisation and a scan. Entries hold digests, not payloads: the memory
is bounded by the entry count whatever the payload size.
"""

_PRESENT: Final = Content.PRESENT
_EMPTY: Final = Content.EMPTY
_key = xxhash.xxh3_128_digest
"""128 bits, as bytes: half the cost of the same hash as an int (building a 128-bit int)."""
_new_digests: Final = Digests


@dataclass(frozen=True, slots=True)
class Signer:
    """Computes a call's :class:`Digests` with one :class:`Normaliser`.

    Thread-safe: the processor signs from many threads at once. The caches are
    plain dicts (each get or set is atomic) that are cleared when full.
    """

    normaliser: Normaliser = field(default_factory=Normaliser)
    _calls: dict[tuple[str, bytes], tuple[str, Content]] = field(
        init=False, repr=False, compare=False
    )
    _results: dict[bytes, tuple[str | None, Content]] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_calls", {})
        object.__setattr__(self, "_results", {})

    def sign(self, tool: str, arguments: Any, result: Any, status: Status | str) -> Digests:
        """Hash (tool, arguments), the result, and (tool, arguments, result, status).

        JSON text, the common case, is done in one compiled call where it is
        built: the cache keys, look-ups, canonical bytes and all three hashes,
        without the Python glue between them (measured: a quarter of a new
        call's cost, a third of a repeated one's). What it hands back
        (``None``: a lone surrogate, text its pass does not know, a status
        that is neither ``str`` nor :class:`Status`) takes the inlined path
        below: a cache look-up on a hash of the bytes, then the compiled
        canonicaliser on those same bytes, then the Python path.
        """
        normaliser = self.normaliser
        native_keys = normaliser._native_keys
        if native_keys is not None and type(arguments) is str and type(result) is str:
            signed = _native_sign(
                tool,
                arguments,
                result,
                status,
                native_keys,
                self._calls,
                self._results,
                CACHE_ENTRIES,
                _PRESENT,
                _EMPTY,
                Status,
            )
            if signed is not None:
                return _new_digests(*signed)
        if type(arguments) is str:
            calls = self._calls
            native = native_keys
            try:  # the default error handler is the fast one; lone surrogates are rare
                raw = arguments.encode()
            except UnicodeEncodeError:
                raw = arguments.encode("utf-8", "surrogatepass")
                native = None  # not valid UTF-8: for the Python path only
            key = (tool, _key(raw))
            cached = calls.get(key)
            if cached is None:  # _call_signature, inline: this is every new payload's path
                done = None if native is None else _native_canonical(raw, native)
                if done is not None:
                    blob: bytes | None = done[0]
                    content = _EMPTY if done[1] else _PRESENT
                else:
                    blob, content = normaliser._canonical(arguments)
                if blob is None:
                    blob = _ABSENT_MARK if content is Content.ABSENT else _UNKNOWN_MARK
                cached = _hash(tool.encode("utf-8", "surrogatepass") + b"\x1f" + blob), content
                if len(calls) >= CACHE_ENTRIES:
                    calls.clear()
                calls[key] = cached
            call_signature, args_content = cached
        else:
            call_signature, args_content = self._call_signature(tool, arguments)
        if type(result) is str:
            results = self._results
            native = native_keys
            try:
                raw = result.encode()
            except UnicodeEncodeError:
                raw = result.encode("utf-8", "surrogatepass")
                native = None
            rkey = _key(raw)
            done_result = results.get(rkey)
            if done_result is None:  # _result_digest, inline
                done = None if native is None else _native_canonical(raw, native)
                if done is not None:
                    done_result = _hash(done[0]), _EMPTY if done[1] else _PRESENT
                else:
                    blob, content = normaliser._canonical(result)
                    done_result = (None if blob is None else _hash(blob)), content
                if len(results) >= CACHE_ENTRIES:
                    results.clear()
                results[rkey] = done_result
            result_digest, result_content = done_result
        else:
            result_digest, result_content = self._result_digest(result)
        if type(status) is not str and not isinstance(status, Status):
            status = str(status)
        # Concatenation reads a str enum's own text ("ok") without calling __format__.
        part = result_content.value if result_digest is None else result_digest
        signature = _hash((call_signature + "\x1f" + part + "\x1f" + status).encode())
        return _new_digests(call_signature, result_digest, signature, args_content, result_content)

    def _call_signature(self, tool: str, arguments: Any) -> tuple[str, Content]:
        blob, content = self.normaliser.canonical(arguments)
        if blob is None:
            blob = _ABSENT_MARK if content is Content.ABSENT else _UNKNOWN_MARK
        return _hash(tool.encode("utf-8", "surrogatepass") + b"\x1f" + blob), content

    def _result_digest(self, result: Any) -> tuple[str | None, Content]:
        blob, content = self.normaliser.canonical(result)
        return (None if blob is None else _hash(blob)), content


def digest(value: Any, normaliser: Normaliser | None = None) -> str | None:
    """The xxh3 digest of one normalised value, or ``None`` if it has no fingerprint."""
    blob, _ = (normaliser or Normaliser()).canonical(value)
    return None if blob is None else _hash(blob)


def parse_volatile_keys(spec: str | Iterable[str]) -> tuple[str, ...]:
    """Accept ``"ts,nonce,*_at"`` or an iterable; ``+`` in front adds to the defaults."""
    if isinstance(spec, str):
        extend = spec.startswith("+")
        items = tuple(p.strip() for p in spec.lstrip("+").split(",") if p.strip())
        return DEFAULT_VOLATILE_KEYS + items if extend else items
    return tuple(spec)
