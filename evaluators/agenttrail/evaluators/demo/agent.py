"""A small customer-support agent instrumented with agenttrail's decorators, for the demo.

It has a usual path per task, sometimes strays from it (an extra search, a skipped step), and
its tools sometimes fail (a payment gateway error, a timeout), like a real agent would.
No LLM is called: the "model" is a seeded random policy, so the demo runs offline.
"""

from __future__ import annotations

import random
import time
from dataclasses import dataclass
from typing import Any

from agenttrail.instrumentation import agent, chat, set_output, set_task, tool


class PaymentGatewayError(RuntimeError):
    """The refund provider refused or timed out."""


class OrderServiceTimeout(TimeoutError):
    """The order service did not answer in time."""


@dataclass
class Behaviour:
    """Knobs of the example agent; the demo turns them to make it misbehave."""

    refund_failure_rate: float = 0.08
    lookup_timeout_rate: float = 0.03
    stray_rate: float = 0.12
    tool_latency_s: float = 0.002


BEHAVIOUR = Behaviour()
_rng = random.Random(7)

# The usual tool path of each task: what a reference trajectory would say.
USUAL_PATHS: dict[str, list[str]] = {
    "order_status": ["lookup_order", "send_email"],
    "refund": ["lookup_order", "issue_refund", "send_email"],
    "faq": ["search_kb"],
}


# Reference set for the online evaluator: inputs vary per request, so they are wildcards.
REFERENCES: dict[str, Any] = {
    task: {"reference_trajectory": [{"tool_name": name, "tool_input": None} for name in path]}
    for task, path in USUAL_PATHS.items()
}


def _work(scale: float = 1.0) -> None:
    time.sleep(BEHAVIOUR.tool_latency_s * scale * (0.5 + _rng.random()))


@tool(description="Find an order by id")
def lookup_order(order_id: int) -> dict[str, Any]:
    _work()
    if _rng.random() < BEHAVIOUR.lookup_timeout_rate:
        raise OrderServiceTimeout(f"order service timed out looking up {order_id}")
    return {
        "order_id": order_id,
        "status": _rng.choice(["shipped", "delivered", "processing"]),
        "total": 42.5,
    }


@tool(description="Search the help-centre articles")
def search_kb(query: str) -> list[str]:
    _work(0.5)
    return [f"kb/{abs(hash(query)) % 1000}"]


@tool(description="Refund an order to the original payment method")
def issue_refund(order_id: int, amount: float) -> dict[str, Any]:
    _work(2.0)
    if _rng.random() < BEHAVIOUR.refund_failure_rate:
        raise PaymentGatewayError("payment gateway declined the refund")
    return {"refund_id": f"r-{order_id}", "amount": amount}


@tool(description="Email the customer")
def send_email(to: str, subject: str) -> str:
    _work(0.5)
    return "queued"


@tool(description="Hand the case to a human")
def escalate(reason: str) -> str:
    _work(0.5)
    return "ticket-created"


def _think(prompt_tokens: int) -> None:
    with chat("demo-policy-v1", provider="agenttrail-demo") as call:
        call.set_usage(prompt_tokens, _rng.randint(20, 120))


def _answer(question: str, task: str, order_id: int, customer: str) -> str:
    """Answer one customer request; the task names which reference trajectory applies."""
    set_task(task)
    _think(200 + len(question))
    strays = _rng.random() < BEHAVIOUR.stray_rate
    if task == "faq":
        articles = search_kb(question)
        if strays:
            articles += search_kb(question + " more")
        answer = f"See {articles[0]}"
    else:
        if strays and task == "refund":
            search_kb("refund policy")
        order = lookup_order(order_id)
        if task == "refund":
            try:
                issue_refund(order_id, order["total"])
            except PaymentGatewayError:
                if _rng.random() < 0.5:
                    raise
                escalate("refund failed")
        _think(150)
        if not (strays and task == "order_status"):
            send_email(customer, f"About order {order_id}")
        answer = f"Order {order_id} is {order['status']}"
    set_output(answer)
    return answer


# The same agent before and after a release; the demo ships 1.1, whose refund provider broke.
support_agent = agent(name="support-agent", version="1.0")(_answer)
support_agent_v1_1 = agent(name="support-agent", version="1.1")(_answer)
_current = support_agent


def degrade() -> None:
    """Ship version 1.1: the payment gateway starts declining most refunds, lookups time out more."""
    global _current
    BEHAVIOUR.refund_failure_rate = 0.9
    BEHAVIOUR.lookup_timeout_rate = 0.2
    _current = support_agent_v1_1


QUESTIONS = {
    "order_status": "Where is my order {order_id}?",
    "refund": "Please refund order {order_id}, it arrived broken.",
    "faq": "How do I change my delivery address?",
}


def run_once(index: int, rng: random.Random) -> bool:
    """One request; returns False if the agent failed (the demo keeps going)."""
    task = rng.choices(list(QUESTIONS), weights=[4, 3, 3])[0]
    order_id = 1000 + index
    question = QUESTIONS[task].format(order_id=order_id)
    try:
        _current(question, task, order_id, f"customer{index}@example.com")
    except Exception:
        return False
    return True


def seed(value: int) -> None:
    """Start over: the same runs for the same seed, version 1.0 behaving as usual."""
    global _current
    _rng.seed(value)
    BEHAVIOUR.refund_failure_rate = Behaviour.refund_failure_rate
    BEHAVIOUR.lookup_timeout_rate = Behaviour.lookup_timeout_rate
    _current = support_agent
