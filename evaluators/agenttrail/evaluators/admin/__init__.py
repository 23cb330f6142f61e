"""Writes a user makes while `serve` holds the embedded store, over the sidecar's HTTP port.

Owns the admin Starlette app mounted at `/api/v1/admin` (`api`: loading references, reloading
judges, backfill jobs), `backfill` (judging past runs with one judge's current version) and the
jobs that run it inside the sidecar while the CLI polls (`backfill_jobs`); `service` is what
`agenttrail backfill` does (here, or as such a job). The route paths the
CLI needs without importing Starlette are in `agenttrail.evaluators.routes`.
"""
