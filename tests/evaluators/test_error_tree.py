"""One exception tree: every exception class agenttrail defines derives from `AgentTrailError`,
whose root sits in the bottom package (instrumentation) so that every package reaches it, and
says in a docstring what it means. The only exceptions are click's (the CLI's exit codes) and
the demo agent's simulated failures, which stand for the observed agent's own errors."""

from __future__ import annotations

import importlib
import inspect
import pkgutil

from agenttrail.collector import errors as collector_errors
from agenttrail.instrumentation.errors import AgentTrailError

PACKAGES = ("agenttrail.instrumentation", "agenttrail.collector", "agenttrail.evaluators")
OUTSIDE = {
    "agenttrail.collector.cli.BadInput",  # click.ClickException: the CLI's exit code 3
    "agenttrail.collector.cli.NoStore",  # click.ClickException: the CLI's exit code 4
    "agenttrail.evaluators.demo.agent.PaymentGatewayError",  # the demo agent's own failure
    "agenttrail.evaluators.demo.agent.OrderServiceTimeout",  # the demo agent's own failure
}


def defined_exceptions() -> dict[str, type[BaseException]]:
    found: dict[str, type[BaseException]] = {}
    for name in PACKAGES:
        package = importlib.import_module(name)
        walked = pkgutil.walk_packages(package.__path__, f"{name}.")
        modules = [name] + [info.name for info in walked if "_pb2" not in info.name]
        for module_name in modules:
            module = importlib.import_module(module_name)
            for _, value in inspect.getmembers(module, inspect.isclass):
                if issubclass(value, BaseException) and value.__module__ == module_name:
                    found[f"{module_name}.{value.__qualname__}"] = value
    return found


def test_every_exception_derives_from_the_one_root() -> None:
    exceptions = defined_exceptions()
    assert len(exceptions) > 30  # the walk did find the packages' modules
    assert collector_errors.AgentTrailError is AgentTrailError
    outside = {name for name, cls in exceptions.items() if not issubclass(cls, AgentTrailError)}
    assert outside == OUTSIDE


def test_every_exception_says_what_it_means() -> None:
    undocumented = [name for name, cls in defined_exceptions().items() if not (cls.__doc__ or "").strip()]
    assert undocumented == []
