"""The examples in the judge modules' docstrings are true."""

from __future__ import annotations

import doctest
from types import ModuleType

import pytest

from agenttrail.evaluators.judges import budget, render, validation


@pytest.mark.parametrize("module", [budget, render, validation])
def test_examples(module: ModuleType) -> None:
    """Every docstring example of the module gives the output it shows."""
    result = doctest.testmod(module, raise_on_error=False, report=True)
    assert result.attempted > 0
    assert result.failed == 0
