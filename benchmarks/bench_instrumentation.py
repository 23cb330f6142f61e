"""Per-call cost of agenttrail's decorators against a bare OpenTelemetry span.

Real SDK TracerProvider + BatchSpanProcessor with an exporter that drops everything, so the
figures are the in-process cost an agent pays. Run: ``python benchmarks/bench_instrumentation.py
[--runs N]``: each run keeps every case's best of ROUNDS, and the runs' median and spread are
printed, because on a shared machine one run's ratio moves by 0.3x or more. Two columns: CPU of
the calling thread (the in-line cost), and CPU of the whole process with the batch processor
flushed at the end of each sample (what the agent's process pays, export thread included), so
that nothing looks cheaper by moving work off the calling thread.
Target: a decorated tool call with capture on within 1.2x of the bare span. The row "bare span +
the same 10 attributes" sets precomputed values of the attributes a tool span must carry: the SDK
validates each attribute (~0.5-0.8 µs), so that row is the floor any implementation starts from.
"""

import argparse
import asyncio
import itertools
import statistics
import time
from collections.abc import Callable, Sequence

from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult
from opentelemetry.sdk.trace.sampling import ALWAYS_OFF, Sampler

from agenttrail.instrumentation import agent, configure, tool

# Short samples, many of them: on a shared machine a 100 ms sample is almost always cut by the
# scheduler, while the best of many 5-10 ms samples finds the moments the process ran alone.
NUMBER = 500
ROUNDS = 40
TARGET_RATIO = 1.2
# A paragraph of agent prose (~1 KB) with words the scrubber must look at twice but keep
# (token count, passwordless, secretary): the price of scanning free text for secrets.
PROSE = (
    "The secretary asked about passwordless sign-in; the token count of the last answer was 812 "
    "and the key point is that the customer wants a refund for order 42 shipped to Berlin. "
) * 6


class DropExporter(SpanExporter):
    """Accepts and discards: isolates instrumentation cost from export cost."""

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        return SpanExportResult.SUCCESS


def make_provider(sampler: Sampler | None = None) -> TracerProvider:
    provider = TracerProvider(sampler=sampler)
    # Queue large enough that no span is dropped: dropping would make a call look cheaper.
    provider.add_span_processor(BatchSpanProcessor(DropExporter(), max_queue_size=1_000_000))
    return provider


def search(query: str, limit: int) -> list[str]:
    return [query] * 2


async def asearch(query: str, limit: int) -> list[str]:
    return [query] * 2


def per_call_us(
    call: Callable[[], object], flush: Callable[[], object], repeat: int = NUMBER
) -> tuple[float, float]:
    """CPU microseconds per call over one sample of NUMBER calls: (calling thread, process).

    ``call`` runs ``repeat`` times and makes NUMBER calls in all (``repeat=1``: it makes them).
    Thread CPU, not wall time: on a shared machine wall time counts the moments another process
    had the core. The process figure adds what the export thread did meanwhile and a flush of
    the spans still queued (run in this thread), so work moved off the calling thread still shows.
    """
    flush()  # spans of the previous sample are not this one's
    process_start, thread_start = time.process_time(), time.thread_time()
    for _ in itertools.repeat(None, repeat):
        call()
    thread_end = time.thread_time()
    flush()
    process_end = time.process_time()
    return (thread_end - thread_start) / NUMBER * 1e6, (process_end - process_start) / NUMBER * 1e6


Sample = Callable[[], tuple[float, float]]


def best_of(cases: dict[str, Sample]) -> dict[str, tuple[float, float]]:
    """Run every case ROUNDS times, interleaved, and keep each one's minimum (per column).

    Interleaving spreads slow phases of the machine (and of the exporter thread) over all cases
    instead of penalising whichever ran at that moment; the minimum is the least noisy estimate.
    """
    best = dict.fromkeys(cases, (float("inf"), float("inf")))
    for _ in range(ROUNDS):
        for label, case in cases.items():
            thread, process = case()
            best[label] = (min(best[label][0], thread), min(best[label][1], process))
    return best


def measure() -> dict[str, tuple[float, float]]:
    """One run: every case's best of ROUNDS, in µs per call (thread CPU, process CPU)."""
    provider = make_provider()
    tracer = provider.get_tracer("bench")
    configure(tracer_provider=provider)

    def bare() -> list[str]:
        with tracer.start_as_current_span("execute_tool search"):
            return search("refund policy", 5)

    arguments, result = '{"query":"refund policy","limit":5}', '["refund policy","refund policy"]'
    tool_attributes = {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": "search",
        "gen_ai.tool.type": "function",
        "openinference.span.kind": "TOOL",
        "tool.name": "search",
        "gen_ai.tool.call.id": "00f067aa0ba902b7",
        "gen_ai.tool.call.arguments": arguments,
        "input.value": arguments,
        "gen_ai.tool.call.result": result,
        "output.value": result,
    }

    def bare_with_attributes() -> list[str]:
        with tracer.start_as_current_span("execute_tool search", attributes=tool_attributes):
            return search("refund policy", 5)

    tool_search = tool(search)
    tool_asearch = tool(asearch)

    @agent
    def planner(question: str) -> list[str]:
        return tool_search(question, 5)

    async def drive_async() -> None:
        for _ in range(NUMBER):
            await tool_asearch("refund policy", 5)

    loop = asyncio.new_event_loop()
    unsampled_provider = make_provider(sampler=ALWAYS_OFF)
    flush = provider.force_flush

    def unsampled() -> tuple[float, float]:
        configure(tracer_provider=unsampled_provider)
        try:
            return per_call_us(lambda: tool_search("refund policy", 5), unsampled_provider.force_flush)
        finally:
            configure(tracer_provider=provider)

    @tool
    def summarise(text: str, limit: int) -> list[str]:
        return [text[:10]] * 2

    @tool
    def login(user: str, password: str) -> str:
        return "ok"

    results = best_of(
        {
            "bare start_as_current_span": lambda: per_call_us(bare, flush),
            "bare span + the same 10 attributes": lambda: per_call_us(bare_with_attributes, flush),
            "@tool sync": lambda: per_call_us(lambda: tool_search("refund policy", 5), flush),
            "@tool async (await, per call)": lambda: per_call_us(
                lambda: loop.run_until_complete(drive_async()), flush, repeat=1
            ),
            "@tool unsampled": unsampled,
            "@agent with nested @tool": lambda: per_call_us(lambda: planner("refund policy"), flush),
            "@tool sync, 1 KB prose argument": lambda: per_call_us(lambda: summarise(PROSE, 5), flush),
            "@tool sync, password argument": lambda: per_call_us(lambda: login("ann", "hunter2"), flush),
        }
    )
    loop.close()
    provider.shutdown()
    unsampled_provider.shutdown()
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=1, help="independent runs (default 1)")
    runs = [measure() for _ in range(parser.parse_args().runs)]
    print(f"{len(runs)} run(s); median [min-max] over runs of each run's best of {ROUNDS}")
    print(f"{'':36s} {'thread CPU':>24s}   {'process CPU (export + flush)':>28s}")
    for label in runs[0]:
        thread = spread([r[label][0] for r in runs], " µs")
        process = spread([r[label][1] for r in runs], " µs")
        print(f"{label:36s} {thread:>24s}   {process:>28s}")
    columns = []
    for column in (0, 1):
        ratios = [r["@tool sync"][column] / r["bare start_as_current_span"][column] for r in runs]
        floors = [
            r["bare span + the same 10 attributes"][column] / r["bare start_as_current_span"][column]
            for r in runs
        ]
        columns.append((ratios, floors))
    (thread_ratios, thread_floors), (process_ratios, process_floors) = columns
    verdict = "ok" if statistics.median(thread_ratios) <= TARGET_RATIO else "OVER TARGET"
    print(
        f"{'ratio @tool sync / bare':36s} {spread(thread_ratios, 'x'):>24s}   "
        f"{spread(process_ratios, 'x'):>28s}  (target <= {TARGET_RATIO}x on thread CPU: {verdict})"
    )
    print(
        f"{'ratio bare + 10 attributes / bare':36s} {spread(thread_floors, 'x'):>24s}   "
        f"{spread(process_floors, 'x'):>28s}  (the SDK's share of the cost)"
    )


def spread(values: list[float], unit: str) -> str:
    """Median and range, e.g. ``1.21x [1.10x-1.35x]``."""
    return f"{statistics.median(values):7.2f}{unit} [{min(values):.2f}-{max(values):.2f}]"


if __name__ == "__main__":
    main()
