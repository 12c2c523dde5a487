"""The user docs: generated reference pages cover the code, and the site builds strictly.

The reference pages come from ``docs/gen_reference.py``; these tests check that
what it generates names every setting, attribute, metric and option the code
has, so a generator that silently skipped one would fail here.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib.util
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

from otel_stall import StallPolicy
from otel_stall.cli import COMMANDS
from otel_stall.gateway import GatewayConfig, GatewayMetricNames
from otel_stall.live.settings import ENV_VARS
from otel_stall.semconv import StallAttributes, StallEventAttributes, StallMetricNames

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"


def load_generator() -> ModuleType:
    """``docs/gen_reference.py``, which is a script beside the docs, not a package module."""
    spec = importlib.util.spec_from_file_location("gen_reference", DOCS / "gen_reference.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def pages() -> dict[str, str]:
    """The generated pages, by path under docs/."""
    generated: dict[str, str] = load_generator().pages()
    return generated


def constants(cls: type) -> list[str]:
    """The string constants a ``semconv``-style class defines."""
    return [v for k, v in vars(cls).items() if k.isupper() and isinstance(v, str)]


def test_configuration_names_every_variable(pages: dict[str, str]) -> None:
    """Every OTEL_STALL_* variable the processor, policy and conventions read is documented."""
    page = pages["reference/configuration.md"]
    assert [name for name in ENV_VARS if f"`{name}`" not in page] == []


@pytest.mark.parametrize("cls", [StallPolicy, GatewayConfig])
def test_configuration_gives_each_field_its_default(
    pages: dict[str, str], cls: type[object]
) -> None:
    """Each field with a variable has a row naming the field, its variable and its default.

    In its class's section: two classes may name a setting alike (``full_attributes``).
    """
    page = pages["reference/configuration.md"].split(f"## {cls.__name__}\n", 1)[1]
    page = page.split("\n## ", 1)[0]
    for field in dataclasses.fields(cls):  # type: ignore[arg-type]
        if "env" not in field.metadata:
            continue
        rows = [line for line in page.splitlines() if line.startswith(f"| `{field.name}` |")]
        assert rows, field.name
        row = rows[0]
        assert f"`{field.metadata['env']}`" in row
        default = field.default
        if isinstance(default, int | float) and not isinstance(default, bool):
            assert f"`{default}`" in row


def test_attributes_page_lists_every_attribute_and_metric(pages: dict[str, str]) -> None:
    """Every stall.* attribute, event key and metric, and the gateway's metrics, have a row."""
    page = pages["reference/attributes.md"]
    names = [
        *constants(StallAttributes),
        *constants(StallEventAttributes),
        *constants(StallMetricNames),
        *constants(GatewayMetricNames),
    ]
    assert [name for name in names if f"| `{name}` |" not in page] == []
    assert "`stall_findings_total`" in page


def test_cli_page_has_every_subcommand_and_option(pages: dict[str, str]) -> None:
    """Each subcommand's section holds its --help, with every option it takes."""
    page = pages["reference/cli.md"]
    for name, (_help, add_arguments, _command) in COMMANDS.items():
        assert f"## `otel-stall {name}`" in page
        parser = argparse.ArgumentParser()
        add_arguments(parser)
        options = set(re.findall(r"--[a-z][\w-]*", parser.format_help()))
        assert options
        assert sorted(o for o in options if o not in page) == [], name


def test_hand_written_pages_are_not_generated() -> None:
    """The generated pages are built in memory; no copy in docs/ can go stale."""
    generated = set(load_generator().pages())
    assert [path for path in generated if (DOCS / path).exists()] == []


@pytest.mark.parametrize(
    "phrase", ["reference 000", "reference 001", "this round", "last round", "round before"]
)
def test_no_development_diary(phrase: str) -> None:
    """The README and the docs describe the software, not the history of its rounds."""
    texts = [ROOT / "README.md", *DOCS.rglob("*.md")]
    assert [p.name for p in texts if phrase in p.read_text(encoding="utf-8").lower()] == []


def mkdocs_build(config: Path, site: Path) -> subprocess.CompletedProcess[str]:
    """``mkdocs build --strict`` of ``config`` into ``site``."""
    return subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(config), "-d", str(site)],
        capture_output=True, text=True, timeout=300, check=False,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
    )  # fmt: skip


needs_mkdocs = pytest.mark.skipif(
    importlib.util.find_spec("mkdocs") is None or importlib.util.find_spec("material") is None,
    reason="mkdocs and mkdocs-material are in the docs extra (`make docs` installs them)",
)


@needs_mkdocs
def test_site_builds_strictly(tmp_path: Path) -> None:
    """`mkdocs build --strict` passes, with the generated reference pages in the site."""
    result = mkdocs_build(ROOT / "mkdocs.yml", tmp_path / "site")
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "site" / "reference" / "configuration" / "index.html").exists()


@needs_mkdocs
def test_a_broken_link_fails_the_build(tmp_path: Path) -> None:
    """A link to a missing anchor fails the strict build: the check is really on."""
    copy = tmp_path / "repo"
    shutil.copytree(DOCS, copy / "docs")
    shutil.copy(ROOT / "mkdocs.yml", copy / "mkdocs.yml")
    index = copy / "docs" / "index.md"
    index.write_text(index.read_text(encoding="utf-8") + "\n[x](concepts.md#no-such-section)\n")
    result = mkdocs_build(copy / "mkdocs.yml", tmp_path / "site")
    assert result.returncode != 0
    assert re.search(r"does not contain an anchor '#no-such-section'", result.stderr)
