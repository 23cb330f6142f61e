"""A separate agent process for test_delivery.py: configure(), one run, then flush or shut down.

Its global tracer provider is its own, as in a real agent. The batch delay is set to ten minutes
by the test, so only the explicit force_flush()/shutdown() can deliver; after reporting, the
process waits on stdin and is killed, so the SDK's exit hook never delivers anything either.
"""

from __future__ import annotations

import json
import sys

from opentelemetry import trace

from agenttrail.instrumentation import agent, configure, force_flush, shutdown, tool


def main() -> None:
    plan = json.loads(sys.argv[1])
    configure(service_name="delivery-agent", **plan["configure"])

    @tool
    def lookup(order: str) -> str:
        return order.upper()

    @agent(name="delivery-bot", task="deliver")
    def run(order: str) -> str:
        trace_id = format(trace.get_current_span().get_span_context().trace_id, "032x")
        print(json.dumps({"trace_id": trace_id}), flush=True)
        return lookup(order)

    run("order-17")
    result = force_flush(30_000) if plan["finish"] == "force_flush" else shutdown()
    print(json.dumps({"finished": plan["finish"], "result": result}), flush=True)
    sys.stdin.read()


if __name__ == "__main__":
    main()
