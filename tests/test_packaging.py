"""The built distributions: the licence shipped, and an honest wheel tag (issue 29)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).parent.parent


def _source_copy(tmp_path: Path) -> Path:
    """The repository's tracked files in a scratch folder, so no build/ lands in the worktree."""
    files = subprocess.run(
        ["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True
    ).stdout.split(b"\0")
    copy = tmp_path / "src"
    for name in filter(None, files):
        source = ROOT / name.decode()
        if source.is_file():
            target = copy / name.decode()
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target)
    for extra in ("LICENSE", "setup.py", "pyproject.toml"):  # also before they are committed
        shutil.copy2(ROOT / extra, copy / extra)
    return copy


def _wheel(source: Path, out: Path, **env: str) -> Path:
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", str(source), "--no-deps", "-q", "-w", str(out)],
        check=True,
        env={**os.environ, **env},
        timeout=600,
    )
    (wheel,) = out.glob("*.whl")
    return wheel


@pytest.mark.slow
def test_the_wheel_ships_the_licence_and_is_tagged_by_what_was_built(tmp_path: Path) -> None:
    """LICENSE is in every wheel; a wheel built without a compiler is tagged py3-none-any."""
    licence = (ROOT / "LICENSE").read_text(encoding="utf-8")
    assert "Apache License" in licence
    assert "Version 2.0" in licence
    built = _wheel(_source_copy(tmp_path / "a"), tmp_path / "with-cc")
    pure = _wheel(_source_copy(tmp_path / "b"), tmp_path / "without-cc", CC="false")
    for wheel in (built, pure):
        with zipfile.ZipFile(wheel) as archive:
            names = archive.namelist()
            (licence_name,) = [n for n in names if n.endswith("/LICENSE")]
            assert archive.read(licence_name).decode() == licence
    assert pure.name.endswith("-py3-none-any.whl")
    with zipfile.ZipFile(pure) as archive:
        assert not [n for n in archive.namelist() if n.endswith((".so", ".pyd"))]
    with zipfile.ZipFile(built) as archive:
        compiled = [n for n in archive.namelist() if n.endswith((".so", ".pyd"))]
    assert compiled == [] or not built.name.endswith("-none-any.whl")
