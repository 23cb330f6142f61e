"""The full `agenttrail` command: the collector's commands plus the evaluators'.

Lives here because evaluators sit at the top of the dependency chain (evaluators may import
the collector, never the reverse).
"""

from __future__ import annotations

from agenttrail.collector.cli import cli


def main() -> None:
    cli()
