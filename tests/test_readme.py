"""The README's quickstarts run as written and print what the README shows.

Each quickstart is the fenced block after a ``<!-- test: NAME -->`` comment; the
output it should print is the block after ``<!-- output: NAME -->``. The blocks are
read from README.md, never copied here, so the README cannot drift from what the
code does. They run in a subprocess with this virtualenv's ``python`` and
``otel-stall`` first on ``PATH``, through the real SDK and a real gateway.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

import pytest

from otel_stall.semconv import StallAttributes, StallEventAttributes, StallMetricNames

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
MARKED_BLOCK = re.compile(
    r"<!-- (?P<role>test|output): (?P<name>[\w-]+) -->\n```(?P<lang>\w*)\n(?P<body>.*?)^```$",
    re.S | re.M,
)
TIMEOUT = 120.0


def readme_blocks(role: str) -> dict[str, tuple[str, str]]:
    """``name -> (language, text)`` of the README's blocks marked with ``role``."""
    text = README.read_text(encoding="utf-8")
    return {
        m["name"]: (m["lang"], m["body"]) for m in MARKED_BLOCK.finditer(text) if m["role"] == role
    }


def normalise(text: str) -> str:
    """Trace and span ids vary from run to run; everything else must match."""
    text = re.sub(r"\b[0-9a-f]{32}\b", "<trace-id>", text)
    return re.sub(r"\b[0-9a-f]{16}\b", "<span-id>", text)


def quickstart_env(**extra: str) -> dict[str, str]:
    """A user's shell: this venv first on PATH, 80 columns, no OTEL_* settings of ours.

    PYTEST_CURRENT_TEST stays, so an internal error in otel-stall raises rather than
    failing open, and shows in the test's failure.
    """
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    bin_dir = str(Path(sys.executable).parent)
    env["PATH"] = bin_dir + os.pathsep + env.get("PATH", "")
    env["COLUMNS"] = "80"  # the README's report was printed at 80 columns
    env.update(extra)
    return env


def run_quickstart(
    name: str, cwd: Path, env: dict[str, str], ports: Mapping[int, int] | None = None
) -> subprocess.CompletedProcess[str]:
    """Run the README block ``name`` in ``cwd``: Python blocks as a file, shell blocks in bash.

    ``ports`` swaps the README's default ports for free ones, and nothing else.
    Each run gets its own process group, stopped whole afterwards, so a server a
    block starts in the background never outlives the test.
    """
    lang, body = readme_blocks("test")[name]
    for default, port in (ports or {}).items():
        body = body.replace(f":{default}", f":{port}")
    if lang == "python":
        script = cwd / f"{name}.py"
        script.write_text(body, encoding="utf-8")
        argv = [sys.executable, script.name]
    else:
        assert lang == "bash", f"README block {name}: unknown language {lang!r}"
        argv = ["bash", "-c", body]
    proc = subprocess.Popen(
        argv, cwd=cwd, env=env, text=True, start_new_session=True,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip
    try:
        stdout, stderr = proc.communicate(timeout=TIMEOUT)
    finally:
        stop_group(proc)
    return subprocess.CompletedProcess(argv, proc.returncode, stdout, stderr)


def stop_group(proc: subprocess.Popen[str]) -> None:
    """Stop what is left of the process group the quickstart started."""
    try:
        os.killpg(proc.pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def expected(name: str) -> str:
    """The output the README shows for quickstart ``name``."""
    return readme_blocks("output")[name][1]


def free_port() -> int:
    """A loopback port nobody listens on right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@pytest.fixture(scope="module")
def live_dir(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """A directory where the live quickstart ran (it leaves ``spans.jsonl``), and its output."""
    cwd = tmp_path_factory.mktemp("live")
    result = run_quickstart("live", cwd, quickstart_env())
    assert result.returncode == 0, result.stderr
    return cwd, result.stdout


def test_readme_is_short() -> None:
    """The README stays at 200 lines or fewer."""
    assert len(README.read_text(encoding="utf-8").splitlines()) <= 200


def test_every_quickstart_shows_its_output() -> None:
    """Each quickstart block has an expected-output block, and the three are there."""
    names = {"live", "replay", "gateway"}
    assert set(readme_blocks("test")) == names
    assert set(readme_blocks("output")) == names


def test_readme_gives_the_demo_and_test_commands() -> None:
    """The README offers `make demo` and `make test`, the two commands a fresh machine needs."""
    text = README.read_text(encoding="utf-8")
    assert re.search(r"^make demo\b", text, re.M)
    assert re.search(r"^make test\b", text, re.M)


PROJECT = "https://github.com/otel-stall/otel-stall"
"""The project URL of pyproject.toml: the README's links are absolute under it."""
OWN_LINK = re.compile(re.escape(PROJECT) + r"/(?:blob|tree)/main/([^)#]+)(?:#([^)]*))?\)")


def test_readme_links_are_absolute_and_resolve() -> None:
    """No relative link (a package index page breaks them); each link to the repository resolves."""
    text = README.read_text(encoding="utf-8")
    links = re.findall(r"\]\(([^)]+)\)", text)
    assert [link for link in links if "://" not in link and not link.startswith("#")] == []
    own = OWN_LINK.findall(text)
    assert own
    assert [path for path, _ in own if not (ROOT / path).exists()] == []
    assert PROJECT in (ROOT / "pyproject.toml").read_text(encoding="utf-8")


def heading_anchors(page: Path) -> set[str]:
    """The anchors MkDocs gives a page's headings (its toc extension's default slugs)."""
    headings = re.findall(r"^#+ (.+)$", page.read_text(encoding="utf-8"), re.M)
    return {re.sub(r"[\s-]+", "-", re.sub(r"[^\w\s-]", "", h.lower()).strip()) for h in headings}


def test_readme_anchors_resolve() -> None:
    """Every link from the README to a section of a docs page names a heading of that page."""
    text = README.read_text(encoding="utf-8")
    links = [(page, a) for page, a in OWN_LINK.findall(text) if page.startswith("docs/") and a]
    assert links
    assert [(page, a) for page, a in links if a not in heading_anchors(ROOT / page)] == []


def test_readme_names_only_real_attributes() -> None:
    """Every `stall.*` name in the README is an attribute, event or metric the code defines."""
    known = {
        value
        for cls in (StallAttributes, StallEventAttributes, StallMetricNames)
        for name, value in vars(cls).items()
        if name.isupper() and isinstance(value, str)
    }
    named = set(re.findall(r"`(stall\.[\w.]+)`", README.read_text(encoding="utf-8")))
    assert named
    assert sorted(named - known) == []


def test_live_quickstart(live_dir: tuple[Path, str]) -> None:
    """The live quickstart prints each finding as the README shows, and writes its spans."""
    cwd, stdout = live_dir
    assert normalise(stdout) == normalise(expected("live"))
    assert (cwd / "spans.jsonl").stat().st_size > 0


def test_replay_quickstart(live_dir: tuple[Path, str]) -> None:
    """Replaying the live quickstart's spans prints the README's report and exits 1 (a stall)."""
    cwd, _ = live_dir
    result = run_quickstart("replay", cwd, quickstart_env())
    assert normalise(result.stdout) == normalise(expected("replay")), result.stderr
    assert result.returncode == 1


@pytest.mark.e2e
def test_gateway_quickstart(tmp_path: Path) -> None:
    """The gateway quickstart, on free loopback ports, scrapes the README's metrics."""
    if shutil.which("curl") is None:
        if os.environ.get("CI") == "true":
            pytest.fail("curl is missing: .ci/run installs it")
        pytest.skip("the gateway quickstart uses curl, which is not installed")
    ports = gateway_ports()
    result = run_quickstart("gateway", tmp_path, gateway_env(ports), ports)
    # One line per series: Prometheus gives no order among them.
    assert sorted(result.stdout.splitlines()) == sorted(expected("gateway").splitlines()), (
        result.stderr + (tmp_path / "gateway.log").read_text(encoding="utf-8")
    )
    assert result.returncode == 0


def gateway_ports() -> dict[int, int]:
    """Free loopback ports for the README's default gateway ports."""
    return {4317: free_port(), 4318: free_port(), 9464: free_port()}


def gateway_env(ports: Mapping[int, int]) -> dict[str, str]:
    """The gateway quickstart's environment: the gateway listens on ``ports``."""
    return quickstart_env(
        OTEL_STALL_GATEWAY_GRPC=f"127.0.0.1:{ports[4317]}",
        OTEL_STALL_GATEWAY_HTTP=f"127.0.0.1:{ports[4318]}",
        OTEL_STALL_GATEWAY_METRICS=f"127.0.0.1:{ports[9464]}",
    )


def update_readme(workdir: Path) -> None:
    """Rewrite the README's output blocks with what the quickstarts print now.

    For a deliberate change of output: ``python tests/test_readme.py --update``,
    then read the diff before committing it.
    """
    outputs = {"live": run_quickstart("live", workdir, quickstart_env()).stdout}
    outputs["replay"] = run_quickstart("replay", workdir, quickstart_env()).stdout
    ports = gateway_ports()
    outputs["gateway"] = run_quickstart("gateway", workdir, gateway_env(ports), ports).stdout
    text = README.read_text(encoding="utf-8")
    for name, output in outputs.items():
        lang, old = readme_blocks("output")[name]
        marker = f"<!-- output: {name} -->\n```{lang}\n"
        text = text.replace(marker + old, marker + output)
    README.write_text(text, encoding="utf-8")


if __name__ == "__main__":
    import tempfile

    if sys.argv[1:] != ["--update"]:
        sys.exit("usage: python tests/test_readme.py --update")
    with tempfile.TemporaryDirectory() as tmp:
        update_readme(Path(tmp))
