"""Evaluators: everything the sidecar does with assembled runs, in wings that import one way.

Top to bottom (a wing imports only wings below it; `make lint` checks this with import-linter,
the contracts are in pyproject.toml):

    cli                          the `agenttrail` command, one module per command group
    demo                         `agenttrail demo`
    admin | api | mcp_server     write endpoints and backfill | the gRPC evaluation API | MCP tools
    console                      the web console (the MCP tools reuse its queries)
    offline                      datasets, runnable agents, offline evaluation
    judges                       LLM judges, criteria, the online judge worker, combined scores
    scoring                      references, the online evaluator worker, scores, decisions
    metrics | monitoring         pure trajectory metrics | stats, drift, alerts, export, report

`routes` (URL paths only) sits outside the wings and imports nothing.
"""
