"""`glovebox demo` builds the examples and every scenario ends as it says it will."""

import pytest
from click.testing import CliRunner

from glovebox.cli._main import cli


@pytest.mark.slow  # builds and runs every example
@pytest.mark.system
def test_demo_runs_every_scenario() -> None:
    result = CliRunner().invoke(cli, ["demo"])
    assert result.exit_code == 0, result.output
    for code in ("invalid_input", "guest_error", "fuel_exhausted", "memory_limit", "timeout", "capability_denied"):
        assert code in result.output
    for code in ("permission_denied", "approval_required"):
        assert code in result.output
    assert "ts-text-stats" in result.output and "ts-weather" in result.output
    assert "hash chain intact" in result.output
    assert '"delete the test data" as DROP TABLE' in result.output and "capability_denied" in result.output
    assert "the table is intact" in result.output
    assert "Every scenario ended as expected" in result.output
