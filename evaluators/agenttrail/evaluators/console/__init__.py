"""The web console: server-rendered pages over runs, scores, drift, alerts and references.

`create_app(store_factory, settings)` is a Starlette app; `agenttrail serve` mounts it at
`/console` behind the sidecar's bearer token. Charts are inline SVG drawn on the server and
the little JavaScript there is lives in static/console.js: nothing is fetched from elsewhere.
"""

from agenttrail.evaluators.console.app import ConsoleSettings, create_app

__all__ = ["ConsoleSettings", "create_app"]
