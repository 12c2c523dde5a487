"""Read stored traces, whatever their format, one message at a time.

Each file's format is sniffed from its first bytes, never from a flag:

- gzip (``1f 8b``) and zstd (``28 b5 2f fd``) wrap a whole file; the content
  inside is sniffed again;
- OTLP/JSON lines: one ``{"resourceSpans": [...]}`` object per line, as the
  collector's file exporter (format json) writes;
- a single pretty-printed OTLP/JSON document;
- the reference's JSONL tool-call format (``"type": "tool_call"`` lines),
  handed to :mod:`otel_stall.offline.jsonl`;
- length-prefixed protobuf (4-byte big-endian length, then a ``TracesData``),
  as the file exporter's proto format writes, and its legacy zstd mode, where
  each message is zstd-compressed on its own.

A binary OTLP file can never start with ``{``: that first byte would be a
length of about 2 GB. So ``{``, ``[`` or whitespace means JSON, and a length
under 512 MiB followed by a ``TracesData`` field (or a zstd frame) means
length-prefixed protobuf. JSON is OTLP when ``resourceSpans`` shows in its
first 64 KiB, and tool calls when a tool or model call comes first among its
first lines. Anything else is :data:`Format.UNRECOGNISED`: one unit says so,
and the caller decides whether that is an error (a file named by the user) or
a file to skip (one found in a directory).

Nothing here raises for bad content: every problem becomes an
:class:`~otel_stall.core.errors.InputError` with the file and the line (text) or
byte offset (binary), and reading goes on with the next line, message or file.
Memory is bounded by ``max_message``: a longer line, document or message, or
a zstd message that inflates past it, is skipped with an error. Compressed
files are inflated a bounded step at a time, and one that is cut short keeps
the spans before the cut and says where it ends.
"""

from __future__ import annotations

import io
import itertools
import zlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import IO, Any, Final

import orjson
import zstandard

from otel_stall.core.errors import InputError
from otel_stall.offline import stores
from otel_stall.offline.inputs import (
    STDIN,
    InputChanged,
    Snapshot,
    _Snapshotted,
    expand_paths,
    open_input,
    open_snapshot,
)
from otel_stall.offline.jsonl import DEFAULT_MAX_LINE, capped_lines, is_event, load_events, too_long

__all__ = [
    "DEFAULT_MAX_MESSAGE",
    "FORMATS_READ",
    "NOT_A_SPAN_FILE",
    "STDIN",
    "Format",
    "InputChanged",
    "Snapshot",
    "Unit",
    "expand_paths",
    "open_input",
    "open_snapshot",
    "read_units",
]

GZIP_MAGIC: Final = b"\x1f\x8b"
ZSTD_MAGIC: Final = b"\x28\xb5\x2f\xfd"
MAX_MESSAGE: Final = 1 << 30
"""A length prefix above this is corrupt framing, not a real message."""
DEFAULT_MAX_MESSAGE: Final = DEFAULT_MAX_LINE
"""The default cap on one line, document or (inflated) message: 128 MiB."""
NOT_A_SPAN_FILE: Final = "not a span file (format not recognised)"
FORMATS_READ: Final = (
    "OTLP/JSON lines (the collector's file exporter), an OTLP/JSON document, "
    "length-prefixed OTLP protobuf (zstd per message too), JSONL tool calls and "
    f"{stores.STORES_READ}, each optionally gzip- or zstd-compressed"
)
"""What the sniffer reads, for messages that must say so."""
_SNIFF: Final = 1 << 16
_JSON_START: Final = frozenset(b"{[ \t\r\n")
_BOM: Final = b"\xef\xbb\xbf"
_OTLP_KEYS: Final = (b'"resourceSpans"', b'"resource_spans"')
_TRACES_DATA_FIELD: Final = 0x0A
"""The first byte of a non-empty ``TracesData``: field 1 (resource_spans), length-delimited."""
_SNIFF_MAX_FIRST: Final = 1 << 29
"""A first length prefix this large starts with a printable byte: text, not framing."""
_READ: Final = 1 << 16
"""The buffer size of an inflated stream."""
_ZSTD_STEP: Final = 1 << 10
"""Compressed bytes per zstd step: ~32 MiB out at most (a 4-byte RLE block is 128 KiB)."""
_GZIP_STEP: Final = 1 << 16
"""Most bytes one gzip step inflates (zlib's ``max_length`` bounds it exactly)."""
_GZIP_READ: Final = 1 << 16
_JSON: Final = "json"
"""What :func:`_sniff` says of JSON, before :func:`_json_format` says which JSON."""


class Format:
    """Names of the formats a file can be in (used in summaries and tests)."""

    JSON_LINES: Final = "otlp-json-lines"
    JSON_DOCUMENT: Final = "otlp-json"
    PROTO: Final = "otlp-proto"
    PROTO_ZSTD: Final = "otlp-proto-zstd"
    TOOL_CALLS: Final = "jsonl-tool-calls"
    EMPTY: Final = "empty"
    UNRECOGNISED: Final = "unrecognised"


@dataclass(slots=True)
class Unit:
    """One message read from a file: an OTLP/JSON dict, protobuf bytes, or tool-call events.

    ``line`` (text) or ``offset`` (binary) says where it started, for errors. A
    unit of format :data:`Format.UNRECOGNISED` carries nothing: the file is not
    a span file.
    """

    path: str
    format: str
    line: int | None = None
    offset: int | None = None
    json: Any = None
    proto: bytes | None = None
    events: Any = None
    """A :class:`otel_stall.offline.jsonl.LoadResult`, for the tool-call format."""
    detail: str = ""
    """For an unrecognised JSON file: what it holds (its top-level keys)."""

    def error(self, message: str) -> InputError:
        """An error at this unit's position."""
        return InputError(self.path, self.line, self.offset, message)


class _Prefixed(io.RawIOBase):
    """A stream with some already-read bytes put back in front (sniffing without seek)."""

    def __init__(self, head: bytes, rest: Any) -> None:
        self._head = memoryview(head)  # sliced without copying: the head may be a 128 MiB line
        self._rest = rest

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        if self._head:
            n = min(len(buffer), len(self._head))
            buffer[:n] = self._head[:n]
            self._head = self._head[n:] if n < len(self._head) else memoryview(b"")
            return n
        readinto = getattr(self._rest, "readinto", None)
        if readinto is not None:  # straight into the caller's buffer: one copy fewer
            return int(readinto(buffer) or 0)
        data = self._rest.read(len(buffer))
        n = len(data)
        buffer[:n] = data
        return n


class _Inflating(io.RawIOBase):
    """Whole-file gzip or zstd, inflated as it is read, one bounded step at a time.

    Neither ``gzip.GzipFile`` nor zstandard's ``stream_reader``: zstandard's
    reader ends a cut file silently (issue 21: a truncated ``.zst`` read as
    empty, exit 0), ``GzipFile`` raises and drops what it had inflated, and a
    zstd step fed a large chunk inflates it whole (a 79 KB message, 1 GB).
    Here a step inflates at most ~32 MiB, and a cut or corrupt stream ends
    the content cleanly and is noted in :attr:`problem`, at compressed offset
    :attr:`problem_at`: what came before it is read as usual. Members (gzip)
    and frames (zstd) may follow one another; zero padding after gzip is allowed.
    """

    def __init__(self, source: IO[bytes], magic: bytes) -> None:
        self._source = source
        self._gzip = magic == GZIP_MAGIC
        self.name = "gzip" if self._gzip else "zstd"
        self._inflater: Any = None
        """The member or frame under way; ``None`` between them."""
        self._input = b""
        """Compressed bytes read but not yet inflated."""
        self._full = False
        """The last gzip step filled its output: zlib may hold more for input it has taken."""
        self._pending = memoryview(b"")
        self._ended = False
        self.consumed = 0
        """Compressed bytes read from the source."""
        self.problem: str | None = None
        self.problem_at = 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        while not self._pending:
            if self._ended:
                return 0
            self._step()
        n = min(len(buffer), len(self._pending))
        buffer[:n] = self._pending[:n]
        self._pending = self._pending[n:]
        return n

    def read_capped(self, cap: int) -> bytes | None:
        """All that is left, or ``None`` as soon as it passes ``cap`` bytes."""
        chunks = []
        total = 0
        while not self._ended or self._pending:
            if not self._pending:
                self._step()
                continue
            total += len(self._pending)
            if total > cap:
                return None
            chunks.append(self._pending)
            self._pending = memoryview(b"")
        return b"".join(chunks)

    def _step(self) -> None:
        """Inflate one bounded piece into ``_pending``, or end the stream."""
        data = self._next_input()
        if data is None:
            self._end()
            return
        if not data and not self._full:
            return  # only zero padding so far
        try:
            out = self._inflate(data)
        except (zlib.error, zstandard.ZstdError) as exc:
            self._ended = True
            self.problem = f"cannot decompress the {self.name} data ({exc})"
            self.problem_at = self.consumed - len(data)
            return
        self._pending = memoryview(out)

    def _next_input(self) -> bytes | None:
        """Compressed bytes to inflate next; ``None`` once the source has ended."""
        data, self._input = self._input, b""
        if not data and not self._full:
            data = self._source.read(_GZIP_READ if self._gzip else _ZSTD_STEP)
            if not data:
                return None
            self.consumed += len(data)
        if self._inflater is None and self._gzip:
            return data.lstrip(b"\x00")  # zero padding between or after members
        return data

    def _inflate(self, data: bytes) -> bytes:
        inflater = self._inflater
        if inflater is None:
            inflater = self._inflater = _new_inflater(self._gzip)
        if self._gzip:
            out: bytes = inflater.decompress(data, _GZIP_STEP)
            self._full = len(out) == _GZIP_STEP
            self._input = inflater.unconsumed_tail
        else:
            out = inflater.decompress(data)
        if inflater.eof:
            self._input = inflater.unused_data
            self._inflater = None
            self._full = False
        return out

    def _end(self) -> None:
        """The source has ended: cleanly between members or frames, or cut inside one."""
        self._ended = True
        if self._inflater is not None:
            self.problem = (
                f"the {self.name} stream is cut short: the file ends before its end "
                "marker (the spans before the cut were read)"
            )
            self.problem_at = self.consumed


def _new_inflater(gzip: bool) -> Any:
    """A decompressor for one gzip member (with its header) or one zstd frame."""
    return zlib.decompressobj(31) if gzip else zstandard.ZstdDecompressor().decompressobj()


def _put_back(consumed: bytes, stream: Any) -> IO[bytes]:
    """``stream`` as if ``consumed``, just read from it, had not been.

    A plain file seeks back, so the reads after sniffing copy nothing extra;
    stdin, decompressors and a progress-counting stream get a wrapper instead.
    """
    if isinstance(stream, io.BufferedReader) and isinstance(stream.raw, io.FileIO | _Snapshotted):
        try:
            stream.seek(-len(consumed), io.SEEK_CUR)
            return stream
        except (OSError, ValueError):  # a pipe or a terminal behind the file object
            pass
    return io.BufferedReader(_Prefixed(consumed, stream), 1 << 16)


def _read_head(stream: IO[bytes], size: int) -> bytes:
    chunks = []
    left = size
    while left > 0:
        chunk = stream.read(left)
        if not chunk:
            break
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def _discard(stream: IO[bytes], size: int) -> int:
    """Read and drop up to ``size`` bytes, 1 MiB at a time; returns how many there were."""
    left = size
    while left > 0:
        chunk = stream.read(min(left, 1 << 20))
        if not chunk:
            break
        left -= len(chunk)
    return size - left


def read_units(
    path: str,
    stream: IO[bytes],
    errors: list[InputError],
    *,
    max_message: int = DEFAULT_MAX_MESSAGE,
) -> Iterator[Unit]:
    """Every message in one input, sniffing its format; bad parts go to ``errors``.

    ``max_message`` caps one line, document or inflated message, in bytes.
    """
    return _Reader(path, errors, max_message).units(stream)


class _Reader:
    """One input's reading: its label, where its errors go, and its cap."""

    __slots__ = ("cap", "errors", "ids", "path")

    def __init__(self, path: str, errors: list[InputError], cap: int) -> None:
        self.path = path
        self.errors = errors
        self.cap = cap
        self.ids = stores.Ids()
        """The file's id encoding (hex or base64), decided once."""

    def _error(self, message: str, *, line: int | None = None, offset: int | None = None) -> None:
        self.errors.append(InputError(self.path, line, offset, message))

    def units(self, stream: IO[bytes]) -> Iterator[Unit]:
        layers: list[_Inflating] = []
        try:
            head, content = self._unwrapped(stream, layers)
        except OSError as exc:
            self._error(f"cannot read: {exc.strerror or exc}")
            return
        try:
            yield from self._dispatch(head, content)
        except OSError as exc:
            self._error(f"cannot read further: {exc.strerror or exc}")
        self._report(layers)

    def _report(self, layers: list[_Inflating]) -> None:
        """A cut or corrupt compressed stream: one error, after what could be read."""
        for layer in layers:
            if layer.problem is not None:
                self._error(layer.problem, offset=layer.problem_at)

    def _unwrapped(self, stream: IO[bytes], layers: list[_Inflating]) -> tuple[bytes, IO[bytes]]:
        """Peel off whole-file gzip / zstd; return the sniffed head and the content stream."""
        head = _read_head(stream, _SNIFF)
        for _ in range(3):  # .json.gz.zst is silly, but cheap to allow
            magic = head[:4] if head.startswith(ZSTD_MAGIC) else head[:2]
            if magic not in (GZIP_MAGIC, ZSTD_MAGIC):
                break
            layer = _Inflating(_put_back(head, stream), magic)
            layers.append(layer)
            stream = io.BufferedReader(layer, _READ)
            head = _read_head(stream, _SNIFF)
        return head, stream

    def _dispatch(self, head: bytes, body: IO[bytes]) -> Iterator[Unit]:
        kind = _sniff(head)
        if kind == Format.EMPTY:
            return
        if kind == Format.UNRECOGNISED:
            yield Unit(self.path, Format.UNRECOGNISED)
            return
        body = _put_back(head, body)
        if kind == Format.PROTO:
            yield from self._proto_units(body)
            return
        lines = capped_lines(body, self.cap)
        first_line = next(lines, b"")  # whole, up to the cap: an OTLP message is ~0.5 MB
        if first_line is None:
            yield from self._over_cap_start(head, lines)
            return
        fmt = _json_format(head, first_line)
        if fmt == Format.JSON_LINES:
            yield from self._json_line_units(itertools.chain([first_line], lines))
            return
        body = _put_back(first_line, body)
        if fmt == Format.TOOL_CALLS:
            events = load_events(body, name=self.path, max_line=self.cap)
            yield Unit(self.path, Format.TOOL_CALLS, events=events)
        elif fmt == Format.JSON_DOCUMENT:
            yield from self._document_unit(body)
        else:  # a trace store's export, or not a span file
            store, obj, detail = stores.read_store(body, self.cap, self.ids)
            fmt = store or Format.UNRECOGNISED
            yield Unit(self.path, fmt, line=1 if store else None, json=obj, detail=detail)

    def _over_cap_start(self, head: bytes, lines: Iterator[bytes | None]) -> Iterator[Unit]:
        """A first line over the cap: OTLP lines go on from line 2; other files hold no spans."""
        if not any(key in head for key in _OTLP_KEYS):
            yield Unit(self.path, Format.UNRECOGNISED)
            return
        self._error(f"line {too_long(self.cap)}", line=1)
        yield from self._json_line_units(lines, start=2)

    def _document_unit(self, body: IO[bytes]) -> Iterator[Unit]:
        data = body.read(self.cap + 1)
        if len(data) > self.cap:
            self._error(f"a JSON document {too_long(self.cap)}", offset=0)
            return
        try:
            obj = orjson.loads(data)
        except orjson.JSONDecodeError as exc:
            line = data.count(b"\n", 0, exc.pos) + 1 if exc.pos is not None else None
            self._error(f"invalid JSON document ({exc.msg})", line=line)
            return
        docs = obj if isinstance(obj, list) else [obj]
        for doc in docs:
            fmt, found = stores.normalise(doc, self.ids, Format.JSON_DOCUMENT)
            yield Unit(self.path, fmt, line=1, json=found)

    def _json_line_units(self, lines: Iterable[bytes | None], start: int = 1) -> Iterator[Unit]:
        for number, line in enumerate(lines, start):
            if line is None:
                self._error(f"line {too_long(self.cap)}", line=number)
                continue
            if line.isspace():  # a blank line; isspace() stops at the first byte, strip() copies
                continue
            try:
                obj = orjson.loads(line)
            except orjson.JSONDecodeError as exc:
                reason = exc.msg
                if not line.endswith(b"\n"):
                    reason += "; the last line looks truncated"
                self._error(f"invalid JSON ({reason})", line=number)
                continue
            fmt, obj = stores.normalise(obj, self.ids, Format.JSON_LINES)
            yield Unit(self.path, fmt, line=number, json=obj)

    def _proto_units(self, body: IO[bytes]) -> Iterator[Unit]:
        offset = 0
        while True:
            size = self._frame(body, offset)
            if size is None:
                return
            if size > self.cap:
                if _discard(body, size) < size:
                    self._cut(offset, size)
                    return
                self._error(f"a message of {size} bytes, {too_long(self.cap)}", offset=offset)
                offset += 4 + size
                continue
            payload = _read_head(body, size)
            if len(payload) < size:
                self._cut(offset, size, len(payload))
                return
            unit = self._proto_unit(payload, offset)
            if unit is not None:
                yield unit
            offset += 4 + size

    def _frame(self, body: IO[bytes], offset: int) -> int | None:
        """The next length prefix; ``None`` at the end or when framing is lost (an error)."""
        prefix = _read_head(body, 4)
        if not prefix:
            return None
        if len(prefix) < 4:
            self._error(f"truncated length prefix ({len(prefix)} of 4 bytes)", offset=offset)
            return None
        size = int.from_bytes(prefix, "big")
        if size > MAX_MESSAGE:
            self._error(
                f"corrupt length prefix ({size} bytes); the rest of the file cannot be framed",
                offset=offset,
            )
            return None
        return size

    def _cut(self, offset: int, size: int, left: int | None = None) -> None:
        left_text = "fewer" if left is None else f"only {left}"
        self._error(
            f"truncated message: the length prefix says {size} bytes, {left_text} are left "
            "(a corrupt length prefix or a cut file)",
            offset=offset,
        )

    def _proto_unit(self, payload: bytes, offset: int) -> Unit | None:
        """One framed message as a unit, inflated first in the legacy zstd mode."""
        if not payload.startswith(ZSTD_MAGIC):
            return Unit(self.path, Format.PROTO, offset=offset, proto=payload)
        inflating = _Inflating(io.BytesIO(payload), ZSTD_MAGIC)
        message = inflating.read_capped(self.cap)
        if message is None:
            self._error(f"a zstd message that inflates to {too_long(self.cap)}", offset=offset)
            return None
        if inflating.problem is not None:
            self._error(f"cannot decompress message: {inflating.problem}", offset=offset)
            return None
        return Unit(self.path, Format.PROTO_ZSTD, offset=offset, proto=message)


def _sniff(head: bytes) -> str:
    """The family a file's first bytes show: empty, JSON (decided later), protobuf, or neither."""
    text = head[3:] if head.startswith(_BOM) else head
    stripped = text.lstrip()
    if not stripped:
        return Format.EMPTY
    if text[0] in _JSON_START:
        return _JSON if stripped[:1] in (b"{", b"[") else Format.UNRECOGNISED
    return Format.PROTO if _looks_framed(head) else Format.UNRECOGNISED


def _looks_framed(head: bytes) -> bool:
    """A first length prefix that text cannot make, then a ``TracesData`` (or a zstd frame)."""
    if len(head) < 5:
        return False
    size = int.from_bytes(head[:4], "big")
    return 0 < size < _SNIFF_MAX_FIRST and (
        head[4] == _TRACES_DATA_FIELD or head[4:8] == ZSTD_MAGIC
    )


def _json_format(head: bytes, first_line: bytes) -> str:
    """Tool calls, an OTLP document, OTLP lines, or unrecognised JSON.

    The first line that is a tool call, a model call or an OTLP message decides
    between the two formats; lines of another ``type`` (which the tool-call
    format skips), bad lines and other JSON have no say. Without such a line
    in the first 64 KiB, ``resourceSpans`` anywhere in them still means OTLP.
    """
    first = _parsed(first_line)
    for obj in _head_objects(first, head, first_line):
        if is_event(obj):
            return Format.TOOL_CALLS
        if _is_otlp(obj):
            break
    else:
        if not any(key in head or key in first_line for key in _OTLP_KEYS):
            return Format.UNRECOGNISED
    if first is None:
        text = head[3:] if head.startswith(_BOM) else head
        lines = text.split(b"\n", 2)
        indented = len(lines) > 1 and lines[1][:1] in (b" ", b"\t")
        if first_line.strip().lstrip(_BOM) in (b"{", b"[") or indented:
            return Format.JSON_DOCUMENT
    return Format.JSON_LINES


def _head_objects(first: Any, head: bytes, first_line: bytes) -> Iterator[Any]:
    """The first line's JSON value, then those of the other whole lines in the head."""
    yield first
    if len(first_line) >= len(head):
        return
    lines = head[len(first_line) :].split(b"\n")
    if len(head) == _SNIFF:
        lines.pop()  # cut by the head's end, unless the file ended first
    for line in lines:
        if line.strip():
            yield _parsed(line)


def _parsed(line: bytes) -> Any:
    try:
        return orjson.loads(line)
    except orjson.JSONDecodeError:
        return None


def _is_otlp(obj: Any) -> bool:
    return isinstance(obj, dict) and ("resourceSpans" in obj or "resource_spans" in obj)
