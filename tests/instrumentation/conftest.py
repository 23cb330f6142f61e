"""Every test records spans with the real SDK through agenttrail.instrumentation.testing."""

from collections.abc import Iterator

import pytest

from agenttrail.instrumentation.testing import CapturedSpans, capture_spans


@pytest.fixture
def captured() -> Iterator[CapturedSpans]:
    with capture_spans() as spans:
        yield spans


@pytest.fixture
def tolerant(monkeypatch: pytest.MonkeyPatch) -> None:
    """Production behaviour: internal errors are logged, not raised (tests/conftest.py raises)."""
    monkeypatch.delenv("AGENTTRAIL_RAISE_INTERNAL_ERRORS", raising=False)
    monkeypatch.setattr("agenttrail.instrumentation._errors._logged", set())
