"""``otel-stall replay URL``: a running trace store's answers, spooled as files to replay.

The store's HTTP API is asked for one trace or a query's traces, and each
answer is written as it came to a temporary file: the replay then reads those
files like any other, through the one decoder that reads store exports
(:mod:`otel_stall.offline.stores`). This module only fetches bytes; it reads
an answer only as far as paging needs (a cursor, a page's trace ids) and to
refuse one that holds no trace, naming the URL.

What a URL asks for is read from its path, so the user pastes what the store
or its UI shows:

- Jaeger: ``/api/traces/<id>`` (and the UI's ``/trace/<id>``), the search
  ``/api/traces?service=...``, and the v3 API's ``/api/v3/traces...``. A search
  page as full as its ``limit`` is followed by the one before its oldest trace
  (``end``), since the API has no cursor.
- Tempo: ``/api/traces/<id>``, ``/api/v2/traces/<id>``, and ``/api/search?q=...``,
  whose trace ids are each fetched whole; a full page is followed like Jaeger's.
- Phoenix: ``/v1/projects/<project>/spans`` (or ``.../spans/otlpv1``), paged by
  ``next_cursor``, and the UI's ``/projects/<project>/traces/<id>``. A query
  that filters spans (by attribute, name, time...) gives the traces of the
  spans it matched, each fetched whole by ``trace_id``.

Deliberate decisions:

- Every request has a timeout, and the whole fetch an overall deadline; the
  fetch runs in a worker thread the command waits for at most that long, so
  even a name lookup that hangs cannot hold the command past it.
- The auth header comes from an environment variable (``Header: value``, one a
  line), never from the command line, where ``ps`` and shell history show it.
  It is sent to the URL's host only, never along a redirect.
- A query stops at ``max_traces`` distinct traces (said on stderr), so a
  query that matches a whole store stays bounded; each answer is capped in
  bytes like any input (``--max-message-mib``).
"""

from __future__ import annotations

import dataclasses
import os
import queue
import re
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from typing import IO, Any, Final

import orjson

from otel_stall.core.config import (
    ConfigError,
    check,
    env_field,
    parse_float,
    parse_int,
    resolve,
)
from otel_stall.offline import stores

__all__ = [
    "AUTH_ENV",
    "StoreError",
    "StoreSettings",
    "is_url",
    "spool",
]

AUTH_ENV: Final = "OTEL_STALL_STORE_AUTH"
"""The environment variable read for the auth header when ``--auth-env`` names none."""
_PHOENIX_FILTERS: Final = frozenset(
    {"attribute", "name", "span_kind", "status_code", "parent_id", "span_id"}
    | {"start_time", "end_time"}
)
_PHOENIX_BATCH: Final = 50
"""Trace ids per request when a Phoenix query's traces are fetched whole."""
_PHOENIX_PAGE: Final = 1000
"""Phoenix's largest page (its ``limit`` is at most 1000)."""
_CHUNK: Final = 1 << 16
_ERROR_BODY: Final = 300
"""Characters of an error answer's body quoted in the message."""


class StoreError(Exception):
    """A URL that gave no trace: the message names the URL and the reason."""

    def __init__(self, url: str, reason: str) -> None:
        super().__init__(f"{_shown(url)}: {reason}")


@dataclasses.dataclass(frozen=True)
class StoreSettings:
    """How long and how much ``replay URL`` may fetch: argument, then environment, then default."""

    timeout: float = env_field(10.0, "STORE_TIMEOUT", parse_float, "seconds above 0, e.g. 10")
    """Seconds one request may wait for the store (connecting, or between two reads)."""
    deadline: float = env_field(120.0, "STORE_DEADLINE", parse_float, "seconds above 0, e.g. 120")
    """Seconds the whole fetch may take, every page and trace included."""
    max_traces: int = env_field(
        1000, "STORE_MAX_TRACES", parse_int, "a whole number above 0, e.g. 1000"
    )
    """Distinct traces a query fetches at most; one trace by id is always fetched."""
    auth_env: str = AUTH_ENV
    """The environment variable holding the auth header(s), ``Header: value`` one a line."""
    max_bytes: int = 64 << 20
    """Bytes one answer may have (``--max-message-mib``)."""

    def __post_init__(self) -> None:
        check(self.timeout > 0, "timeout", f"must be above 0 seconds, got {self.timeout}")
        check(self.deadline > 0, "deadline", f"must be above 0 seconds, got {self.deadline}")
        check(self.max_traces > 0, "max_traces", f"must be above 0, got {self.max_traces}")
        check(self.max_bytes > 0, "max_bytes", f"must be above 0, got {self.max_bytes}")

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None, **explicit: Any) -> StoreSettings:
        """Explicit values, then ``OTEL_STALL_STORE_*``, then the defaults."""
        return resolve(cls, explicit, environ)

    def headers(self, environ: Mapping[str, str] | None = None) -> list[tuple[str, str]]:
        """The auth header(s) from :attr:`auth_env`; none when the default variable is unset.

        Raises :class:`ConfigError` naming the variable (never its value) when it is bad,
        or when a variable named explicitly is unset.
        """
        environ = os.environ if environ is None else environ
        text = environ.get(self.auth_env)
        if text is None:
            if self.auth_env != AUTH_ENV:
                raise ConfigError(
                    f"--auth-env {self.auth_env}: the variable is not set; export it as "
                    f"'Header: value', e.g. {self.auth_env}='Authorization: Bearer ...'"
                )
            return []
        out = []
        for line in text.splitlines():
            name, colon, value = line.partition(":")
            if not line.strip():
                continue
            if not colon or not re.fullmatch(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+", name.strip()):
                raise ConfigError(
                    f"{self.auth_env}: expected 'Header: value' on each line, e.g. "
                    "'Authorization: Bearer ...'"
                )
            out.append((name.strip(), value.strip()))
        return out


def is_url(path: str) -> bool:
    """Whether a replay input names a store's HTTP API rather than a file."""
    return path.startswith(("http://", "https://"))


def _shown(url: str) -> str:
    """A URL for a message: without user info, which may hold a password."""
    parts = urllib.parse.urlsplit(url)
    if parts.username is None and parts.password is None:
        return url
    host = parts.hostname or ""
    netloc = f"{host}:{parts.port}" if parts.port else host
    return urllib.parse.urlunsplit(parts._replace(netloc=netloc))


# -- fetching ----------------------------------------------------------------------


class _Client:
    """GETs with a per-request timeout under one deadline; answers written to a folder."""

    def __init__(
        self, settings: StoreSettings, headers: list[tuple[str, str]], folder: str
    ) -> None:
        self.settings = settings
        self.headers = headers
        self.folder = folder
        self.stop_at = time.monotonic() + settings.deadline
        self.files: dict[str, str] = {}
        """Each answer's file, and the URL it came from (its label in the report)."""
        self.sources: dict[str, int] = {}
        """Each answer's file, and the index among the inputs of the URL that asked for it."""
        self.source = 0
        self.notes: list[str] = []
        self._opener = urllib.request.build_opener()

    def get(self, url: str) -> bytes:
        """One answer's body; :class:`StoreError` for anything but a 2xx within the limits."""
        remaining = self.stop_at - time.monotonic()
        if remaining <= 0:
            raise StoreError(url, self._deadline_passed())
        request = urllib.request.Request(
            url,
            headers={"Accept": "application/json", "User-Agent": "otel-stall"},
        )
        for name, value in self.headers:
            request.add_unredirected_header(name, value)  # not sent along a redirect
        timeout = min(self.settings.timeout, remaining)
        try:
            with self._opener.open(request, timeout=timeout) as answer:
                return self._read(url, answer)
        except urllib.error.HTTPError as exc:
            raise StoreError(url, _http_error(exc)) from None
        except urllib.error.URLError as exc:
            if isinstance(exc.reason, TimeoutError):
                raise StoreError(url, self._no_answer()) from None
            raise StoreError(url, f"cannot reach the store ({exc.reason})") from None
        except TimeoutError:
            raise StoreError(url, self._no_answer()) from None
        except (OSError, ValueError) as exc:
            raise StoreError(url, f"the request failed ({exc})") from None

    def _read(self, url: str, answer: Any) -> bytes:
        cap = self.settings.max_bytes
        chunks: list[bytes] = []
        size = 0
        while True:
            if time.monotonic() > self.stop_at:
                raise StoreError(url, self._deadline_passed())
            chunk = answer.read1(_CHUNK)  # what has come, not a full chunk: the deadline holds
            if not chunk:
                return b"".join(chunks)
            size += len(chunk)
            if size > cap:
                raise StoreError(
                    url, f"the answer is over {cap >> 20} MiB; raise --max-message-mib"
                )
            chunks.append(chunk)

    def _no_answer(self) -> str:
        return f"no answer within {self.settings.timeout:g}s (--store-timeout)"

    def _deadline_passed(self) -> str:
        return (
            f"the fetch took longer than its deadline of {self.settings.deadline:g}s "
            "(--store-deadline)"
        )

    def json(self, url: str, body: bytes) -> Any:
        """An answer parsed as JSON (one document, or the first of JSON lines)."""
        try:
            return orjson.loads(body)
        except orjson.JSONDecodeError:
            pass
        first = body.lstrip().split(b"\n", 1)[0]
        try:
            return orjson.loads(first)
        except orjson.JSONDecodeError:
            head = body[:80].decode("utf-8", "replace")
            raise StoreError(url, f"the answer is not JSON (it begins {head!r})") from None

    def keep(self, url: str, body: bytes, obj: Any) -> None:
        """Write an answer that holds spans for the replay; refuse one that is no trace."""
        if not _holds_spans(obj):
            raise StoreError(
                url,
                f"the answer is not a trace: {stores.describe(obj)}; otel-stall reads "
                f"{stores.STORES_READ}",
            )
        path = os.path.join(self.folder, f"{len(self.files):05d}.json")
        with open(path, "wb") as file:
            file.write(body)
        self.files[path] = _shown(url)
        self.sources[path] = self.source


def _http_error(exc: urllib.error.HTTPError) -> str:
    try:
        text = exc.read(4096).decode("utf-8", "replace")
    except (OSError, ValueError):
        text = ""
    text = " ".join(text.split())[:_ERROR_BODY]
    hint = (
        " (set the auth header in $" + AUTH_ENV + " or --auth-env)"
        if exc.code in (401, 403)
        else ""
    )
    return f"HTTP {exc.code} {exc.reason}{hint}" + (f": {text}" if text else "")


def _holds_spans(obj: Any) -> bool:
    """Whether an answer is a shape the decoder reads (an empty trace list counts)."""
    if isinstance(obj, dict) and any(key in obj for key in ("resourceSpans", "resource_spans")):
        return True
    return stores.from_store(obj, stores.Ids()) is not None


# -- what each URL asks --------------------------------------------------------------


def _with_query(url: str, **params: str | list[str] | None) -> str:
    """``url`` with query parameters replaced (``None`` removes one; a list repeats it)."""
    parts = urllib.parse.urlsplit(url)
    query = [(k, v) for k, v in urllib.parse.parse_qsl(parts.query) if k not in params]
    for key, value in params.items():
        if isinstance(value, list):
            query += [(key, item) for item in value]
        elif value is not None:
            query.append((key, value))
    return urllib.parse.urlunsplit(parts._replace(query=urllib.parse.urlencode(query)))


def _params(url: str) -> dict[str, list[str]]:
    return urllib.parse.parse_qs(urllib.parse.urlsplit(url).query)


def _rewrite_ui(url: str) -> str:
    """A UI's trace page as its API's: Jaeger's ``/trace/<id>``, Phoenix's ``.../traces/<id>``."""
    parts = urllib.parse.urlsplit(url)
    match = re.fullmatch(r"(.*)/projects/([^/]+)/traces/([0-9A-Fa-f]+)/?", parts.path)
    if match and not match.group(1).endswith("/v1"):
        path = f"{match.group(1)}/v1/projects/{match.group(2)}/spans"
        query = urllib.parse.urlencode({"trace_id": match.group(3)})
        return urllib.parse.urlunsplit(parts._replace(path=path, query=query))
    match = re.fullmatch(r"(.*)/trace/([0-9A-Fa-f]+)/?", parts.path)
    if match:
        return urllib.parse.urlunsplit(parts._replace(path=f"{match[1]}/api/traces/{match[2]}"))
    return url


def _check_url(url: str) -> None:
    parts = urllib.parse.urlsplit(url)
    if not parts.hostname:
        raise StoreError(url, "not a URL with a host; write http(s)://HOST[:PORT]/PATH")
    try:
        parts.port  # noqa: B018 - raises ValueError for a port that is not a number
    except ValueError as exc:
        raise StoreError(url, f"bad port ({exc})") from None


def _fetch(client: _Client, url: str) -> None:
    """Every answer ``url`` asks for, by its path."""
    url = _rewrite_ui(url)
    _check_url(url)
    path = urllib.parse.urlsplit(url).path.rstrip("/")
    if re.search(r"/v1/projects/[^/]+/spans(/otlpv1)?$", path):
        _phoenix(client, url)
    elif path.endswith("/api/search"):
        _tempo_search(client, url)
    elif path.endswith("/api/traces"):
        _jaeger_search(client, url)
    else:
        body = client.get(url)
        client.keep(url, body, client.json(url, body))


def _pages_by_end(
    client: _Client,
    url: str,
    read: Callable[[str, bytes, Any], list[tuple[str, int]]],
    end_of: Callable[[int], str],
    default_limit: int,
    *,
    needs_start: bool = False,
) -> None:
    """A search without a cursor: while a page is full, ask for the one before its oldest trace.

    ``read`` handles one page and returns its ``(trace id, start in ns)``; paging
    stops on a page that is not full, brings no new trace, or at ``max_traces``.
    ``needs_start``: the store takes an ``end`` only with a ``start`` (Tempo), so a
    URL without one is not paged, and a full page says so.
    """
    limit_text = (_params(url).get("limit") or [str(default_limit)])[0]
    limit = int(limit_text) if limit_text.isdigit() else default_limit
    seen: set[str] = set()
    page_url = url
    while True:
        body = client.get(page_url)
        found = read(page_url, body, client.json(page_url, body))
        new = [(tid, start) for tid, start in found if tid not in seen]
        seen.update(tid for tid, _ in new)
        if len(seen) >= client.settings.max_traces:
            client.notes.append(
                f"{_shown(url)}: stopped at {len(seen)} traces (--max-traces "
                f"{client.settings.max_traces})"
            )
            return
        if len(found) < limit or not new or limit <= 0:
            return
        if needs_start and "start" not in _params(url):
            client.notes.append(
                f"{_shown(url)}: the page is full ({limit} traces) and there may be more; "
                "give start and end (Unix seconds) to page through them, or raise limit"
            )
            return
        page_url = _with_query(url, end=end_of(min(start for _, start in found)))


def _jaeger_search(client: _Client, url: str) -> None:
    """Jaeger's ``/api/traces?service=...``: pages of whole traces."""

    def read(page_url: str, body: bytes, obj: Any) -> list[tuple[str, int]]:
        client.keep(page_url, body, obj)
        out = []
        for trace in obj.get("data") or () if isinstance(obj, dict) else ():
            spans = trace.get("spans") if isinstance(trace, dict) else None
            starts = [s["startTime"] for s in spans or () if isinstance(s.get("startTime"), int)]
            if starts:
                out.append((str(trace.get("traceID")), min(starts) * 1000))
        return out

    _pages_by_end(client, url, read, lambda ns: str(ns // 1000 - 1), default_limit=20)


def _tempo_search(client: _Client, url: str) -> None:
    """Tempo's ``/api/search``: each trace id of each page fetched whole from ``/api/traces``."""
    base = url.split("?", 1)[0].rstrip("/")[: -len("/api/search")]
    fetched: set[str] = set()

    def read(page_url: str, body: bytes, obj: Any) -> list[tuple[str, int]]:
        traces = obj.get("traces") if isinstance(obj, dict) else None
        if not isinstance(traces, list):
            raise StoreError(
                page_url,
                f"not a Tempo search answer: {stores.describe(obj)}; expected {{'traces': [...]}}",
            )
        out = []
        for trace in traces:
            if not isinstance(trace, dict) or not isinstance(trace.get("traceID"), str):
                continue
            start = str(trace.get("startTimeUnixNano", "0"))
            out.append((trace["traceID"], int(start) if start.isdigit() else 0))
        for trace_id, _ in out:
            if trace_id in fetched or len(fetched) >= client.settings.max_traces:
                continue
            fetched.add(trace_id)
            trace_url = f"{base}/api/traces/{urllib.parse.quote(trace_id)}"
            trace_body = client.get(trace_url)
            client.keep(trace_url, trace_body, client.json(trace_url, trace_body))
        return out

    # Tempo's end is in whole seconds: the oldest trace's second is asked again (and
    # the traces seen are skipped), or a second's traces past the first page would be lost.
    _pages_by_end(client, url, read, lambda ns: str(-(-ns // 1_000_000_000)), 20, needs_start=True)


def _phoenix(client: _Client, url: str) -> None:
    """Phoenix's project spans: a query by trace id paged as is, any other by its traces."""
    params = _params(url)
    if _PHOENIX_FILTERS.isdisjoint(params) and "trace_id" in params:
        _phoenix_pages(client, url, keep=True)
        return
    trace_ids = _phoenix_pages(client, url, keep=False)
    for start in range(0, len(trace_ids), _PHOENIX_BATCH):
        batch = trace_ids[start : start + _PHOENIX_BATCH]
        whole = _with_query(url, **dict.fromkeys(_PHOENIX_FILTERS), trace_id=batch, cursor=None)
        _phoenix_pages(client, whole, keep=True)


def _phoenix_pages(client: _Client, url: str, *, keep: bool) -> list[str]:
    """Follow ``next_cursor``; keep the pages, or collect their distinct trace ids."""
    limit = int(_params(url).get("limit", [str(_PHOENIX_PAGE)])[0] or _PHOENIX_PAGE)
    page_url = _with_query(url, limit=str(limit))
    trace_ids: dict[str, None] = {}
    while True:
        body = client.get(page_url)
        obj = client.json(page_url, body)
        if not isinstance(obj, dict) or not isinstance(obj.get("data"), list):
            raise StoreError(
                page_url,
                f"not a Phoenix spans answer: {stores.describe(obj)}; "
                "expected {'data': [...], 'next_cursor': ...}",
            )
        if keep:
            client.keep(page_url, body, obj)
        else:
            for span in obj["data"]:
                trace_id = _phoenix_trace_id(span)
                if trace_id is not None:
                    trace_ids[trace_id] = None
            if len(trace_ids) >= client.settings.max_traces:
                client.notes.append(
                    f"{_shown(url)}: stopped at {client.settings.max_traces} traces (--max-traces)"
                )
                return list(trace_ids)[: client.settings.max_traces]
        cursor = obj.get("next_cursor")
        if not isinstance(cursor, str) or not cursor:
            return list(trace_ids)
        page_url = _with_query(page_url, cursor=cursor)


def _phoenix_trace_id(span: Any) -> str | None:
    if not isinstance(span, dict):
        return None
    context = span.get("context")
    value = context.get("trace_id") if isinstance(context, dict) else span.get("trace_id")
    return value if isinstance(value, str) and value else None


# -- the command's side ---------------------------------------------------------------


def _fetch_all(
    urls: Sequence[str], settings: StoreSettings, headers: list[tuple[str, str]], folder: str
) -> _Client:
    """Fetch every URL in a worker thread, waited for no longer than the deadline (and a timeout).

    The worker stops itself at the deadline between reads; the wait bounds what it
    cannot interrupt, such as a name lookup.
    """
    client = _Client(settings, headers, folder)
    done: queue.Queue[BaseException | None] = queue.Queue(1)

    def work() -> None:
        try:
            for index, url in enumerate(urls):
                if is_url(url):
                    client.source = index
                    _fetch(client, url)
                    if client.source not in client.sources.values():
                        raise StoreError(url, "the query matched no span")
        except BaseException as exc:  # handed to the waiting thread, which raises it
            done.put(exc)
        else:
            done.put(None)

    threading.Thread(target=work, name="otel-stall-store-fetch", daemon=True).start()
    try:
        failure = done.get(timeout=settings.deadline + settings.timeout + 1)
    except queue.Empty:
        raise StoreError(urls[client.source], client._deadline_passed()) from None
    if failure is not None:
        raise failure
    return client


def spool(
    paths: Sequence[str], settings: StoreSettings, folder: str, notes: IO[str]
) -> tuple[list[str], dict[str, str]]:
    """``paths`` with each URL replaced by the files (in ``folder``) of its answers, and labels.

    The labels name each file by the URL it came from. Raises :class:`StoreError`
    when a URL gives no trace, and :class:`ConfigError` for a bad auth variable.
    """
    client = _fetch_all(paths, settings, settings.headers(), folder)
    for note in client.notes:
        print(f"otel-stall: {note}", file=notes)
    out: list[str] = []
    for index, path in enumerate(paths):
        out.extend(f for f, source in client.sources.items() if source == index)
        if not is_url(path):
            out.append(path)
    return out, dict(client.files)
