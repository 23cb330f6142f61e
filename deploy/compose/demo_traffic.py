"""The compose stack's demo agent: agenttrail's example support agent
(agenttrail.evaluators.demo.agent) sending its traces to the sidecar over OTLP/gRPC without end.
After DEMO_DEGRADE_AFTER runs its version 1.1 ships (refunds start failing), so drift, alerts
and the dashboards have something to show. DEMO_RUNS stops it after that many runs (0: never).
With a ClickHouse URL in AGENTTRAIL_STORE it first loads the tasks' reference trajectories,
so the reference metrics score its runs."""

from __future__ import annotations

import logging
import os
import random
import time

from agenttrail.evaluators.demo import agent as demo_agent
from agenttrail.instrumentation import configure, force_flush

log = logging.getLogger("demo-agent")


def load_references(store_url: str) -> None:
    from agenttrail.collector.schema import migrate
    from agenttrail.collector.store import Store, parse_store
    from agenttrail.evaluators.scoring.reference_store import store_reference_set
    from agenttrail.evaluators.scoring.references import parse_reference_set
    from agenttrail.evaluators.scoring.schema import EVALUATOR_MIGRATIONS

    store = Store(parse_store(store_url))
    try:
        migrate(store, EVALUATOR_MIGRATIONS)
        store_reference_set(store, parse_reference_set(demo_agent.REFERENCES), source="demo-agent")
    finally:
        store.close()


def main() -> None:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")
    endpoint = os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4317")
    per_minute = float(os.environ.get("DEMO_RUNS_PER_MINUTE", "120"))
    degrade_after = int(os.environ.get("DEMO_DEGRADE_AFTER", "2000"))
    limit = int(os.environ.get("DEMO_RUNS", "0"))
    store_url = os.environ.get("AGENTTRAIL_STORE", "")
    if store_url.startswith(("http://", "https://")):
        load_references(store_url)
        log.info("loaded reference trajectories for %s", ", ".join(sorted(demo_agent.REFERENCES)))
    configure(service_name="demo-support-agent", endpoint=endpoint, protocol="grpc")
    demo_agent.seed(7)
    rng = random.Random(7)
    log.info("sending %.0f runs/min to %s", per_minute, endpoint)
    index = 0
    while not limit or index < limit:
        if index == degrade_after:
            demo_agent.degrade()
            log.info("version 1.1 ships: refunds start failing")
        demo_agent.run_once(index, rng)
        index += 1
        time.sleep(60.0 / per_minute)
    force_flush()


if __name__ == "__main__":
    main()
