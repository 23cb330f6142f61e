"""The URL paths of the sidecar's evaluator write and judge endpoints, in a module light enough
for the CLI to import (the endpoints themselves are in admin/api.py, which loads Starlette, and
judges/setup.py). It imports nothing, so every wing may use it."""

ADMIN_PREFIX = "/api/v1/admin"
REFERENCES_ROUTE = "/api/v1/references"
JUDGES_ROUTE = "/api/v1/judges"
