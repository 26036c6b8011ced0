"""The README documents every CLI command, error code and manifest field."""

from pathlib import Path

import pytest

import glovebox
from glovebox._cli import cli

README = (Path(__file__).resolve().parents[1] / "README.md").read_text()


@pytest.mark.parametrize("command", sorted(cli.commands))
def test_cli_command_documented(command: str) -> None:
    assert f"`glovebox {command}" in README


def test_cli_subcommands_documented() -> None:
    for name, command in cli.commands.items():
        for sub in getattr(command, "commands", {}):
            assert f"{name} {sub}" in README, f"glovebox {name} {sub}"


def _tree_codes(cls: type[glovebox.GloveboxError]) -> set[str]:
    codes = set()
    for sub in cls.__subclasses__():
        codes |= {sub.code} | _tree_codes(sub)
    return codes


def test_every_code_of_the_tree_is_checked() -> None:
    assert _tree_codes(glovebox.GloveboxError) == set(DOCUMENTED_CODES)
    assert "invalid_grants" in DOCUMENTED_CODES


DOCUMENTED_CODES = glovebox.ERROR_CODES + (
    "invalid_artifact",
    "invalid_manifest",
    "invalid_signature",
    "build_failed",
    "invalid_policy",
    "invalid_grants",
)


@pytest.mark.parametrize("code", DOCUMENTED_CODES)
def test_error_code_documented(code: str) -> None:
    assert f"`{code}`" in README


@pytest.mark.parametrize("field", sorted(glovebox.Manifest.model_fields))
def test_manifest_field_documented(field: str) -> None:
    assert f"`{field}" in README


@pytest.mark.parametrize("field", sorted(glovebox.Limits.model_fields))
def test_limit_documented(field: str) -> None:
    assert f"`limits.{field}`" in README


@pytest.mark.parametrize(
    "variable", ["GLOVEBOX_HOME", "GLOVEBOX_POLICY", "GLOVEBOX_REQUIRE_SIGNATURES", "GLOVEBOX_GRANTS"]
)
def test_environment_documented(variable: str) -> None:
    assert f"`{variable}`" in README


def _policy_fields() -> list[str]:
    from glovebox.policy import _models

    fields = set(glovebox.Policy.model_fields)
    for model in (_models.Principal, _models.ToolRule, _models.Defaults, _models.ApprovalSettings):
        fields |= set(model.model_fields)
    fields |= {f"audit.{name}" for name in _models.AuditSettings.model_fields}
    fields |= {f"approvals.{name}" for name in _models.ApprovalSettings.model_fields}
    return sorted(fields)


@pytest.mark.parametrize("field", _policy_fields())
def test_policy_field_documented(field: str) -> None:
    assert f"`{field}" in README or f".{field}`" in README


@pytest.mark.parametrize("field", sorted(glovebox.HttpRule.model_fields) + sorted(glovebox.HttpLimits.model_fields))
def test_grant_field_documented(field: str) -> None:
    assert f"`{field}`" in README


@pytest.mark.parametrize("command", ["policy check", "policy explain", "policy schema", "audit tail", "audit verify"])
def test_subcommand_documented(command: str) -> None:
    assert f"`glovebox {command}" in README
