"""What every framework's agent script shares: its tools, the record of what they really did, the
OTLP export to agenttrail, and the runs to make. Runs inside the framework's own venv, so it
imports nothing of agenttrail.

The script prints one JSON line: for each run, its marker, whether the agent raised, and the
tool calls that really ran (name, arguments, ok/error) in order.
"""

from __future__ import annotations

import json
import os
import sys
import traceback
from collections.abc import Callable
from typing import Any

AGENT_NAME = "refund_agent"
_calls: list[dict[str, Any]] = []


def _record(name: str, arguments: dict[str, Any], status: str) -> None:
    _calls.append({"name": name, "arguments": arguments, "status": status})


def search_books(query: str) -> str:
    """Search the book catalogue.

    Args:
        query: words to look for in titles
    """
    _record("search_books", {"query": query}, "ok")
    return f"3 books about {query}"


def refund(order_id: str, amount: float) -> str:
    """Refund part of an order.

    Args:
        order_id: the order to refund
        amount: how much to give back
    """
    _record("refund", {"order_id": order_id, "amount": amount}, "ok")
    return f"refunded {amount} on {order_id}"


def charge_card(card: str) -> str:
    """Charge a card.

    Args:
        card: the card number
    """
    _record("charge_card", {"card": card}, "error")
    raise ValueError(f"card {card} declined")


TOOLS = [search_books, refund, charge_card]


def prompt(marker: str) -> str:
    return f"Please help with my order. [run:{marker}]"


def setup_tracing() -> Any:
    """A tracer provider exporting OTLP http/protobuf to OTEL_EXPORTER_OTLP_TRACES_ENDPOINT."""
    from opentelemetry import trace
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    provider = TracerProvider(resource=Resource.create({"service.name": os.environ["SERVICE_NAME"]}))
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    trace.set_tracer_provider(provider)
    return provider


def run_all(run_one: Callable[[str], Any], provider: Any) -> None:
    """Run each marker in $RUNS through `run_one(prompt)`, then flush spans and print the record."""
    record = []
    for marker in os.environ["RUNS"].split(","):
        del _calls[:]
        raised = ""
        try:
            run_one(prompt(marker))
        except Exception as exc:  # the record says the run failed; the trace must say so too
            raised = f"{type(exc).__name__}: {exc}"
            traceback.print_exc(file=sys.stderr)
        record.append({"marker": marker, "raised": raised, "calls": list(_calls)})
    provider.force_flush()
    provider.shutdown()
    print(json.dumps(record))
