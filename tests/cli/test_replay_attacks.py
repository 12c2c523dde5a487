"""Issue 21's attacks on replay, written as the attack: each failed before the fix.

Compression bombs (a gzip line, a zstd message and a zstd document, each
inflating to 1 GiB from about a megabyte or less), running out of memory, cut
compressed files, parent cycles and deep chains stored as files, and an
``--out`` that is its own input or sits in the input folder. Every span that
can be read is counted, and every problem is an error naming the file, where
in it, and the reason. Bomb files are made in the test's tmp dir.
"""

from __future__ import annotations

import gzip
import io
import json
import os
import re
import subprocess
import sys
import threading
import time
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
import pytest
import zstandard

from otel_stall import Replayer
from otel_stall.cli import main
from otel_stall.offline.inputs import InputChanged, open_input

ROOT = Path(__file__).resolve().parent.parent.parent
GOLDEN = ROOT / "tests" / "golden" / "formats"
LINES = (GOLDEN / "otlp.jsonl").read_bytes().splitlines(keepends=True)
SPANS_IN_DATASET = 40
MIB = 1 << 20
GIB = 1 << 30
RSS_BOUND = 512 * MIB
"""Generous: the default cap is 128 MiB. Before the fix a 1 GiB bomb peaked at 1-2 GB."""

# A child runs the command line as a grandchild and reports the grandchild's peak RSS,
# so nothing else this test process ever started counts towards it.
_MEASURE = """
import json, resource, subprocess, sys
limit = int(sys.argv[1])
def cap_memory():
    if limit:
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
proc = subprocess.run(sys.argv[2:], capture_output=True, preexec_fn=cap_memory)
peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024
print(json.dumps({"code": proc.returncode, "out": proc.stdout.decode(),
                  "err": proc.stderr.decode(), "peak": peak}))
"""


def replay_child(args: list[str], address_space: int = 0) -> tuple[int, Any, str, int]:
    """``otel-stall replay ARGS --format json`` in a child: exit code, report, stderr, peak RSS."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    command = [sys.executable, "-m", "otel_stall", "replay", *args, "--format", "json"]
    proc = subprocess.run(
        [sys.executable, "-c", _MEASURE, str(address_space), *command],
        capture_output=True,
        env=env,
        timeout=240,
        check=True,
    )
    run = json.loads(proc.stdout)
    report = json.loads(run["out"]) if run["out"].startswith("{") else None
    return run["code"], report, run["err"], run["peak"]


def run_cli(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, Any, str]:
    """``otel-stall replay ARGS --format json`` in this process: exit code, report, stderr."""
    code = main(["replay", *args, "--format", "json"])
    captured = capsys.readouterr()
    return code, json.loads(captured.out), captured.err


def frames(path: Path) -> list[bytes]:
    """The length-prefixed messages of a protobuf file, each with its prefix."""
    data = path.read_bytes()
    out = []
    offset = 0
    while offset < len(data):
        size = int.from_bytes(data[offset : offset + 4], "big")
        out.append(data[offset : offset + 4 + size])
        offset += 4 + size
    return out


def spans_in_lines(data: bytes) -> int:
    """Spans in the whole OTLP/JSON lines of ``data`` (a cut last line holds none)."""
    total = 0
    for line in data.split(b"\n")[:-1]:
        for rs in orjson.loads(line)["resourceSpans"]:
            total += sum(len(ss["spans"]) for ss in rs["scopeSpans"])
    return total


def noisy(line: bytes) -> bytes:
    """An OTLP/JSON line with 1 KB of random hex in its resource: it does not compress away."""
    obj = orjson.loads(line)
    for rs in obj["resourceSpans"]:
        noise = {"key": "noise", "value": {"stringValue": os.urandom(512).hex()}}
        rs["resource"]["attributes"].append(noise)
    return orjson.dumps(obj) + b"\n"


# -- bombs -------------------------------------------------------------------------------


def _zstd_frame(prefix: bytes, filler: bytes, suffix: bytes) -> bytes:
    """One zstd frame: ``prefix``, 1 GiB of ``filler``, ``suffix``; compressed 1 MiB at a time."""
    compressor = zstandard.ZstdCompressor(level=1).compressobj()
    parts = [compressor.compress(prefix)]
    block = filler * (MIB // len(filler))
    parts += [compressor.compress(block) for _ in range(GIB // MIB)]
    parts += [compressor.compress(suffix), compressor.flush()]
    return b"".join(parts)


def gzip_line_bomb(tmp_path: Path) -> Path:
    """Good lines around one 1 GiB OTLP line (line 2), in 1 MiB gzip members: about 1.5 MB."""
    path = tmp_path / "bomb.jsonl.gz"
    # A period of 8 bytes compresses as well as one repeated byte and inflates twice as fast.
    filler = gzip.compress(b"abcdefgh" * (MIB // 8), compresslevel=9, mtime=0)
    with path.open("wb") as f:
        f.write(gzip.compress(LINES[0] + b'{"resourceSpans":[{"x":"', mtime=0))
        for _ in range(GIB // MIB):
            f.write(filler)
        f.write(gzip.compress(b'"}]}\n' + b"".join(LINES[1:]), mtime=0))
    return path


def zstd_message_bomb(tmp_path: Path) -> Path:
    """Protobuf messages in the legacy zstd mode; the second inflates to 1 GiB."""
    path = tmp_path / "bomb.binpb"
    good = frames(GOLDEN / "otlp.binpb")
    bomb = _zstd_frame(b"\x0a", b"\x00", b"")
    path.write_bytes(good[0] + len(bomb).to_bytes(4, "big") + bomb + b"".join(good[1:]))
    return path


def zstd_document_bomb(tmp_path: Path) -> Path:
    """A whole-file zstd OTLP/JSON document of 1 GiB (a padding string)."""
    path = tmp_path / "bomb.json.zst"
    head = b'{\n  "resourceSpans": [],\n  "padding": "'
    path.write_bytes(_zstd_frame(head, b" ", b'"\n}\n'))
    return path


FIRST = len(frames(GOLDEN / "otlp.binpb")[0])
"""The byte offset of the second message, where the zstd bomb is."""
BOMBS: dict[str, tuple[Callable[[Path], Path], str, int]] = {
    "gzip-line": (gzip_line_bomb, "bomb.jsonl.gz:2: line over the 128 MiB cap", 40),
    "zstd-message": (
        zstd_message_bomb,
        f".binpb:@{FIRST}: a zstd message that inflates to over",
        40,
    ),
    "zstd-document": (zstd_document_bomb, "a JSON document over the 128 MiB cap", 0),
}


@pytest.mark.slow
@pytest.mark.parametrize("name", list(BOMBS))
def test_a_compression_bomb_is_skipped_in_bounded_memory(name: str, tmp_path: Path) -> None:
    """1 GiB inflated from a small file: an error naming the file, the line or offset, the flag."""
    make, error, spans = BOMBS[name]
    path = make(tmp_path)
    assert path.stat().st_size < 2 * MIB
    code, report, err, peak = replay_child([str(path)])
    assert code == 2, err
    assert "Traceback" not in err
    (line,) = [line for line in err.splitlines() if error in line]
    assert str(path) in line
    assert "--max-message-mib" in line
    assert report["summary"]["spans"] == spans
    assert peak < RSS_BOUND, f"peak RSS {peak / MIB:.0f} MiB"


def test_a_raised_cap_reads_what_the_default_refuses(tmp_path: Path) -> None:
    """--max-message-mib moves the cap: a 2 MiB line is refused at 1 MiB and read at 3."""
    line = orjson.loads(LINES[0])
    line["resourceSpans"][0]["resource"]["attributes"].append(
        {"key": "padding", "value": {"stringValue": "x" * (2 * MIB)}}
    )
    path = tmp_path / "big.jsonl"
    path.write_bytes(orjson.dumps(line) + b"\n" + b"".join(LINES[1:]))
    small = Replayer(max_message=MIB).analyse([str(path)])
    large = Replayer(max_message=3 * MIB).analyse([str(path)])
    assert [(e.line, "1 MiB cap" in e.message) for e in small.errors] == [(1, True)]
    assert large.errors == []
    assert large.spans == SPANS_IN_DATASET
    assert small.spans == SPANS_IN_DATASET - spans_in_lines(LINES[0])


def test_running_out_of_memory_is_exit_2_with_an_error_line(tmp_path: Path) -> None:
    """With the cap raised past what the machine holds, MemoryError is exit 2, not a traceback."""
    path = zstd_document_bomb(tmp_path)
    code, _, err, _ = replay_child([str(path), "--max-message-mib", "1024"], 768 * MIB)
    assert "Traceback" not in err
    assert "otel-stall: out of memory" in err
    assert code == 2


# -- cut compressed files ----------------------------------------------------------------


def _gzip(data: bytes) -> bytes:
    return gzip.compress(data, mtime=0)


def _zstd(data: bytes) -> bytes:
    return zstandard.ZstdCompressor().compress(data)


def _inflate_gzip(data: bytes) -> bytes:
    return zlib.decompressobj(31).decompress(data)


def _inflate_zstd(data: bytes) -> bytes:
    return bytes(zstandard.ZstdDecompressor().decompressobj().decompress(data))


@pytest.mark.parametrize(
    ("suffix", "name", "compress", "inflate"),
    [(".gz", "gzip", _gzip, _inflate_gzip), (".zst", "zstd", _zstd, _inflate_zstd)],
    ids=["gzip", "zstd"],
)
def test_a_cut_compressed_file_keeps_the_spans_before_the_cut(
    suffix: str,
    name: str,
    compress: Callable[[bytes], bytes],
    inflate: Callable[[bytes], bytes],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A .gz or .zst cut in half: every span before the cut counts, and an error says where."""
    whole = compress(b"".join(noisy(line) for line in LINES * 100))
    cut = whole[: len(whole) // 2]
    path = tmp_path / f"cut.jsonl{suffix}"
    path.write_bytes(cut)
    expected = spans_in_lines(inflate(cut))
    assert 0 < expected < SPANS_IN_DATASET * 100
    code, report, err = run_cli([str(path)], capsys)
    assert code == 2
    assert report["summary"]["spans"] == expected
    assert f"{path}:@{len(cut)}: the {name} stream is cut short" in err


# The reader inflates gzip itself now (GzipFile lost a cut file's spans): two guards.


def test_a_complete_multi_member_gzip_reads_every_member(tmp_path: Path) -> None:
    """Members one after another (and zero padding after them) read as one stream, no error."""
    path = tmp_path / "members.jsonl.gz"
    path.write_bytes(b"".join(_gzip(line) for line in LINES) + b"\x00" * 1024)
    result = Replayer().analyse([str(path)])
    assert result.errors == []
    assert result.spans == SPANS_IN_DATASET


def test_garbage_after_gzip_is_an_error_after_the_spans(tmp_path: Path) -> None:
    """Bytes after the last member that are not gzip: the spans count, then an error says where."""
    data = _gzip(b"".join(LINES))
    path = tmp_path / "trailing.jsonl.gz"
    path.write_bytes(data + b"not gzip at all")
    result = Replayer().analyse([str(path)])
    assert result.spans == SPANS_IN_DATASET
    ((error),) = result.errors
    assert (error.offset, "cannot decompress the gzip data" in error.message) == (len(data), True)


# -- parent chains stored as files -------------------------------------------------------


def _span(span_id: int, parent: int | None, name: str, attributes: dict[str, str]) -> Any:
    return {
        "traceId": "0" * 31 + "1",
        "spanId": f"{span_id + 1:016x}",
        "parentSpanId": "" if parent is None else f"{parent + 1:016x}",
        "name": name,
        "startTimeUnixNano": str(1_000 + span_id),
        "endTimeUnixNano": str(2_000 + span_id),
        "attributes": [{"key": k, "value": {"stringValue": v}} for k, v in attributes.items()],
    }


def chain_file(tmp_path: Path, count: int, cycle: bool) -> Path:
    """An agent span and ``count`` model spans, each the parent of the next, or all in a cycle."""
    model = {"gen_ai.operation.name": "chat"}
    agent = {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "researcher"}
    spans = [_span(0, None, "invoke_agent researcher", agent)]
    for i in range(1, count + 1):
        parent = (i % count) + 1 if cycle else i - 1
        spans.append(_span(i, parent, "chat m", model))
    message = {"resourceSpans": [{"scopeSpans": [{"spans": spans}]}]}
    path = tmp_path / ("cycle.jsonl" if cycle else "chain.jsonl")
    path.write_bytes(orjson.dumps(message) + b"\n")
    return path


@pytest.mark.timeout(60)
@pytest.mark.parametrize("cycle", [True, False], ids=["cycle", "deep-chain"])
def test_a_cyclic_or_deep_parent_chain_replays_in_one_pass(
    cycle: bool, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """20,000 model spans in a parent cycle or a 20,000-deep chain: every span counted, in time.

    A model span inside another is the same call: the chain is one model call in
    the agent's run; the cycle has no outermost model span, so no call and no run.
    """
    # Before the fix each span walked up to 10,000 hops anew (minutes for the cycle), and
    # spans deeper than 10,000 fell out of their agent's run into a second one.
    path = chain_file(tmp_path, 20_000, cycle)
    code, report, err = run_cli([str(path)], capsys)
    assert (code, err) == (0, "")
    assert report["summary"]["spans"] == 20_001
    assert len(report["runs"]) == (0 if cycle else 1)


def deep_models_file(tmp_path: Path, depth: int) -> Path:
    """An agent span over a ``depth``-deep chain of plain spans, a model span under each."""
    model = {"gen_ai.operation.name": "chat"}
    agent = {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "researcher"}
    spans = [_span(0, None, "invoke_agent researcher", agent)]
    for level in range(1, depth + 1):
        spans.append(_span(level, level - 1, "step", {}))
        spans.append(_span(depth + level, level, "chat m", model))
    path = tmp_path / "deep-models.jsonl"
    message = {"resourceSpans": [{"scopeSpans": [{"spans": spans}]}]}
    path.write_bytes(orjson.dumps(message) + b"\n")
    return path


@pytest.mark.timeout(60)
def test_a_deep_chain_with_a_model_span_at_every_level_replays_in_one_pass(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """5,000 plain spans deep, a model call under each: one run of 5,000 model calls.

    No model span is inside another, so each is a call of the agent's run. Before
    the run model each model span walked the chain above it anew: quadratic, 4.3 s
    of CPU for this trace, against 0.14 s in one pass.
    """
    path = deep_models_file(tmp_path, 5_000)
    code, report, err = run_cli([str(path)], capsys)
    assert (code, err) == (0, "")
    assert report["summary"]["spans"] == 10_001
    assert report["summary"]["recognised"]["model_calls"] == 5_000
    (run,) = report["runs"]
    assert (run["agent"], run["rounds"]) == ("researcher", 5_000)


# -- --out over an input -----------------------------------------------------------------


def test_out_over_its_own_input_is_refused_and_the_input_kept(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`replay in.jsonl --out in.jsonl` exits 2 before writing: the input keeps every byte."""
    source = tmp_path / "in.jsonl"
    source.write_bytes(b"".join(LINES))
    link = tmp_path / "link.jsonl"
    os.link(source, link)
    for out in (source, link, tmp_path / "." / "in.jsonl"):
        assert main(["replay", str(source), "--out", str(out)]) == 2
        assert f"--out {out} is the input {source}" in capsys.readouterr().err
    assert source.read_bytes() == b"".join(LINES)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("where", ["out.jsonl", "sub/out.jsonl"])
def test_out_inside_the_input_folder_is_refused_before_writing(
    where: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """An --out in the folder being replayed (or below it) exits 2 and creates nothing."""
    folder = tmp_path / "traces"
    (folder / "sub").mkdir(parents=True)
    (folder / "spans.jsonl").write_bytes(b"".join(LINES))
    out = folder / where
    assert main(["replay", str(folder), "--out", str(out)]) == 2
    assert f"--out {out} is inside the input directory {folder}" in capsys.readouterr().err
    assert not out.exists()


def test_the_writer_replaces_its_target_only_once_complete(tmp_path: Path) -> None:
    """The library writer given its own input as target: every span is written, none lost."""
    source = tmp_path / "in.jsonl"
    source.write_bytes(b"".join(LINES))
    replayer = Replayer()
    result = replayer.analyse([str(source)])
    written = replayer.write_json_lines(result, [str(source)], str(source))
    assert written == result.spans == SPANS_IN_DATASET
    assert spans_in_lines(source.read_bytes()) == SPANS_IN_DATASET
    assert b"stall.signature" in source.read_bytes()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.jsonl"]  # no temporary left


class Bounded(io.FileIO):
    """A real file that refuses to grow past 16 MiB: a writer that reads its own output stops."""

    def write(self, data: Any) -> int:
        if self.tell() + len(data) > 16 * MIB:
            raise OSError("the output grew past 16 MiB: it is reading itself")
        return super().write(data)


@pytest.mark.parametrize("existed", [False, True], ids=["new", "already-an-input"])
def test_the_writer_never_reads_what_it_writes(existed: bool, tmp_path: Path) -> None:
    """Writing into the replayed folder: the output file is never read back as input."""
    folder = tmp_path / "traces"
    folder.mkdir()
    (folder / "spans.jsonl").write_bytes(b"".join(LINES))
    out_path = folder / "zz-out.jsonl"  # listed after the input: read after spans were written
    if existed:
        out_path.write_bytes(b"")
    replayer = Replayer()
    result = replayer.analyse([str(folder)])
    with Bounded(out_path, "w") as out:
        written = replayer.write_json_lines(result, [str(folder)], out)
    assert written == result.spans == SPANS_IN_DATASET
    assert spans_in_lines(out_path.read_bytes()) == SPANS_IN_DATASET
    messages = [e.message for e in result.errors]
    assert messages == (["not read again: it is the file the output is being written to"] * existed)


# -- a full disk (issue 27) ----------------------------------------------------------------

_FILE_SIZE_LIMITED = """
import resource, subprocess, sys
limit = int(sys.argv[1])
def cap_file_size():
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
proc = subprocess.run(sys.argv[2:], capture_output=True, preexec_fn=cap_file_size)
sys.stdout.write(f"{proc.returncode}\\n{proc.stderr.decode()}")
"""


def replay_file_size_limited(args: list[str], limit: int) -> tuple[int, str]:
    """``otel-stall replay ARGS`` in a child whose files cannot grow past ``limit`` bytes.

    A write past the limit fails with EFBIG, as on a full disk (Python ignores SIGXFSZ).
    """
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    command = [sys.executable, "-m", "otel_stall", "replay", *args]
    proc = subprocess.run(
        [sys.executable, "-c", _FILE_SIZE_LIMITED, str(limit), *command],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=True,
    )
    code, _, err = proc.stdout.partition("\n")
    return int(code), err


@pytest.mark.parametrize(
    ("flag", "name"),
    [
        ("-o", "report.json"),
        ("-o", "report.md"),
        ("-o", "report.html"),
        ("-o", "report.txt"),
        ("--out", "out.jsonl"),
    ],
)
def test_a_full_disk_keeps_the_previous_file_and_exits_2(
    flag: str, name: str, tmp_path: Path
) -> None:
    """A write cut short by a file-size limit leaves the old file whole; exit 2 names the flag."""
    source = tmp_path / "in.jsonl"
    source.write_bytes(b"".join(LINES))
    target = tmp_path / name
    old = b'{"the": "previous report"}\n'
    target.write_bytes(old)
    code, err = replay_file_size_limited(
        [str(source), flag, str(target), "--all", "--fail-on", "break"], limit=2048
    )
    assert code == 2, err
    assert "Traceback" not in err
    long_flag = "--report" if flag == "-o" else flag
    assert f"otel-stall: {long_flag} {target}: File too large" in err
    assert target.read_bytes() == old
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(["in.jsonl", name])


# -- inputs that change or block (issue 27) ------------------------------------------------


def copies(start: int, count: int) -> bytes:
    """``count`` copies of the dataset, each with its own trace ids (numbered from ``start``)."""
    text = b"".join(LINES)
    return b"".join(
        re.sub(rb'"traceId":"....', b'"traceId":"%04x' % n, text)
        for n in range(start, start + count)
    )


def out_counts(path: Path) -> tuple[int, int]:
    """Spans in an ``--out`` file, and how many of them carry ``stall.signature`` (tool spans)."""
    spans = signed = 0
    for line in path.read_bytes().splitlines():
        for rs in orjson.loads(line)["resourceSpans"]:
            for ss in rs["scopeSpans"]:
                for span in ss["spans"]:
                    spans += 1
                    signed += any(a["key"] == "stall.signature" for a in span["attributes"])
    return spans, signed


@pytest.mark.timeout(120)
def test_an_input_growing_while_replayed_gives_one_answer(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A capture appended to during `replay --out`: the report and --out hold the same spans.

    The attack of issue 27: the report read 33,220 spans and --out held 39,600, with 2,900 tool
    spans lacking stall.* and nothing on stderr. Both passes now read the file as first opened.
    """
    source = tmp_path / "live.jsonl"
    source.write_bytes(copies(0, 100))
    out = tmp_path / "out.jsonl"
    stop = threading.Event()

    def appending() -> None:
        fd = os.open(source, os.O_WRONLY | os.O_APPEND)
        n = 100
        try:
            while not stop.is_set():
                os.write(fd, copies(n, 1))
                n += 1
                time.sleep(0.001)
        finally:
            os.close(fd)

    writer = threading.Thread(target=appending)
    writer.start()
    try:
        main(["replay", str(source), "--out", str(out), "--format", "json"])
    finally:
        stop.set()
        writer.join()
    captured = capsys.readouterr()
    report = json.loads(captured.out)
    spans, signed = out_counts(out)
    assert spans == report["summary"]["spans"] == report["summary"]["written"]
    assert signed == report["summary"]["recognised"]["tool_calls"]
    assert f"otel-stall: {source}: grew by " in captured.err
    assert "Traceback" not in captured.err


def test_growth_between_the_passes_is_left_out_of_both(tmp_path: Path) -> None:
    """Spans appended after pass one are in neither the report nor --out; a note says so."""
    source = tmp_path / "live.jsonl"
    source.write_bytes(copies(0, 2))
    replayer = Replayer()
    result = replayer.analyse([str(source)])
    with source.open("ab") as f:
        f.write(copies(2, 3))
    written = replayer.write_json_lines(result, [str(source)], str(tmp_path / "out.jsonl"))
    assert written == result.spans == 2 * SPANS_IN_DATASET
    (note,) = result.skipped
    assert str(note).startswith(f"{source}: grew by {len(copies(2, 3)):,} bytes while replayed")


@pytest.mark.parametrize("change", ["replaced", "rewritten", "shrunk"])
def test_an_input_changed_between_the_passes_fails_and_writes_nothing(
    change: str, tmp_path: Path
) -> None:
    """A file replaced or rewritten after pass one: --out fails naming it and writes nothing."""
    source = tmp_path / "in.jsonl"
    source.write_bytes(copies(0, 2))
    replayer = Replayer()
    result = replayer.analyse([str(source)])
    if change == "replaced":
        other = tmp_path / "other.jsonl"
        other.write_bytes(copies(5, 2))
        os.replace(other, source)
    elif change == "rewritten":
        source.write_bytes(copies(5, 2))
        os.utime(source, ns=(1, 1))
    else:
        source.write_bytes(copies(5, 1))
    out = tmp_path / "out.jsonl"
    with pytest.raises(InputChanged) as raised:
        replayer.write_json_lines(result, [str(source)], str(out))
    assert str(raised.value.error).startswith(f"{source}: ")
    assert "since replay read it" in str(raised.value)
    assert not out.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.jsonl"]


@pytest.mark.timeout(30)
def test_a_fifo_in_an_input_folder_is_skipped_with_a_note(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A FIFO among the files of an input folder is skipped, not opened: the replay ends."""
    folder = tmp_path / "traces"
    folder.mkdir()
    (folder / "spans.jsonl").write_bytes(b"".join(LINES))
    fifo = folder / "pipe.jsonl"
    os.mkfifo(fifo)
    code, report, err = run_cli([str(folder), "--fail-on", "break"], capsys)
    assert report["summary"]["spans"] == SPANS_IN_DATASET
    assert f"otel-stall: {fifo}: not a regular file; skipped" in err
    assert code == 1


@pytest.mark.timeout(30)
def test_a_fifo_swapped_in_after_the_listing_is_refused_without_blocking(tmp_path: Path) -> None:
    """Opening an input never blocks: a FIFO where a file was listed is an error at once."""
    fifo = tmp_path / "spans.jsonl"
    os.mkfifo(fifo)
    with pytest.raises(OSError, match="not a regular file"):
        open_input(str(fifo))


# -- bad configuration files (issue 27) ----------------------------------------------------

DEEP = 50_000
BAD_FILES: dict[str, tuple[str, bytes, str]] = {
    "conventions-bad-utf8": (
        "--conventions",
        b'[[convention]]\nname = "caf\xe9"\n',
        "(file): not UTF-8 text (byte 26). Fix: save the file as UTF-8",
    ),
    "conventions-deep-toml": (
        "--conventions",
        b"x = " + b"[" * DEEP + b"]" * DEEP + b"\n",
        "(syntax): nested too deeply to read",
    ),
    "config-deep-toml": (
        "--config",
        b"x = " + b"[" * DEEP + b"]" * DEEP + b"\n",
        "nested too deeply to read as TOML",
    ),
    "config-deep-json": (
        "--config",
        b'{"x": ' + b"[" * DEEP + b"]" * DEEP + b"}",
        "nested too deeply to read as JSON",
    ),
    "config-bad-utf8": (
        "--config",
        b"warn_at = 3\n# caf\xe9\n",
        "not UTF-8 text (byte 17); save the file as UTF-8",
    ),
    "config-string-list": (
        "--config",
        b'exempt_tools = "abc"\n',
        "exempt_tools: expected a list of tool names, got 'abc'; "
        'write it as exempt_tools = ["name", "glob*"]',
    ),
    "config-policy-not-a-table": ("--config", b"policy = 3\n", "policy: must be a table"),
}


@pytest.mark.parametrize("case", BAD_FILES)
def test_a_bad_settings_file_is_exit_2_naming_the_file_and_the_fix(
    case: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Bad UTF-8, 50,000-deep TOML or JSON, a string for a list: exit 2 and one message line.

    The attack of issue 27: exit 1 with a UnicodeDecodeError or RecursionError traceback, or
    ``exempt_tools = "abc"`` taken without a word.
    """
    flag, content, expected = BAD_FILES[case]
    path = tmp_path / ("settings.json" if case.endswith("json") else "settings.toml")
    path.write_bytes(content)
    source = tmp_path / "in.jsonl"
    source.write_bytes(b"".join(LINES))
    code = main(["replay", str(source), flag, str(path)])
    err = capsys.readouterr().err
    assert code == 2
    assert "Traceback" not in err
    assert str(path) in err
    assert expected in err


def test_serve_names_a_deep_conventions_file(tmp_path: Path) -> None:
    """`serve --conventions deep.toml` exits 2 with a message naming the file, not the parser's."""
    path = tmp_path / "deep.toml"
    path.write_bytes(b"x = " + b"[" * DEEP + b"]" * DEEP + b"\n")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run(
        [sys.executable, "-m", "otel_stall", "serve", "--grpc", "127.0.0.1:0", "--http", "off",
         "--metrics", "off", "--conventions", str(path)],
        capture_output=True, text=True, env=env, timeout=60, check=False,
    )  # fmt: skip
    assert proc.returncode == 2
    assert f"{path}: (syntax): nested too deeply to read" in proc.stderr
    assert "Traceback" not in proc.stderr


# -- Ctrl-C while starting (issue 27) ------------------------------------------------------

_INTERRUPT_AT = """
import os, signal, sys
event, name = sys.argv[1], sys.argv[2]
def interrupt(seen, args):
    if seen == event and (not name or args[0] == name):
        os.kill(os.getpid(), signal.SIGINT)
sys.addaudithook(interrupt)
sys.argv = ["otel-stall", *sys.argv[3:]]
import runpy
runpy.run_module("otel_stall", run_name="__main__")
"""


@pytest.mark.parametrize(
    ("event", "name", "args"),
    [
        ("import", "otel_stall.cli", ["replay", str(GOLDEN / "otlp.jsonl")]),
        ("socket.bind", "", ["serve", "--grpc", "127.0.0.1:0", "--http", "127.0.0.1:0",
                             "--metrics", "127.0.0.1:0"]),
    ],
    ids=["loading", "serve-binding"],
)  # fmt: skip
def test_ctrl_c_while_starting_exits_130_without_a_traceback(
    event: str, name: str, args: list[str]
) -> None:
    """A SIGINT while the command loads or the gateway binds its ports: exit 130, no traceback.

    The signal is sent from an audit hook at the named event, so it lands there every time.
    """
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run(
        [sys.executable, "-c", _INTERRUPT_AT, event, name, *args],
        capture_output=True, text=True, env=env, timeout=60, check=False,
    )  # fmt: skip
    assert proc.returncode == 130, proc.stderr
    assert "Traceback" not in proc.stderr
    assert "KeyboardInterrupt" not in proc.stderr
