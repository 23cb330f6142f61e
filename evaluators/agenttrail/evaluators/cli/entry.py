"""Console entry point. Stdlib only, so a missing `sidecar` extra gets a message, not a traceback."""

from __future__ import annotations

import sys

_SIDECAR_MODULES = {"click", "clickhouse_connect", "chdb", "grpc", "yaml", "openai", "google"}


def main() -> None:
    try:
        from agenttrail.evaluators.cli.main import main as run
    except ModuleNotFoundError as exc:
        if (exc.name or "").split(".")[0] not in _SIDECAR_MODULES:
            raise
        sys.exit(
            f"agenttrail: the command line needs the sidecar extra ({exc.name} is not installed).\n"
            "Install agenttrail again with it, from where you installed it (a checkout or its "
            "wheel): pip install '/path/to/agenttrail[sidecar]'"
        )
    run()
