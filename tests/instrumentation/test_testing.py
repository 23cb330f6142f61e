"""testing.capture_spans(): an in-memory SDK provider for a block, leaving no trace afterwards."""

import pytest
from opentelemetry.sdk.trace.sampling import ALWAYS_OFF

from agenttrail.instrumentation import configure, tool
from agenttrail.instrumentation._state import STATE
from agenttrail.instrumentation.testing import capture_spans


@tool
def ping() -> str:
    return "pong"


def test_captures_finished_spans_with_helpers() -> None:
    """spans, by_name(), one() and clear() see the spans finished inside the block."""
    with capture_spans() as captured:
        ping()
        ping()
        assert [s.name for s in captured.spans] == ["execute_tool ping"] * 2
        assert len(captured.by_name("execute_tool ping")) == 2
        assert captured.by_name("nothing") == []
        with pytest.raises(AssertionError, match="expected one span 'execute_tool ping'"):
            captured.one("execute_tool ping")
        captured.clear()
        ping()
        assert captured.one("execute_tool ping").name == "execute_tool ping"


def test_restores_previous_state_including_configure_changes() -> None:
    """Provider, tracer and capture settings changed inside the block are put back at its end."""
    before = STATE.snapshot()
    with capture_spans() as captured:
        configure(tracer_provider=captured.provider, capture=False, max_value_length=10)
        assert STATE.settings.enabled is False
    assert STATE.snapshot() == before


def test_nested_captures_are_independent() -> None:
    """An inner capture takes the spans of its block; the outer one sees only its own."""
    with capture_spans() as outer:
        ping()
        with capture_spans() as inner:
            ping()
        ping()
    assert len(inner.spans) == 1
    assert len(outer.spans) == 2


def test_sampler_argument() -> None:
    """capture_spans(sampler=ALWAYS_OFF) records nothing."""
    with capture_spans(sampler=ALWAYS_OFF) as captured:
        assert ping() == "pong"
    assert captured.spans == []


def test_samples_everything_regardless_of_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """OTEL_TRACES_SAMPLER does not make tests flaky: every span is sampled by default."""
    monkeypatch.setenv("OTEL_TRACES_SAMPLER", "always_off")
    with capture_spans() as captured:
        ping()
    assert len(captured.spans) == 1
