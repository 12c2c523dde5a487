"""Normalisation and hashing: how two tool calls come to "look the same".

A signature is (tool, normalised arguments, result digest, status), hashed with
xxh3. Normalisation removes the noise that would make every call look unique
(volatile keys, temp paths, whitespace, key order) and nothing more, because
aggressive normalisation collapses genuinely different calls into one
signature and produces false loops. That is also why scrubbing UUIDs and
timestamps inside string values is an option that is off by default: an id
in a value is often the very thing that makes two calls different.

The fast path parses JSON and re-serialises it with sorted keys in C (orjson),
then scans the compact bytes once for anything that needs the Python walk.
Most payloads never take the walk.
"""

from __future__ import annotations

import enum
import fnmatch
import math
import re
import tempfile
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

import orjson
import xxhash

from otel_stall.records import ABSENT, Status

DEFAULT_VOLATILE_KEYS: Final[tuple[str, ...]] = (
    "ts",
    "timestamp",
    "request_id",
    "trace_id",
    "span_id",
    "nonce",
)
"""Keys dropped at any depth before hashing: they differ on every call by design."""

MAX_DEPTH: Final = 200
"""Deeper values are not fingerprinted: they count as unknown, never as a loop."""

_SORT: Final = orjson.OPT_SORT_KEYS | orjson.OPT_NON_STR_KEYS
_hash = xxhash.xxh3_64_hexdigest


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
        return self in (Content.PRESENT, Content.EMPTY)


@dataclass(frozen=True, slots=True)
class Digests:
    """The three hashes of one call, and what was known about its payloads."""

    call_signature: str
    result_digest: str | None
    signature: str
    arguments: Content
    result: Content


# -- strings -----------------------------------------------------------------

_WS = re.compile(r"\s+")
_PATHLIKE = re.compile(r'^(?:[A-Za-z]:|\.{1,2})?[\\/]?[^\\/\s:*?"<>|]+(?:[\\/][^\\/\s:*?"<>|]*)+$')
_UUID = re.compile(
    r"\b[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\b"
)
_ISO_TS = re.compile(
    r"\b\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(?::\d{2}(?:[.,]\d+)?)?(?:Z|[+-]\d{2}:?\d{2})?\b"
)
_TMP_NAME = re.compile(r"\$TMPDIR/(?:tmp[a-z0-9_]{8}|pytest-of-[^/]+/pytest-\d+)(?=/|$)")


def _temp_dir_patterns() -> re.Pattern[str]:
    roots = [
        r"(?:/private)?/var/folders/[^/]+/[^/]+/T",
        r"[A-Za-z]:/Users/[^/]+/AppData/Local/Temp",
        r"(?:/var)?/tmp",
    ]
    here = tempfile.gettempdir().replace("\\", "/").rstrip("/")
    if here and here not in ("/tmp", "/var/tmp"):
        roots.insert(0, re.escape(here))
    return re.compile(r"(?<![\w.$])(?:" + "|".join(roots) + r")(?=/|$)", re.IGNORECASE)


_TMP_DIR = _temp_dir_patterns()

# Bytes in compact JSON that mean a string may need canonicalising: whitespace
# that is not a single inner space, backslashes (escapes, Windows paths), and
# temp directories. A false alarm costs only the slower walk.
_STRING_MARKERS: Final = (
    rb"  |\" | \"|\\[ntrfbu\\]|/tmp|/var/folders/|AppData"
    rb"|\xc2[\x85\xa0]|\xe1\x9a\x80|\xe2\x80[\x80-\x8a\xa8\xa9\xaf]|\xe2\x81\x9f|\xe3\x80\x80"
)


def _glob_to_bytes_regex(pattern: str) -> bytes:
    out = []
    for ch in pattern:
        if ch == "*":
            out.append(rb'[^"\\]*')
        elif ch == "?":
            out.append(rb'[^"\\]')
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
    _exact: frozenset[str] = field(init=False, repr=False, compare=False)
    _globs: tuple[str, ...] = field(init=False, repr=False, compare=False)
    _markers: re.Pattern[bytes] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        keys = tuple(k.lower() for k in self.volatile_keys)
        globs = tuple(k for k in keys if any(c in k for c in "*?["))
        object.__setattr__(self, "_exact", frozenset(k for k in keys if k not in globs))
        object.__setattr__(self, "_globs", globs)
        alternatives = [re.escape(k).encode() for k in self._exact]
        alternatives += [_glob_to_bytes_regex(g) for g in globs if "[" not in g]
        parts = [_STRING_MARKERS]
        if alternatives:
            parts.append(rb'"(?:' + rb"|".join(alternatives) + rb')":')
        if any("[" in g for g in globs):
            parts.append(rb'":')  # character classes: always walk
        if self.scrub_values:
            parts.append(rb"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-|\d{4}-\d{2}-\d{2}[T ]\d{2}:")
        marker = re.compile(b"|".join(parts), re.IGNORECASE)
        object.__setattr__(self, "_markers", marker)

    # -- public API ----------------------------------------------------------

    def canonical(self, value: Any) -> tuple[bytes | None, Content]:
        """Canonical bytes of ``value`` and what kind of content it was.

        Bytes are ``None`` when the content is absent or cannot be fingerprinted.
        """
        if value is ABSENT:
            return None, Content.ABSENT
        value = self._decode(value)
        blob = self._fast(value)
        if blob is None or self._markers.search(blob) is not None:
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
        if isinstance(value, str):
            return self.normalise_text(value)
        if isinstance(value, Mapping):
            depth = _depth + 1
            return {
                str(k): self.normalise(v, depth)
                for k, v in value.items()
                if not self.is_volatile(str(k))
            }
        if isinstance(value, list | tuple):
            depth = _depth + 1
            return [self.normalise(v, depth) for v in value]
        if isinstance(value, bytes | bytearray | memoryview):
            return self.normalise_text(bytes(value).decode("utf-8", "backslashreplace"))
        if isinstance(value, float) and math.isnan(value):  # orjson writes NaN as null
            return None
        if isinstance(value, int) and not isinstance(value, bool) and abs(value) >= 1 << 63:
            return str(value)
        return value

    def normalise_text(self, text: str) -> str:
        """Collapse whitespace, make path separators and temp directories canonical."""
        text = _WS.sub(" ", text).strip()
        if "\\" in text and _PATHLIKE.match(text):
            text = text.replace("\\", "/")
        if "/" in text:
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
        """Parse JSON text; text that is not JSON (cut at a length limit) stays text."""
        if isinstance(value, bytes | bytearray | memoryview):
            raw = bytes(value)
            try:
                return orjson.loads(raw)
            except orjson.JSONDecodeError:
                return raw.decode("utf-8", "backslashreplace")
        if isinstance(value, str):
            try:
                return orjson.loads(value)
            except orjson.JSONDecodeError:
                return value
        return value

    @staticmethod
    def _fast(value: Any) -> bytes | None:
        try:
            return orjson.dumps(value, option=_SORT)
        except (TypeError, orjson.JSONEncodeError):
            return None


def is_empty(value: Any, _depth: int = 0) -> bool:
    """Structural emptiness: nothing but empty containers, blank strings, 0, false, null.

    Judged by walking the value rather than by a list of key names, so a new
    tool's ``{"rows": [], "rowCount": 0}`` is recognised without configuration.
    """
    if value is None or value is False:
        return True
    if isinstance(value, str):
        return not value or value.isspace()
    if isinstance(value, bool):
        return False
    if isinstance(value, int | float):
        return value == 0
    if _depth > MAX_DEPTH:
        return False
    if isinstance(value, Mapping):
        return all(is_empty(v, _depth + 1) for v in value.values())
    if isinstance(value, list | tuple):
        return all(is_empty(v, _depth + 1) for v in value)
    return False


_ABSENT_MARK: Final = b"\x00absent"
_UNKNOWN_MARK: Final = b"\x00unknown"


@dataclass(frozen=True, slots=True)
class Signer:
    """Computes a call's :class:`Digests` with one :class:`Normaliser`."""

    normaliser: Normaliser = field(default_factory=Normaliser)

    def sign(self, tool: str, arguments: Any, result: Any, status: Status | str) -> Digests:
        """Hash (tool, arguments), the result, and (tool, arguments, result, status)."""
        canonical = self.normaliser.canonical
        args_blob, args_content = canonical(arguments)
        result_blob, result_content = canonical(result)
        tool_bytes = tool.encode("utf-8", "surrogatepass")
        if args_blob is None:
            args_blob = _ABSENT_MARK if args_content is Content.ABSENT else _UNKNOWN_MARK
        call_signature = _hash(b"%b\x1f%b" % (tool_bytes, args_blob))
        result_digest = None if result_blob is None else _hash(result_blob)
        status_text = status.value if isinstance(status, Status) else str(status)
        result_part = result_digest or result_content.value
        signature = _hash(f"{call_signature}\x1f{result_part}\x1f{status_text}".encode())
        return Digests(call_signature, result_digest, signature, args_content, result_content)


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
