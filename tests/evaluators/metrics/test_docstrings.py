"""The examples in the metric modules' docstrings are true."""

from __future__ import annotations

import doctest
from types import ModuleType

import pytest

from agenttrail.evaluators.metrics import aggregation, calls, correctness, matching, registry, trajectory


@pytest.mark.parametrize("module", [calls, matching, trajectory, correctness, aggregation, registry])
def test_examples(module: ModuleType) -> None:
    """Every docstring example of the module gives the output it shows."""
    result = doctest.testmod(module, raise_on_error=False, report=True)
    assert result.attempted > 0
    assert result.failed == 0
