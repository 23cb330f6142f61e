"""The package surface: a namespace package, a small public front, light imports, complete constants."""

import subprocess
import sys
from pathlib import Path

import agenttrail.instrumentation as instrumentation
from agenttrail.instrumentation import attributes

HEAVY = (
    "clickhouse_connect",
    "chdb",
    "openai",
    "click",
    "yaml",
    "agenttrail.collector",
    "grpc",
    "pydantic",
)
# Loaded by configure() or testing only, never by decorating.
LAZY_PREFIXES = ("opentelemetry.exporter", "opentelemetry.sdk")


def test_import_does_not_pull_in_sidecar_or_exporter_modules() -> None:
    """Importing the instrumentation loads neither sidecar dependencies nor the OTLP/gRPC exporters."""
    code = (
        "import sys, agenttrail.instrumentation\n"
        f"loaded = [m for m in {HEAVY!r} if m in sys.modules]\n"
        f"loaded += [m for m in sys.modules if m.startswith({LAZY_PREFIXES!r})]\n"
        "print(','.join(loaded))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    assert done.stdout.strip() == ""


def test_capturing_dataclasses_and_exceptions_does_not_import_pydantic() -> None:
    """Scrubbing recognises pydantic models by duck typing: a traced call never imports pydantic."""
    code = (
        "import dataclasses, sys\n"
        "from agenttrail.instrumentation import tool\n"
        "from agenttrail.instrumentation.testing import capture_spans\n"
        "@dataclasses.dataclass\n"
        "class Login:\n"
        "    password: str\n"
        "@tool\n"
        "def login(value: Login, note: str) -> None:\n"
        "    raise ValueError('password=hunter2')\n"
        "with capture_spans() as captured:\n"
        "    try:\n"
        "        login(Login('x'), 'https://a:b@c Bearer a1b2c3 secret: s')\n"
        "    except ValueError:\n"
        "        pass\n"
        "assert captured.spans, 'no span recorded'\n"
        "print('pydantic' in sys.modules)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    assert done.stdout.strip() == "False"


def test_agenttrail_is_a_namespace_package() -> None:
    """instrumentation/agenttrail has no __init__.py, so the three source folders share `agenttrail`."""
    package_dir = Path(instrumentation.__file__).parent
    assert not (package_dir.parent / "__init__.py").exists()


def test_public_names() -> None:
    """__all__ lists the public API and every listed name exists."""
    expected = {"agent", "tool", "agent_run", "tool_call", "chat", "set_task", "set_output"}
    expected |= {"set_conversation_id", "configure", "shutdown", "force_flush", "attributes"}
    assert expected <= set(instrumentation.__all__)
    assert all(hasattr(instrumentation, name) for name in instrumentation.__all__)


def test_attribute_constants_are_unique_strings() -> None:
    """Every attribute name constant is a distinct dotted string."""
    names = {
        value
        for key, value in vars(attributes).items()
        if key.isupper() and isinstance(value, str) and "." in value and "/" not in value
    }
    assert {
        "gen_ai.tool.call.arguments",
        "openinference.span.kind",
        "agenttrail.judge",
        "error.type",
    } <= names
    constants = [k for k, v in vars(attributes).items() if k.isupper() and v in names]
    assert len(constants) == len(names)
