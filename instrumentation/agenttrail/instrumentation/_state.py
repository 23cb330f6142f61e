"""The process-wide state every instrumented call reads: which tracer, what to capture."""

from dataclasses import dataclass
from typing import Final

from opentelemetry import trace

from agenttrail.instrumentation._capture import CaptureSettings

TRACER_NAME: Final = "agenttrail.instrumentation"


@dataclass(slots=True)
class State:
    """Read once per call (``STATE.tracer``), replaced by configure() and testing.capture_spans()."""

    tracer: trace.Tracer
    # The provider configure() created or joined; None until then.
    provider: trace.TracerProvider | None
    # True when configure() created the provider, so shutdown() may shut it down.
    owns_provider: bool
    settings: CaptureSettings

    def snapshot(self) -> "State":
        """A copy to hand back to restore()."""
        return State(self.tracer, self.provider, self.owns_provider, self.settings)

    def restore(self, saved: "State") -> None:
        """Put back what snapshot() returned."""
        self.tracer, self.provider = saved.tracer, saved.provider
        self.owns_provider, self.settings = saved.owns_provider, saved.settings


# Before configure() the global provider's tracer: a proxy that follows whatever provider the
# application installs later, so decorated code works in any order of imports and set-up.
STATE: Final = State(trace.get_tracer(TRACER_NAME), None, False, CaptureSettings())
