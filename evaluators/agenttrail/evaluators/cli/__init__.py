"""The full `agenttrail` command: the collector's commands plus one module per evaluator group.

`main` holds the group, `serve`'s evaluator set-up and the top-level commands (references,
scores, evaluate-online, demo); `read`, `alerts`, `judges`, `criteria`, `monitoring`,
`offline`, `mcp` and `report` each hold one command group, loaded lazily so `agenttrail --help`
imports no heavy library. `entry` is the console script (stdlib only). Nothing imports the CLI.
This file stays empty of imports: `entry` must load without click.
"""
