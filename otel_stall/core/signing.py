"""Normalisation and hashing: how two tool calls come to "look the same".

A signature is (tool, normalised arguments, result digest, status), hashed with
xxh3. Normalisation removes the noise that would make every call look unique
(volatile keys, temp paths, whitespace, key order) and nothing more, because
aggressive normalisation collapses genuinely different calls into one
signature and produces false loops. That is also why scrubbing UUIDs and
timestamps inside string values is an option that is off by default: an id
in a value is often the very thing that makes two calls different.

The canonical bytes are a function of the payload alone: the same call signs
the same on every host, whatever its temp directory, locale or timezone, so a
live signature, a replayed one and a gateway's agree. Temp directories are
recognised by a fixed set of roots (``/tmp``, ``/var/tmp``, macOS's
``/var/folders/*/*/T``, Windows's ``AppData/Local/Temp``), never by asking the
host where its own is.

One definition, in Python: :meth:`Normaliser.reference` decodes the value,
:meth:`Normaliser.normalise` walks it and orjson writes it with sorted keys.
JSON text, the common case, first goes to the compiled canonicaliser
(``_canon.c``) where it is built: one pass over the bytes that writes the same
canonical bytes with no Python objects, several times faster; a dict or a list
goes there too, as the JSON text orjson writes for it. The compiled pass hands
back (``None``) whatever it does not know, and the reference does that
payload; the two are checked against each other by property tests. The same
pass gives a list result's item digests (:meth:`Normaliser.canonical_items`):
the compiled pass notes where the items lie as it writes them, the reference
writes each item of the value it normalised, so neither parses the bytes again.
"""

from __future__ import annotations

import enum
import fnmatch
import math
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final, TypeAlias

import orjson
import xxhash

from otel_stall.core.records import ABSENT, Status
from otel_stall.core.volatile import DEFAULT_VOLATILE_KEYS, RESULT_VOLATILE_KEYS, is_glob, squash


def _not_built(
    raw: bytes,
    volatile: tuple[bytes, ...],
    hasher: Callable[[bytes], str] | None,
    run_folders: bool,
    /,
) -> tuple[bytes, bool, tuple[str, ...] | None] | None:
    """Stands in for the compiled canonicaliser where it is not built: hands everything back."""
    return None


try:
    from otel_stall.core._canon import canonical as _native_canonical
except ImportError:  # not built (no compiler at install time): the Python reference does it all
    _native_canonical = _not_built

NATIVE_AVAILABLE: Final = _native_canonical is not _not_built
"""Whether the compiled canonicaliser (``otel_stall.core._canon``) is built here.

It is an accelerator only: it gives the very bytes the Python reference gives,
and hands anything it does not know back to it.
"""

MAX_DEPTH: Final = 256
"""Deeper values are not fingerprinted: they count as unknown, never as a loop.

orjson itself refuses to write deeper than about 255 levels, so that is where
the limit falls in practice; this one bounds the Python walk.
"""

_SORT: Final = orjson.OPT_SORT_KEYS | orjson.OPT_NON_STR_KEYS
_hash = xxhash.xxh3_64_hexdigest
_key = xxhash.xxh3_128_digest
"""The caches' key: 128 bits of the payload text, as bytes (cheaper than as an int)."""
_MAX_TEXT_PASSES: Final = 4
_INT_MIN: Final = -(1 << 63)
_INT_END: Final = 1 << 64
_NATIVE_MAX_KEYS: Final = 128
"""More volatile names than the compiled canonicaliser holds: the Python reference does it."""


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


@dataclass(slots=True)
class Digests:
    """The three hashes of one call, and what was known about its payloads.

    Not frozen, as the per-call records are not (see :mod:`otel_stall.core.records`).
    """

    call_signature: str
    result_digest: str | None
    signature: str
    arguments: Content
    result: Content
    items: tuple[str, ...] | None = None
    """Digests of a list result's items (see :data:`ITEM_KEYS`); ``None``: not a list."""
    sketch: int | None = None
    """The result's near-duplicate sketch (``core/rules/near_duplicate.py``), where asked for."""

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
_TEMP_ROOTS: Final = (
    r"(?:/private)?/var/folders/[^/]+/[^/]+/T",  # macOS
    r"[A-Za-z]:/Users/[^/]+/AppData/Local/Temp",  # Windows, once backslashes are slashes
    r"(?:/var)?/tmp",  # Linux and the BSDs
)
"""The temp roots of every platform, the same on every host: never ``tempfile.gettempdir()``."""
_TMP_DIR = re.compile(r"(?<![\w.$])(?:" + "|".join(_TEMP_ROOTS) + r")(?=/|$)", re.IGNORECASE)
_TMP_NAME = re.compile(r"\$TMPDIR/(?:tmp[a-z0-9_]{8}|pytest-of-[^/]+/pytest-\d+)(?=/|$)")
"""A name ``tempfile`` or pytest made under a temp root: it differs on every run."""
_RUN_NAME = re.compile(
    _TMP_NAME.pattern
    + r"|\$TMPDIR/(?:[A-Za-z0-9._-]*[._-])?(?=[A-Za-z]*[0-9])[A-Za-z0-9]{6,}(?=[/ ]|$)"
)
"""In results, also any folder name under a temp root that ends in 6 or more letters and
digits with a digit among them (``tmpk3j9x2``, ``tmp.Xa81kQ0pLm``, ``job-20240611``,
``xyz123``): the per-run folders of tempfile, mktemp, Node, Go and sandboxes."""
_TEMP_MARK = re.compile(r"/t(?:mp|emp|/|$)|\$tmpdir/")
"""How every temp root ends (``/tmp``, ``/Temp``, ``/T``), or a temp name, in lower-cased text."""


def _may_hold_temp_dir(text: str) -> bool:
    """Whether the temp steps run on ``text``: it has a ``/t`` and a temp root's end or name.

    Part of the definition, not only a shortcut: a ``$TMPDIR/pytest-of-...``
    name in text with no ``/t`` stays as it is (the compiled pass does the same).
    """
    low = text.lower()
    return "/t" in low and _TEMP_MARK.search(low) is not None


def _forward_slashes(match: re.Match[str]) -> str:
    return match.group(0).replace("\\", "/")


def _key_text(key: Any) -> str:
    """A non-string key as orjson writes it, so text and decoded values give the same bytes."""
    if key is None:
        return "null"
    if isinstance(key, bool):
        return "true" if key else "false"
    return str(key)


def _plain_key(key: str) -> bool:
    """A volatile name the compiled pass can match: ASCII that JSON writes as it is."""
    return bool(key) and key.isascii() and orjson.dumps(key)[1:-1] == key.encode()


def _strict_utf8(text: str) -> bytes | None:
    """``text`` as UTF-8, or ``None`` if it has none (a lone surrogate): all the C pass reads."""
    try:
        return text.encode()
    except UnicodeEncodeError:
        return None


_AS_JSON: Final = (
    orjson.OPT_PASSTHROUGH_DATACLASS
    | orjson.OPT_PASSTHROUGH_DATETIME
    | orjson.OPT_PASSTHROUGH_SUBCLASS
)


def _json_text(value: dict[Any, Any] | list[Any]) -> bytes | None:
    """``value`` as JSON text, or ``None`` where its text would not mean what the walk sees.

    orjson refuses (TypeError) big integers, non-string keys, subclasses of
    the JSON types, dataclasses, dates and anything else it does not know;
    those take the reference. It writes an enum member by its value, as the
    reference reads one.
    """
    try:
        return orjson.dumps(value, option=_AS_JSON)
    except TypeError:  # orjson.JSONEncodeError is one
        return None


def _decode(value: Any) -> Any:
    """Parse JSON text; text that is not JSON (cut at a length limit) stays text.

    JSON nested beyond orjson's parse limit is not text that happens to look
    like JSON: it is a value too deep to fingerprint.
    """
    if isinstance(value, str):
        text: str | bytes = value
    elif isinstance(value, bytes | bytearray | memoryview):
        text = bytes(value)
    else:
        return value
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError as exc:
        if exc.msg.startswith("depth limit"):
            return _TOO_DEEP
        return text if isinstance(text, str) else text.decode("utf-8", "backslashreplace")


def _scalar(value: Any) -> Any:
    """A number as orjson can write it: big integers as text, NaN and infinities as null."""
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, int):
        return int(value) if _INT_MIN <= value < _INT_END else str(value)
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    return value


Hasher: TypeAlias = Callable[[bytes], str]
Canonical: TypeAlias = tuple[bytes | None, Content, tuple[str, ...] | None]
"""Canonical bytes, what the content was, and the digests of a list result's items."""

ITEM_KEYS: Final = ("items", "results", "hits", "documents")
"""Where a result object holds its list, in this order: the list is its items.

``_canon.c`` has the same names (``item_name``)."""


def _listed(value: Any) -> list[Any] | None:
    """The list a normalised result holds as its items: itself, or its first listed member."""
    if type(value) is list:
        return value
    if type(value) is dict:
        for name in ITEM_KEYS:
            found = value.get(name)
            if type(found) is list:
                return found
    return None


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
    run_folders: bool = False
    """Fold per-run temp folder names (``_RUN_NAME``) too: on for results, where a fresh
    sandbox per call would make every result new; off for arguments, where two folders
    are two calls."""
    _exact: frozenset[str] = field(init=False, repr=False, compare=False)
    _globs: tuple[str, ...] = field(init=False, repr=False, compare=False)
    _native_keys: tuple[bytes, ...] | None = field(init=False, repr=False, compare=False)
    """The volatile names for the compiled pass; ``None``: only the reference knows the rules."""

    def __post_init__(self) -> None:
        keys = tuple(k.lower() for k in self.volatile_keys)
        globs = tuple(k for k in keys if any(c in k for c in "*?["))
        exact = frozenset(squash(k) for k in keys if k not in globs)
        object.__setattr__(self, "_exact", exact)
        object.__setattr__(self, "_globs", globs)
        object.__setattr__(self, "_native_keys", self._compiled_keys(exact, globs))

    def _compiled_keys(
        self, exact: frozenset[str], globs: tuple[str, ...]
    ) -> tuple[bytes, ...] | None:
        """The names the compiled pass drops, if it can do this normaliser's job at all.

        It knows plain ASCII names only: globs, scrubbing and other names are
        the reference's alone.
        """
        compiled = (
            self.native
            and NATIVE_AVAILABLE
            and not self.scrub_values
            and not globs
            and len(exact) <= _NATIVE_MAX_KEYS
            and all(_plain_key(k) for k in exact)
        )
        return tuple(sorted(k.encode() for k in exact)) if compiled else None

    # -- public API ----------------------------------------------------------

    def canonical(self, value: Any) -> tuple[bytes | None, Content]:
        """Canonical bytes of ``value`` and what kind of content it was.

        Bytes are ``None`` when the content is absent or cannot be fingerprinted.
        """
        blob, content, _ = self._canonical(value, None)
        return blob, content

    def canonical_items(self, value: Any) -> Canonical:
        """:meth:`canonical`, and the digests of a list result's items from the same pass.

        A list result is a JSON array, or an object with a list under one of
        :data:`ITEM_KEYS` (the first it holds, in that order); each item is
        hashed as its own canonical bytes, which are a slice of the whole's.
        ``None`` for any other value. Found while the bytes are written, not by
        parsing them again: callgrind, ``bench/detector_instructions.py --mode
        sign`` less ``--mode setup``, items cost 43.1k instructions a call with
        the re-parse and 4.2k now, of 97.1k and 60.0k for signing as a whole.
        """
        return self._canonical(value, _hash)

    def canonical_text(self, text: str, utf8: bytes | None) -> tuple[bytes | None, Content]:
        """:meth:`canonical` of JSON text; ``utf8``: ``text.encode()``, ``None`` if it has none."""
        blob, content, _ = self._text(text, utf8, None)
        return blob, content

    def reference(self, value: Any) -> tuple[bytes | None, Content]:
        """:meth:`canonical` by the definition: decode, :meth:`normalise`, write sorted, compact."""
        blob, content, _ = self._reference(value, None)
        return blob, content

    def reference_items(self, value: Any) -> Canonical:
        """:meth:`canonical_items` by the definition: the items of the :meth:`normalise` d value."""
        return self._reference(value, _hash)

    # -- the two passes --------------------------------------------------------

    def _canonical(self, value: Any, hasher: Hasher | None) -> Canonical:
        """Canonical bytes, content and (with ``hasher``) item digests, compiled where it can."""
        if type(value) is str:
            return self._text(value, _strict_utf8(value), hasher)
        if self._native_keys is not None and (type(value) is dict or type(value) is list):
            done = self._compiled(_json_text(value), hasher)
            if done is not None:
                return done
        return self._reference(value, hasher)

    def _text(self, text: str, utf8: bytes | None, hasher: Hasher | None) -> Canonical:
        return self._compiled(utf8, hasher) or self._reference(text, hasher)

    def _compiled(self, utf8: bytes | None, hasher: Hasher | None) -> Canonical | None:
        """The compiled pass over JSON text where it is built and wanted; ``None``: the reference's.

        A dict or a list (a JSONL line's payload, an OTLP kvlist) comes here as
        the JSON text orjson writes for it (:func:`_json_text`). Measured on
        1.2 KB payloads: a tenth of the instructions of the Python walk; a JSONL
        replay of 20,000 calls in a third of the CPU time it takes walking.
        """
        keys = self._native_keys
        if keys is None or utf8 is None:
            return None
        done = _native_canonical(utf8, keys, hasher, self.run_folders)
        if done is None:
            return None
        return done[0], Content.EMPTY if done[1] else Content.PRESENT, done[2]

    def _reference(self, value: Any, hasher: Hasher | None) -> Canonical:
        """The definition: decode, :meth:`normalise`, write sorted and compact, hash the items."""
        if value is ABSENT:
            return None, Content.ABSENT, None
        decoded = _decode(value)
        if decoded is _TOO_DEEP:
            return None, Content.UNKNOWN, None
        try:
            normalised = self.normalise(decoded)
            blob = orjson.dumps(normalised, option=_SORT)
        except (RecursionError, TypeError, ValueError, orjson.JSONEncodeError):
            return None, Content.UNKNOWN, None
        content = Content.EMPTY if is_empty(normalised) else Content.PRESENT
        if hasher is None or (listed := _listed(normalised)) is None:
            return blob, content, None
        # Each item written alone, sorted, is its slice of ``blob``: orjson writes it the same.
        return blob, content, tuple(hasher(orjson.dumps(item, option=_SORT)) for item in listed)

    def normalise(self, value: Any, _depth: int = 0) -> Any:
        """Return ``value`` with volatile keys dropped and strings made canonical."""
        if isinstance(value, str):
            return self.normalise_text(value)
        if isinstance(value, Mapping | list | tuple):
            if _depth >= MAX_DEPTH:
                raise RecursionError("value nested deeper than MAX_DEPTH")
            if isinstance(value, Mapping):
                return self._members(value, _depth + 1)
            return [self.normalise(item, _depth + 1) for item in value]
        if isinstance(value, bytes | bytearray | memoryview):
            return self.normalise_text(bytes(value).decode("utf-8", "backslashreplace"))
        if isinstance(value, enum.Enum):  # by its value, as JSON text (and orjson) has it
            return self.normalise(value.value, _depth)
        return _scalar(value)

    def _members(self, value: Mapping[Any, Any], depth: int) -> dict[str, Any]:
        """An object's members under their JSON key text; volatile ones dropped, not walked."""
        out: dict[str, Any] = {}
        for key, item in value.items():
            name = key if type(key) is str else _key_text(key)
            if not self.is_volatile(name):
                out[name] = self.normalise(item, depth)
        return out

    def normalise_text(self, text: str) -> str:
        """Collapse whitespace, make path separators and temp directories canonical.

        Path steps can enable each other (a temp directory replaced inside an
        odd path makes it path-like), so they repeat until nothing changes: the
        result is a fixed point, and normalising it again is a no-op.
        """
        text = " ".join(text.split())  # the whitespace of str.isspace, Unicode's included
        if "\\" not in text and "/" not in text and not self.scrub_values:
            return text  # no step below would change it
        for _ in range(_MAX_TEXT_PASSES):
            done = self._paths_and_values(text)
            if done == text:
                break
            text = done
        return text

    def _paths_and_values(self, text: str) -> str:
        """One pass of the path, temp-dir and (optional) scrubbing steps."""
        if "\\" in text:
            if _PATHLIKE.match(text):
                text = text.replace("\\", "/")
            else:
                text = _WIN_PATH.sub(_forward_slashes, text)
        if _may_hold_temp_dir(text):
            text = _TMP_DIR.sub("$TMPDIR", text)
            text = (_RUN_NAME if self.run_folders else _TMP_NAME).sub("$TMPDIR/*", text)
        if self.scrub_values:
            text = _UUID.sub("<uuid>", text)
            text = _ISO_TS.sub("<timestamp>", text)
        return text

    def is_volatile(self, key: str) -> bool:
        """Whether ``key`` is dropped before hashing: ignoring case, ``_`` and ``-``.

        Globs match the key as it is written, ignoring case only.
        """
        low = key.lower()
        if squash(low) in self._exact:
            return True
        return any(fnmatch.fnmatchcase(low, g) for g in self._globs)

    def for_results(self, edits: Iterable[str] = ()) -> Normaliser:
        """The normaliser for results: :data:`RESULT_VOLATILE_KEYS` dropped, run folders folded.

        ``edits`` (``+key``, ``-key``) add or remove names, in order; a removal
        takes the name in every spelling, from the defaults or the policy's keys.
        """
        keys = [*self.volatile_keys, *RESULT_VOLATILE_KEYS]
        for edit in edits:
            name = edit[1:] if edit[:1] in ("+", "-") else edit
            if edit.startswith("-"):
                gone = squash(name.lower())
                keys = [k for k in keys if k != name and squash(k.lower()) != gone]
            else:
                keys.append(name)
        volatile = tuple(dict.fromkeys(keys))
        return Normaliser(volatile, self.scrub_values, self.native, run_folders=True)


def is_empty(value: Any, _depth: int = 0) -> bool:
    """Structural emptiness: nothing but empty containers, blank strings, 0, false, null.

    Judged by walking the value rather than by a list of key names, so a new
    tool's ``{"rows": [], "rowCount": 0}`` is recognised without configuration.
    The walk stops at the first thing that is not empty, which for real
    results is within a few steps.
    """
    if isinstance(value, str):
        return not value or value.isspace()
    if isinstance(value, Mapping | list | tuple):
        items = value.values() if isinstance(value, Mapping) else value
        return _depth <= MAX_DEPTH and all(is_empty(item, _depth + 1) for item in items)
    if value is None or value is False:
        return True
    if isinstance(value, bool):
        return False
    if isinstance(value, int):
        return bool(value == 0)
    if isinstance(value, float):
        return bool(value == 0) or not math.isfinite(value)  # NaN and inf: written as null
    return False


# -- signing -----------------------------------------------------------------

CACHE_ENTRIES: Final = 4096
"""Payload texts whose digests each :class:`Signer` remembers (per cache; digests only).

Agents stuck in a loop send the very same argument and result text again and
again, so a repeat costs a hash of the raw text instead of a canonical pass.
Entries hold digests, not payloads: the memory is bounded by the entry count
whatever the payload size, and by :data:`CACHE_ITEMS` for list results.
"""

CACHE_ITEMS: Final = 32
"""Item digests a remembered result may hold; a longer list result is not remembered.

Each item digest is a 16-hex string (about 65 bytes): at most about 8.5 MB per
cache however long the lists (issue 27: 4,096 results of 2,000 new items each
had held 120,000 digests). A repeated long list pays its canonical pass again.
"""

_ABSENT_MARK: Final = b"\x00absent"
_UNKNOWN_MARK: Final = b"\x00unknown"


def _text_key(text: str) -> tuple[bytes, bytes | None]:
    """The cache key of payload text (a hash of its bytes), and its UTF-8 if it has one."""
    utf8 = _strict_utf8(text)
    raw = utf8 if utf8 is not None else text.encode("utf-8", "surrogatepass")
    return _key(raw), utf8


def _call_digest(tool: str, blob: bytes | None, content: Content) -> tuple[str, Content]:
    """The call signature: tool and canonical arguments, or a mark for what has none."""
    if blob is None:
        blob = _ABSENT_MARK if content is Content.ABSENT else _UNKNOWN_MARK
    return _hash(tool.encode("utf-8", "surrogatepass") + b"\x1f" + blob), content


def _result_digests(
    blob: bytes | None, content: Content, items: tuple[str, ...] | None
) -> tuple[str | None, Content, tuple[str, ...] | None]:
    """The result digest (``None``: no canonical bytes) and, for present content, its items."""
    digest = None if blob is None else _hash(blob)
    return digest, content, items if content is Content.PRESENT else None


def _status_text(status: Status | str) -> str:
    """What a status signs as: a :class:`Status` or text as it is, anything else as ``str()``."""
    if type(status) is str or isinstance(status, Status):
        return status
    return str(status)


def _remember(cache: dict[Any, Any], key: Any, value: Any) -> None:
    """Store in a bounded cache: a full one is cleared first (each dict operation is atomic)."""
    if len(cache) >= CACHE_ENTRIES:
        cache.clear()
    cache[key] = value


_ResultDigests: TypeAlias = tuple[str | None, Content, tuple[str, ...] | None]
_Results: TypeAlias = tuple["Normaliser", dict[bytes, _ResultDigests]]


@dataclass(frozen=True, slots=True)
class Signer:
    """Computes a call's :class:`Digests` with one :class:`Normaliser`.

    Results are normalised by the same normaliser made for results
    (:meth:`Normaliser.for_results`): :data:`RESULT_VOLATILE_KEYS` dropped too,
    per-run temp folders folded, and a tool's own edits (:attr:`result_keys`).

    Thread-safe: the processor signs from many threads at once. The caches are
    plain dicts (each get or set is atomic) that are cleared when full.
    """

    normaliser: Normaliser = field(default_factory=Normaliser)
    items: bool = True
    """Work out a list result's :attr:`Digests.items` (the ``item_novelty`` rule reads them)."""
    sketch: Callable[[Any], int | None] | None = None
    """Fills :attr:`Digests.sketch` of a captured result (``None``: not asked for)."""
    result_keys: tuple[tuple[str, tuple[str, ...]], ...] = ()
    """Per tool (a name or a glob), edits to its results' volatile keys: ``+key`` adds,
    ``-key`` removes; see :func:`parse_result_keys`. Globs apply first, names after."""
    _calls: dict[tuple[str, bytes], tuple[str, Content]] = field(
        init=False, repr=False, compare=False
    )
    _results: _Results = field(init=False, repr=False, compare=False)
    """How results are signed unless a tool has its own edits: the normaliser and its cache."""
    _tools: dict[str, _Results] = field(init=False, repr=False, compare=False)
    """Tools with their own edits, by name, once looked up (a bounded cache)."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "_calls", {})
        object.__setattr__(self, "_results", (self.normaliser.for_results(), {}))
        object.__setattr__(self, "_tools", {})

    def sign(self, tool: str, arguments: Any, result: Any, status: Status | str) -> Digests:
        """Hash (tool, arguments), the result, and (tool, arguments, result, status)."""
        call_signature, args_content = self._call_signature(tool, arguments)
        results = self._results if not self.result_keys else self._results_of(tool)
        result_digest, result_content, items = self._result_digest(result, *results)
        part = result_content.value if result_digest is None else result_digest
        # Concatenation reads a str enum's own text ("ok"), whatever its __format__.
        signature = _hash((call_signature + "\x1f" + part + "\x1f" + _status_text(status)).encode())
        digests = Digests(
            call_signature, result_digest, signature, args_content, result_content, items
        )
        if self.sketch is not None and result_content is Content.PRESENT:
            digests.sketch = self.sketch(result)
        return digests

    def _call_signature(self, tool: str, arguments: Any) -> tuple[str, Content]:
        """The call signature; for text, remembered by a hash of the text."""
        normaliser = self.normaliser
        if type(arguments) is not str:
            return _call_digest(tool, *normaliser.canonical(arguments))
        key, utf8 = _text_key(arguments)
        cached = self._calls.get((tool, key))
        if cached is None:
            cached = _call_digest(tool, *normaliser.canonical_text(arguments, utf8))
            _remember(self._calls, (tool, key), cached)
        return cached

    def _result_digest(
        self, result: Any, normaliser: Normaliser, cache: dict[bytes, _ResultDigests]
    ) -> _ResultDigests:
        """The result digest and item digests; for text, remembered by a hash of the text."""
        hasher = _hash if self.items else None
        if type(result) is not str:
            return _result_digests(*normaliser._canonical(result, hasher))
        key, utf8 = _text_key(result)
        cached = cache.get(key)
        if cached is None:
            cached = _result_digests(*normaliser._text(result, utf8, hasher))
            items = cached[2]
            if items is None or len(items) <= CACHE_ITEMS:
                _remember(cache, key, cached)
        return cached

    def _results_of(self, tool: str) -> _Results:
        """How ``tool``'s results are signed: with its edits, if the policy names it."""
        found = self._tools.get(tool)
        if found is None:
            ordered = sorted(self.result_keys, key=lambda entry: not is_glob(entry[0]))
            edits = [e for name, es in ordered if fnmatch.fnmatchcase(tool, name) for e in es]
            found = (self.normaliser.for_results(edits), {}) if edits else self._results
            _remember(self._tools, tool, found)
        return found


def digest(value: Any, normaliser: Normaliser | None = None) -> str | None:
    """The xxh3 digest of one normalised value, or ``None`` if it has no fingerprint."""
    blob, _ = (normaliser or Normaliser()).canonical(value)
    return None if blob is None else _hash(blob)
