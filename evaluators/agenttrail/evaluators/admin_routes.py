"""The sidecar's write and judge paths, in a module light enough for the CLI to import (the
endpoints themselves are in admin_api.py, which loads Starlette and the judges)."""

ADMIN_PREFIX = "/api/v1/admin"
REFERENCES_ROUTE = "/api/v1/references"
JUDGES_ROUTE = "/api/v1/judges"
