"""The same call signs the same on every host: whatever its temp dir, locale or timezone.

A corpus is signed here, in this process (whatever its own ``TMPDIR``), and in
fresh interpreters whose environment differs: a custom ``TMPDIR`` that exists,
another locale, another timezone, all three, and none set at all. Live
signatures, replayed ones and a gateway's, taken on different machines, must
agree. The corpus holds a path under the very temp dir the subprocess is told
to use: it must not be treated as a temp root there and a plain path here.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest

from otel_stall import Normaliser, Signer, Status

SIGN_CORPUS = """
import json, sys
from otel_stall.core.records import Status
from otel_stall.core.signing import Normaliser, Signer
from otel_stall.core.signing import NATIVE_AVAILABLE
calls = json.load(open(sys.argv[1], encoding="utf-8"))
out = [
    [
        [d.call_signature, d.result_digest, d.signature]
        for d in (Signer(normaliser).sign(t, a, r, Status(s)) for t, a, r, s in calls)
    ]
    for normaliser in (Normaliser(), Normaliser(native=False))
]
print(json.dumps({"native": NATIVE_AVAILABLE, "digests": out}))
"""

HOST_VARIABLES = ("TMPDIR", "TEMP", "TMP", "LC_ALL", "LC_CTYPE", "LANG", "LANGUAGE", "TZ")


def _other_locale() -> str:
    """An installed locale other than this process's, for the subprocess to run under."""
    current = {os.environ.get(name, "") for name in ("LC_ALL", "LC_CTYPE", "LANG")}
    tool = shutil.which("locale")
    installed = (
        subprocess.run([tool, "-a"], capture_output=True, text=True, check=False).stdout.split()
        if tool
        else []
    )
    for wanted in ("tr_TR.UTF-8", "tr_TR.utf8", "de_DE.UTF-8", "de_DE.utf8", "POSIX", "C"):
        if wanted in installed and wanted not in current:
            return wanted
    return "C"


def _corpus(custom_temp: Path) -> list[tuple[str, Any, Any, str]]:
    """Calls whose payloads hold paths under every temp root and under ``custom_temp``."""
    here = tempfile.gettempdir()
    paths = [
        f"{custom_temp}/tmpab12cd34/out.txt",
        f"{custom_temp}/report.txt",
        f"{here}/tmpab12cd34/out.txt",
        "/tmp/tmpab12cd34/out.txt",
        "/tmp/x/tmpab12cd34/out.txt",
        "/var/tmp/build.log",
        "/var/folders/x7/k2l9m/T/tmpq1w2e3r4/data.csv",
        "C:\\Users\\bob\\AppData\\Local\\Temp\\tmpab12cd34\\a.txt",
        "/tmp/pytest-of-ci/pytest-42/test_x0/f",
    ]
    texts = [
        "caf\u00e9  CAF\u00c9 \u0130stanbul \u0131 stra\u00dfe \u212a",
        "done at 2024-05-01T10:00:00+02:00, 1.5 s, 1,5 s",
        "line one\n\tline\u00a0two\u2003three",
    ]
    calls: list[tuple[str, Any, Any, str]] = []
    for path in paths:
        calls.append(("read", json.dumps({"path": path, "ts": 1}), json.dumps({"bytes": 10}), "ok"))
        calls.append(("read", {"path": path}, [path, 1.5, 2**70], "error"))
    for text in texts:
        calls.append(("note", json.dumps({"text": text}), json.dumps(text), "ok"))
        calls.append(("note", {"text": text, "n": 0.1}, {"Text": text.upper()}, "ok"))
    return calls


def _signed_here(calls: list[tuple[str, Any, Any, str]]) -> list[list[list[str | None]]]:
    return [
        [
            [d.call_signature, d.result_digest, d.signature]
            for d in (Signer(normaliser).sign(t, a, r, Status(s)) for t, a, r, s in calls)
        ]
        for normaliser in (Normaliser(), Normaliser(native=False))
    ]


def _environment(variant: str, custom_temp: Path) -> dict[str, str]:
    """The environment of this process less the host variables, then the variant's own."""
    env = {k: v for k, v in os.environ.items() if k not in HOST_VARIABLES}
    if variant in ("tmpdir", "all"):
        env["TMPDIR"] = env["TEMP"] = env["TMP"] = str(custom_temp)
    if variant in ("locale", "all"):
        env["LC_ALL"] = env["LANG"] = _other_locale()
    if variant in ("timezone", "all"):
        env["TZ"] = "Asia/Kathmandu"  # +05:45: unlike any default
    return env


def _signed_there(
    calls: list[tuple[str, Any, Any, str]], env: dict[str, str], where: Path
) -> list[list[list[str | None]]]:
    """``calls`` signed in a fresh interpreter with the environment ``env``."""
    corpus = where / "corpus.json"
    corpus.write_text(json.dumps(calls), encoding="utf-8")
    done = subprocess.run(
        [sys.executable, "-c", SIGN_CORPUS, str(corpus)],
        env=env,
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    digests: list[list[list[str | None]]] = json.loads(done.stdout)["digests"]
    return digests


VARIANTS = ["default", "tmpdir", "locale", "timezone", "all"]


@pytest.mark.parametrize("variant", VARIANTS)
def test_a_corpus_signs_the_same_in_another_environment(tmp_path: Path, variant: str) -> None:
    """Signed in a subprocess with another TMPDIR, locale or TZ: the digests signed here."""
    custom_temp = tmp_path / "x"
    custom_temp.mkdir()
    calls = _corpus(custom_temp)
    there = _signed_there(calls, _environment(variant, custom_temp), tmp_path)
    assert there == _signed_here(calls)


def test_a_path_under_a_custom_temp_dir_signs_the_same_everywhere(tmp_path: Path) -> None:
    """A path under the TMPDIR a subprocess runs with signs as it does here and everywhere else."""
    custom_temp = tmp_path / "x"
    custom_temp.mkdir()
    path = f"{custom_temp}/tmpab12cd34/out.txt"
    calls = [("write", json.dumps({"path": path}), json.dumps(f"wrote {path}"), "ok")]
    here = _signed_here(calls)
    for variant in VARIANTS:
        assert _signed_there(calls, _environment(variant, custom_temp), tmp_path) == here, variant
