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
length of about 2 GB. So ``{``, ``[`` or whitespace means JSON, anything else
means length-prefixed protobuf.

Nothing here raises for bad content: every problem becomes an
:class:`~otel_stall.core.errors.InputError` with the file and the line (text) or
byte offset (binary), and reading goes on with the next line, message or file.
"""

from __future__ import annotations

import gzip
import io
import os
import sys
import zlib
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import IO, Any, Final

import orjson
import zstandard

from otel_stall.core.errors import InputError
from otel_stall.offline.jsonl import load_events, looks_like_trace_line

__all__ = [
    "STDIN",
    "Format",
    "Unit",
    "expand_paths",
    "open_input",
    "read_units",
]

STDIN: Final = "-"
GZIP_MAGIC: Final = b"\x1f\x8b"
ZSTD_MAGIC: Final = b"\x28\xb5\x2f\xfd"
MAX_MESSAGE: Final = 1 << 30
"""A length prefix above this is corrupt framing, not a real message."""
_SNIFF: Final = 1 << 16
_JSON_START: Final = frozenset(b"{[ \t\r\n")
_BOM: Final = b"\xef\xbb\xbf"


class Format:
    """Names of the formats a file can be in (used in summaries and tests)."""

    JSON_LINES: Final = "otlp-json-lines"
    JSON_DOCUMENT: Final = "otlp-json"
    PROTO: Final = "otlp-proto"
    PROTO_ZSTD: Final = "otlp-proto-zstd"
    TOOL_CALLS: Final = "jsonl-tool-calls"
    EMPTY: Final = "empty"


@dataclass(slots=True)
class Unit:
    """One message read from a file: an OTLP/JSON dict, protobuf bytes, or tool-call events.

    ``line`` (text) or ``offset`` (binary) says where it started, for errors.
    """

    path: str
    format: str
    line: int | None = None
    offset: int | None = None
    json: Any = None
    proto: bytes | None = None
    events: Any = None
    """A :class:`otel_stall.offline.jsonl.LoadResult`, for the tool-call format."""

    def error(self, message: str) -> InputError:
        """An error at this unit's position."""
        return InputError(self.path, self.line, self.offset, message)


Progress = Callable[[int], None]
"""Called with the number of raw bytes just read (for a progress bar)."""


class _Counting(io.RawIOBase):
    """Reports raw bytes read, so a progress bar can follow compressed files too."""

    def __init__(self, raw: IO[bytes], progress: Progress) -> None:
        self._raw = raw
        self._progress = progress

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        data = self._raw.read(len(buffer))
        n = len(data)
        buffer[:n] = data
        if n:
            self._progress(n)
        return n


class _Prefixed(io.RawIOBase):
    """A stream with some already-read bytes put back in front (sniffing without seek)."""

    def __init__(self, head: bytes, rest: Any) -> None:
        self._head = head
        self._rest = rest

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        if self._head:
            n = min(len(buffer), len(self._head))
            buffer[:n] = self._head[:n]
            self._head = self._head[n:]
            return n
        readinto = getattr(self._rest, "readinto", None)
        if readinto is not None:  # straight into the caller's buffer: one copy fewer
            return int(readinto(buffer) or 0)
        data = self._rest.read(len(buffer))
        n = len(data)
        buffer[:n] = data
        return n


def expand_paths(paths: Iterable[str], errors: list[InputError]) -> list[str]:
    """Files in argument order; directories recursively, sorted; ``-`` is stdin."""
    out: list[str] = []
    for path in paths:
        if path == STDIN or os.path.isfile(path):
            out.append(path)
        elif os.path.isdir(path):
            found = []
            for root, dirs, files in os.walk(path):
                dirs[:] = sorted(d for d in dirs if not d.startswith("."))
                found += [os.path.join(root, f) for f in files if not f.startswith(".")]
            out += sorted(found)
        elif os.path.exists(path):
            errors.append(InputError(path, None, None, "not a regular file or directory"))
        else:
            errors.append(InputError(path, None, None, "no such file or directory"))
    return out


def open_input(path: str, progress: Progress | None = None) -> IO[bytes]:
    """Open a file (or stdin for ``-``) as a binary stream; raises ``OSError``."""
    raw: IO[bytes] = sys.stdin.buffer if path == STDIN else open(path, "rb")  # noqa: SIM115
    if progress is None:
        return raw
    return io.BufferedReader(_Counting(raw, progress), 1 << 16)


def _put_back(consumed: bytes, stream: Any) -> IO[bytes]:
    """``stream`` as if ``consumed``, just read from it, had not been.

    A plain file seeks back, so the reads after sniffing copy nothing extra;
    stdin, decompressors and a progress-counting stream get a wrapper instead.
    """
    if isinstance(stream, io.BufferedReader) and isinstance(stream.raw, io.FileIO):
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


def _decompressed(path: str, stream: IO[bytes], errors: list[InputError]) -> tuple[bytes, Any]:
    """Peel off whole-file gzip / zstd; return the sniffed head and the content stream."""
    head = _read_head(stream, _SNIFF)
    for _ in range(3):  # .json.gz.zst is silly, but cheap to allow
        if head.startswith(GZIP_MAGIC):
            inner: Any = gzip.GzipFile(fileobj=io.BufferedReader(_Prefixed(head, stream)))
        elif head.startswith(ZSTD_MAGIC):
            reader = zstandard.ZstdDecompressor().stream_reader(
                io.BufferedReader(_Prefixed(head, stream)), read_across_frames=True
            )
            inner = reader
        else:
            break
        try:
            stream = inner
            head = _read_head(stream, _SNIFF)
        except (OSError, EOFError, zlib.error, zstandard.ZstdError) as exc:
            errors.append(InputError(path, None, 0, f"cannot decompress: {exc}"))
            return b"", None
    return head, stream


def read_units(path: str, stream: IO[bytes], errors: list[InputError]) -> Iterator[Unit]:
    """Every message in one input, sniffing its format; bad parts go to ``errors``."""
    try:
        head, content = _decompressed(path, stream, errors)
    except OSError as exc:
        errors.append(InputError(path, None, None, f"cannot read: {exc.strerror or exc}"))
        return
    if content is None:
        return
    body = _put_back(head, content)
    try:
        yield from _dispatch(path, head, body, errors)
    except (OSError, EOFError, zlib.error, zstandard.ZstdError) as exc:
        errors.append(InputError(path, None, None, f"cannot read further: {exc}"))


def _dispatch(path: str, head: bytes, body: IO[bytes], errors: list[InputError]) -> Iterator[Unit]:
    text = head[3:] if head.startswith(_BOM) else head
    stripped = text.lstrip()
    if not stripped:
        return
    if text[0] not in _JSON_START:
        yield from _proto_units(path, body, errors)
        return
    first_line = body.readline()  # whole, however long: a 512-span message is ~0.5 MB
    body = _put_back(first_line, body)
    try:
        first = orjson.loads(first_line)
    except orjson.JSONDecodeError:
        first = None
    if looks_like_trace_line(first_line) or (
        first is None and _first_valid_line_is_tool_call(text)
    ):
        yield Unit(path, Format.TOOL_CALLS, events=load_events(io.BytesIO(body.read()), name=path))
        return
    head_lines = text.split(b"\n", 2)
    indented = len(head_lines) > 1 and head_lines[1][:1] in (b" ", b"\t")
    if first is None and (first_line.strip().lstrip(_BOM) in (b"{", b"[") or indented):
        yield from _document_unit(path, body, errors)
        return
    yield from _json_line_units(path, body, errors)


def _first_valid_line_is_tool_call(head: bytes) -> bool:
    """The tool-call format, judged by the first line that parses (a bad first line is no vote)."""
    for line in head.split(b"\n")[:-1] or [head]:
        if not line.strip():
            continue
        try:
            obj = orjson.loads(line)
        except orjson.JSONDecodeError:
            continue
        return looks_like_trace_line(line) if isinstance(obj, dict) else False
    return False


def _document_unit(path: str, body: IO[bytes], errors: list[InputError]) -> Iterator[Unit]:
    data = body.read()
    try:
        obj = orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        line = data.count(b"\n", 0, exc.pos) + 1 if exc.pos is not None else None
        errors.append(InputError(path, line, None, f"invalid JSON document ({exc.msg})"))
        return
    docs = obj if isinstance(obj, list) else [obj]
    for doc in docs:
        yield Unit(path, Format.JSON_DOCUMENT, line=1, json=doc)


def _json_line_units(path: str, body: IO[bytes], errors: list[InputError]) -> Iterator[Unit]:
    for number, line in enumerate(body, 1):
        if line.isspace():  # a blank line; isspace() stops at the first byte, strip() copies
            continue
        try:
            obj = orjson.loads(line)
        except orjson.JSONDecodeError as exc:
            reason = exc.msg
            if not line.endswith(b"\n"):
                reason += "; the last line looks truncated"
            errors.append(InputError(path, number, None, f"invalid JSON ({reason})"))
            continue
        yield Unit(path, Format.JSON_LINES, line=number, json=obj)


def _proto_units(path: str, body: IO[bytes], errors: list[InputError]) -> Iterator[Unit]:
    offset = 0
    decompressor: Any = None
    while True:
        prefix = _read_head(body, 4)
        if not prefix:
            return
        if len(prefix) < 4:
            errors.append(
                InputError(
                    path, None, offset, f"truncated length prefix ({len(prefix)} of 4 bytes)"
                )
            )
            return
        size = int.from_bytes(prefix, "big")
        if size > MAX_MESSAGE:
            errors.append(
                InputError(
                    path,
                    None,
                    offset,
                    f"corrupt length prefix ({size} bytes); the rest of the file cannot be framed",
                )
            )
            return
        payload = _read_head(body, size)
        if len(payload) < size:
            errors.append(
                InputError(
                    path,
                    None,
                    offset,
                    f"truncated message: the length prefix says {size} bytes, "
                    f"only {len(payload)} are left (a corrupt length prefix or a cut file)",
                )
            )
            return
        fmt = Format.PROTO
        if payload.startswith(ZSTD_MAGIC):
            fmt = Format.PROTO_ZSTD
            if decompressor is None:
                decompressor = zstandard.ZstdDecompressor()
            try:
                payload = decompressor.decompressobj().decompress(payload)
            except zstandard.ZstdError as exc:
                errors.append(InputError(path, None, offset, f"cannot decompress message: {exc}"))
                offset += 4 + size
                continue
        yield Unit(path, fmt, offset=offset, proto=payload)
        offset += 4 + size
