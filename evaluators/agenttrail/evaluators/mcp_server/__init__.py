"""MCP (Model Context Protocol) tools over agenttrail's read API, for coding assistants.

`queries` answers each tool from the store (the functions the CLI and the console use),
`sql_guard` gates the read-only SQL tool, `server` declares the tools and the triage prompt on
the `mcp` SDK, `stdio` serves `agenttrail mcp` (on what `service` prepares), and `http` +
`install` mount the same server in `serve` at /mcp/ behind the sidecar's bearer token. The SDK
is imported only by those modules, never when the CLI starts.

(Not named `mcp`: that would shadow the SDK.)
"""
