"""``otel-stall replay URL``: Jaeger's, Tempo's and Phoenix's HTTP APIs, served on loopback.

Each store's answers are its documented shapes, built from the golden traces
(``test_stores``), and served by a real HTTP server: the replay of a URL must
give the verdicts the golden file gives, page through what the store pages,
send the auth header, and give up within its timeout and deadline.
"""

from __future__ import annotations

import base64
import json
import socket
import time
from pathlib import Path
from typing import Any

import orjson
import pytest
from store_server import Answer, Request, StoreServer, elapsed, json_answer
from test_stores import GOLDEN, jaeger, phoenix, tempo

from otel_stall import Replayer
from otel_stall.cli import main


def _golden_verdicts() -> dict[str, tuple[str, int]]:
    result = Replayer().analyse([str(GOLDEN)])
    return {str(r.attributes["trace_id"]): (r.verdict.value, r.tool_calls) for r in result.reports}


def _replay(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, Any, str]:
    code = main(["replay", *argv, "--format", "json"])
    out, err = capsys.readouterr()
    return code, json.loads(out) if out.strip() else None, err


def _verdicts(report: Any) -> dict[str, tuple[str, int]]:
    return {r["trace_id"]: (r["verdict"], r["tool_calls"]) for r in report["runs"]}


def _jaeger_traces() -> list[dict[str, Any]]:
    """The golden traces in Jaeger's shape, each ten seconds older than the one before."""
    traces: list[dict[str, Any]] = jaeger()["data"]
    for i, trace in enumerate(traces):
        for span in trace["spans"]:
            span["startTime"] -= i * 10_000_000
    return traces


def test_jaeger_traces_by_id_replay_like_the_file(capsys: pytest.CaptureFixture[str]) -> None:
    """``/api/traces/<id>`` and the UI's ``/trace/<id>``: each trace read, the verdicts the same."""
    traces = {t["traceID"]: t for t in jaeger()["data"]}

    def by_id(request: Request) -> Answer:
        trace = traces.get(request.path.rsplit("/", 1)[1])
        if trace is None:
            return Answer(404, {"data": None, "errors": [{"code": 404, "msg": "trace not found"}]})
        return Answer(200, {"data": [trace], "total": 0, "limit": 0, "offset": 0, "errors": None})

    with StoreServer({"/api/traces/": by_id}) as store:
        ids = list(traces)
        urls = [f"{store.url}/api/traces/{i}" for i in ids[:-1]] + [f"{store.url}/trace/{ids[-1]}"]
        code, report, err = _replay(urls, capsys)
    assert _verdicts(report) == _golden_verdicts(), err
    assert code == 1  # a loop breaks
    assert [r.path for r in store.requests] == [f"/api/traces/{i}" for i in ids]


def test_jaeger_search_pages_before_the_oldest_trace(capsys: pytest.CaptureFixture[str]) -> None:
    """A search page as full as its ``limit`` is followed by the one ending before its oldest."""
    traces = _jaeger_traces()

    def search(request: Request) -> Answer:
        end = int(request.query.get("end", ["9" * 20])[0])
        limit = int(request.query["limit"][0])
        found = [t for t in traces if min(s["startTime"] for s in t["spans"]) <= end]
        found.sort(key=lambda t: -min(s["startTime"] for s in t["spans"]))
        return Answer(200, {"data": found[:limit], "total": 0, "limit": 0, "errors": None})

    with StoreServer({"/api/traces": search}) as store:
        url = f"{store.url}/api/traces?service=agent&limit=1"
        code, report, err = _replay([url], capsys)
    assert _verdicts(report) == _golden_verdicts(), err
    assert code == 1
    assert len(store.requests) == len(traces) + 1  # the last page is empty: no more
    assert all(r.query["service"] == ["agent"] for r in store.requests)
    ends = [int(r.query["end"][0]) for r in store.requests[1:]]
    assert ends == sorted(ends, reverse=True)


def test_max_traces_stops_a_query_and_says_so(capsys: pytest.CaptureFixture[str]) -> None:
    """``--max-traces 2``: two pages of one trace, then a note on stderr."""
    traces = _jaeger_traces()

    def search(request: Request) -> Answer:
        end = int(request.query.get("end", ["9" * 20])[0])
        found = [t for t in traces if min(s["startTime"] for s in t["spans"]) <= end]
        found.sort(key=lambda t: -min(s["startTime"] for s in t["spans"]))
        return Answer(200, {"data": found[:1]})

    with StoreServer({"/api/traces": search}) as store:
        url = f"{store.url}/api/traces?service=agent&limit=1"
        _, report, err = _replay([url, "--max-traces", "2"], capsys)
    newest = sorted(traces, key=lambda t: -min(s["startTime"] for s in t["spans"]))[:2]
    kept = {t["traceID"] for t in newest}
    assert _verdicts(report) == {t: v for t, v in _golden_verdicts().items() if t in kept}
    assert len(store.requests) == 2
    assert "stopped at 2 traces (--max-traces 2)" in err


def test_tempo_search_fetches_each_trace_whole(capsys: pytest.CaptureFixture[str]) -> None:
    """``/api/search``: each trace id of each page fetched from ``/api/traces/<id>`` (base64)."""
    batches = tempo()["batches"]
    by_trace: dict[str, list[Any]] = {}
    for rs in batches:
        for ss in rs["scopeSpans"]:
            for span in ss["spans"]:
                hex_id = base64.b64decode(span["traceId"]).hex()
                by_trace.setdefault(hex_id, []).append(
                    {"resource": rs["resource"], "scopeSpans": [{**ss, "spans": [span]}]}
                )
    starts = {tid: (1_700_000_000 - 10 * i) * 10**9 for i, tid in enumerate(by_trace)}

    def search(request: Request) -> Answer:
        end = int(request.query.get("end", ["9" * 12])[0]) * 10**9
        limit = int(request.query.get("limit", ["20"])[0])
        found = sorted((t for t in by_trace if starts[t] <= end), key=lambda t: -starts[t])
        return Answer(
            200,
            {
                "traces": [
                    {
                        "traceID": t,
                        "rootServiceName": "agent",
                        "startTimeUnixNano": str(starts[t]),
                        "durationMs": 5,
                    }
                    for t in found[:limit]
                ],
                "metrics": {"completedJobs": 1, "totalJobs": 1},
            },
        )

    def trace(request: Request) -> Answer:
        return Answer(200, {"batches": by_trace[request.path.rsplit("/", 1)[1]]})

    with StoreServer({"/tempo/api/search": search, "/tempo/api/traces/": trace}) as store:
        url = f"{store.url}/tempo/api/search?q=%7B%7D&limit=2"
        _, first_page, note = _replay([url], capsys)  # no start: one page, and a note
        searches = len([r for r in store.requests if r.path.endswith("/search")])
        url += "&start=1699990000&end=1700000001"
        code, report, err = _replay([url], capsys)
    assert _verdicts(report) == _golden_verdicts(), err
    assert code == 1
    assert searches == 1
    assert len(first_page["runs"]) <= 2
    assert "the page is full (2 traces) and there may be more; give start and end" in note
    paged = store.requests[searches + 2 :]
    fetched = [r.path.rsplit("/", 1)[1] for r in paged if "/traces/" in r.path]
    assert sorted(fetched) == sorted(by_trace)  # each trace once, though pages overlap
    assert all(r.headers["accept"] == "application/json" for r in store.requests)


def test_phoenix_spans_page_by_cursor_and_a_filter_gives_whole_traces(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Phoenix's ``next_cursor`` is followed; a filtered query's traces are fetched by trace id."""
    spans = phoenix()["data"]
    loop_trace = next(s["context"]["trace_id"] for s in spans if s["name"].startswith("invoke"))

    def project_spans(request: Request) -> Answer:
        chosen = spans
        if "trace_id" in request.query:
            chosen = [s for s in spans if s["context"]["trace_id"] in request.query["trace_id"]]
        if "name" in request.query:
            chosen = [s for s in chosen if s["name"] in request.query["name"]]
        limit = int(request.query["limit"][0])
        start = int(request.query.get("cursor", ["0"])[0])
        page = chosen[start : start + limit]
        more = start + limit < len(chosen)
        return Answer(200, {"data": page, "next_cursor": str(start + limit) if more else None})

    with StoreServer({"/v1/projects/default/spans": project_spans}) as store:
        name = next(s["name"] for s in spans if s["context"]["trace_id"] == loop_trace)
        url = f"{store.url}/v1/projects/default/spans?name={name}&limit=3"
        code, report, err = _replay([url], capsys)
    golden = _golden_verdicts()
    assert _verdicts(report) == {t: v for t, v in golden.items() if t == loop_trace}, err
    assert code == (1 if golden[loop_trace][0] == "break" else 0)
    whole = [r for r in store.requests if "trace_id" in r.query]
    assert whole
    assert all("name" not in r.query for r in whole)
    assert len([r for r in whole if "cursor" in r.query]) >= 1  # paged


def test_auth_header_arrives_from_the_environment(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """``OTEL_STALL_STORE_AUTH`` (or ``--auth-env NAME``): each header line sent; none in argv."""
    trace = jaeger()["data"][0]
    with StoreServer({"/api/traces/": json_answer({"data": [trace]})}) as store:
        url = f"{store.url}/api/traces/{trace['traceID']}"
        monkeypatch.setenv(
            "OTEL_STALL_STORE_AUTH", "Authorization: Bearer s3cret\nX-Scope-OrgID: t1"
        )
        _replay([url], capsys)
        monkeypatch.setenv("MY_STORE_TOKEN", "Authorization: Basic b64")
        _replay([url, "--auth-env", "MY_STORE_TOKEN"], capsys)
    first, second = store.requests
    assert (first.headers["authorization"], first.headers["x-scope-orgid"]) == (
        "Bearer s3cret",
        "t1",
    )
    assert second.headers["authorization"] == "Basic b64"
    assert "x-scope-orgid" not in second.headers


def test_auth_is_not_sent_along_a_redirect(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A redirect to another host:port is followed, without the auth header."""
    trace = jaeger()["data"][0]
    with StoreServer({"/api/traces/": json_answer({"data": [trace]})}) as target:
        moved = Answer(302, {}, headers={"Location": f"{target.url}/api/traces/x"})
        with StoreServer({"/": lambda _r: moved}) as store:
            monkeypatch.setenv("OTEL_STALL_STORE_AUTH", "Authorization: Bearer s3cret")
            code, report, err = _replay([f"{store.url}/api/traces/x"], capsys)
    assert len(report["runs"]) == 1, err
    assert store.requests[0].headers["authorization"] == "Bearer s3cret"
    assert "authorization" not in target.requests[0].headers
    assert code in (0, 1)


@pytest.mark.parametrize(
    ("env", "argv", "named"),
    [
        (
            {},
            ["--auth-env", "UNSET_STORE_TOKEN"],
            "--auth-env UNSET_STORE_TOKEN: the variable is not set",
        ),
        (
            {"OTEL_STALL_STORE_AUTH": "Bearer s3cret"},
            [],
            "OTEL_STALL_STORE_AUTH: expected 'Header: value'",
        ),
        ({"OTEL_STALL_STORE_TIMEOUT": "soon"}, [], "OTEL_STALL_STORE_TIMEOUT='soon' is invalid"),
    ],
    ids=["unset-variable", "no-header-name", "bad-timeout"],
)
def test_bad_store_settings_exit_2_and_never_print_the_secret(
    env: dict[str, str],
    argv: list[str],
    named: str,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A bad auth variable or setting: exit 2, naming the variable, never its value."""
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    with StoreServer({}) as store:
        code, _, err = _replay([f"{store.url}/api/traces/ab", *argv], capsys)
        assert store.requests == []
    assert code == 2
    assert named in err
    assert "s3cret" not in err


def test_a_store_that_never_answers_times_out(capsys: pytest.CaptureFixture[str]) -> None:
    """A listening socket that never accepts: exit 2 after ``--store-timeout``, naming the URL."""
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(1)
        url = f"http://127.0.0.1:{silent.getsockname()[1]}/api/traces/ab"
        started = time.monotonic()
        code, _, err = _replay([url, "--store-timeout", "0.5"], capsys)
        took = elapsed(started)
    assert code == 2
    assert f"{url}: no answer within 0.5s (--store-timeout)" in err
    assert took < 5


def test_a_slow_answer_stops_at_the_deadline(capsys: pytest.CaptureFixture[str]) -> None:
    """An answer dripping a byte at a time, each within the timeout: the deadline stops it."""
    body = orjson.dumps({"data": [jaeger()["data"][0]]})
    with StoreServer({"/api/traces/": lambda _r: Answer(200, raw=body, drip=0.05)}) as store:
        url = f"{store.url}/api/traces/ab"
        started = time.monotonic()
        code, _, err = _replay([url, "--store-timeout", "2", "--store-deadline", "1"], capsys)
        took = elapsed(started)
    assert code == 2
    assert f"{url}: the fetch took longer than its deadline of 1s (--store-deadline)" in err
    assert took < 5


def test_a_route_that_hangs_is_bounded_by_the_deadline(capsys: pytest.CaptureFixture[str]) -> None:
    """An accepted request never answered: the per-request timeout, then exit 2."""
    with StoreServer({"/": lambda _r: Answer(hang=True)}) as store:
        started = time.monotonic()
        code, _, err = _replay(
            [f"{store.url}/api/traces/ab", "--store-timeout", "0.5", "--store-deadline", "30"],
            capsys,
        )
        took = elapsed(started)
    assert code == 2
    assert "no answer within 0.5s" in err
    assert took < 5


@pytest.mark.parametrize(
    ("answer", "named"),
    [
        (
            Answer(404, {"data": None, "errors": [{"code": 404, "msg": "trace not found"}]}),
            'HTTP 404 Not Found: {"data":null,"errors":[{"code":404,"msg":"trace not found"',
        ),
        (Answer(401, {"message": "no token"}), "HTTP 401 Unauthorized (set the auth header"),
        (Answer(200, {"data": ["agent", "gateway"]}), "the answer is not a trace: a JSON object"),
        (Answer(200, raw=b"<html>Jaeger UI</html>"), "the answer is not JSON (it begins '<html>"),
    ],
    ids=["not-found", "unauthorised", "services-list", "html"],
)
def test_an_answer_that_is_no_trace_exits_2_naming_the_url(
    answer: Answer, named: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """An HTTP error or an answer holding no trace: exit 2, the URL and the reason on stderr."""
    with StoreServer({"/": lambda _r: answer}) as store:
        url = f"{store.url}/api/traces/ab"
        code, _, err = _replay([url], capsys)
    assert code == 2
    assert f"{url}: {named}" in err, err


def test_a_bad_or_unreachable_url_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    """No host, a bad port, nothing listening: exit 2, each naming the URL and the reason."""
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    for url, named in [
        ("http:///api/traces/ab", "not a URL with a host"),
        ("http://127.0.0.1:port/api/traces/ab", "bad port"),
        (f"http://127.0.0.1:{port}/api/traces/ab", "cannot reach the store"),
    ]:
        code, _, err = _replay([url], capsys)
        assert code == 2
        assert f"{url}: {named}" in err, err


def test_urls_and_files_mix_and_out_writes_every_span(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A URL beside a file: both read; ``--out`` writes each span of the URL's answers once."""
    trace = jaeger()["data"][0]
    with StoreServer({"/api/traces/": json_answer({"data": [trace]})}) as store:
        out = tmp_path / "out.jsonl"
        url = f"{store.url}/api/traces/{trace['traceID']}"
        code, report, err = _replay([url, str(GOLDEN), "--out", str(out)], capsys)
    assert code in (0, 1), err
    spans_in_golden = Replayer().analyse([str(GOLDEN)]).spans
    assert report["summary"]["spans"] == spans_in_golden + len(trace["spans"])
    assert report["summary"]["written"] == report["summary"]["spans"]
