"""Importers register as plug-ins: the built-ins through DEFAULT_IMPORTERS, others through the
``glovebox.importers`` entry-point group (a real distribution on sys.path, found by importlib.metadata)."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from glovebox.cli._import import DEFAULT_IMPORTERS, ENTRY_POINT_GROUP, import_group
from glovebox.cli._main import cli

PLUGIN = '''
import click

@click.command("har")
@click.argument("path")
def har(path):
    """Import an HTTP archive."""
    click.echo(f"har importer got {path}")

not_a_command = 42
'''


@pytest.fixture
def plugin_on_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An installed distribution (a dist-info with entry points) that registers importers."""
    (tmp_path / "glovebox_har.py").write_text(PLUGIN)
    info = tmp_path / "glovebox_har-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: glovebox-har\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(
        f"[{ENTRY_POINT_GROUP}]\n"
        "har = glovebox_har:har\n"
        "broken = glovebox_har:not_a_command\n"
        "openapi = glovebox_har:har\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    importlib.invalidate_caches()
    yield tmp_path
    sys.modules.pop("glovebox_har", None)


def test_the_built_ins_are_the_default_list() -> None:
    ctx = click.Context(import_group)
    assert set(DEFAULT_IMPORTERS) <= set(import_group.list_commands(ctx))
    for name in DEFAULT_IMPORTERS:
        command = import_group.get_command(ctx, name)
        assert command is not None and command.name == name


def test_a_third_party_importer_is_a_subcommand(plugin_on_path: Path) -> None:
    out = CliRunner().invoke(cli, ["import", "--help"])
    assert out.exit_code == 0 and "har" in out.output
    out = CliRunner().invoke(cli, ["import", "har", "x.har"])
    assert out.exit_code == 0, out.output
    assert out.output == "har importer got x.har\n"


def test_a_plugin_cannot_replace_a_built_in(plugin_on_path: Path) -> None:
    out = CliRunner().invoke(cli, ["import", "openapi", "--help"])
    assert out.exit_code == 0 and "--strict" in out.output


def test_an_entry_point_that_is_not_a_command_is_refused_by_name(plugin_on_path: Path) -> None:
    out = CliRunner().invoke(cli, ["import", "broken"])
    assert out.exit_code == 1
    assert "importer 'broken' (glovebox_har:not_a_command) is not a click command" in out.output
