"""`agenttrail mcp` reads the `evaluators:` section as serve does (env over the file)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from click.testing import CliRunner

from agenttrail.evaluators.cli.main import cli


def test_mcp_takes_an_env_value_over_the_files(
    store: Any, chdb_dir: Path, database: str, tmp_path: Path
) -> None:
    """A sample_rate the file gets wrong is no error when AGENTTRAIL_EVALUATORS_SAMPLE_RATE sets
    it (serve starts so too): the stdio server runs until its input ends. Without it, exit 3."""
    config = tmp_path / "agenttrail.yaml"
    config.write_text("evaluators:\n  sample_rate: 2\n")
    command = ["mcp", "--store", str(chdb_dir), "--database", database, "--config", str(config)]
    refused = CliRunner().invoke(cli, command, input="")
    assert refused.exit_code == 3, refused.output
    assert "sample_rate" in refused.output
    served = CliRunner().invoke(cli, command, input="", env={"AGENTTRAIL_EVALUATORS_SAMPLE_RATE": "0.5"})
    assert served.exit_code == 0, (served.output, served.exception)
