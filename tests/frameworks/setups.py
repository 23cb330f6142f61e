"""The framework set-ups the tests run: pinned packages (a venv each, since their pins conflict),
the agent script, the environment it needs, and what its traces can and cannot say.

The venvs are built once with uv into `.peers/frameworks/<name>/` (git-ignored) and rebuilt only
when the pins change.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PEERS = ROOT / ".peers" / "frameworks"
AGENTS = Path(__file__).resolve().parent / "agents"
OTEL = ["opentelemetry-sdk", "opentelemetry-exporter-otlp-proto-http"]


@dataclass(frozen=True)
class Setup:
    name: str
    script: str
    packages: tuple[str, ...]
    env: dict[str, str] = field(default_factory=dict)
    arguments_captured: bool = True  # False: the set-up records no tool arguments at all
    final_answer_tool: bool = False  # smolagents ends a run by calling its `final_answer` tool
    unended_failed_runs: bool = False  # the instrumentation never ends the agent span of a run that raised


SETUPS = {
    setup.name: setup
    for setup in (
        Setup("pydantic_ai", "pydantic_ai_agent.py", ("pydantic-ai-slim[openai]==2.68.0", "openai==3.57.0")),
        Setup(
            "openai_agents",
            "openai_agents_agent.py",
            ("openai-agents==0.24.0", "openinference-instrumentation-openai-agents==2.6.0", "openai==3.57.0"),
        ),
        Setup(
            "langgraph",
            "langgraph_agent.py",
            (
                "langgraph==1.2.24",
                "langchain-core==1.8.3",
                "langchain-openai==1.7.4",
                "openinference-instrumentation-langchain==0.1.80",
                "openai==3.57.0",
            ),
        ),
        Setup("strands", "strands_agent.py", ("strands-agents[openai,otel]==1.62.0", "openai==2.54.0")),
        Setup(
            "smolagents",
            "smolagents_agent.py",
            ("smolagents==1.26.0", "openinference-instrumentation-smolagents==0.1.43", "openai==3.57.0"),
            final_answer_tool=True,
            unended_failed_runs=True,
        ),
        Setup(
            "adk",
            "adk_agent.py",
            ("google-adk==2.13.0", "litellm==1.110.2"),
            env={"OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "SPAN_ONLY"},
        ),
        Setup(
            "adk_default",
            "adk_agent.py",
            ("google-adk==2.13.0", "litellm==1.110.2"),
            arguments_captured=False,
        ),
        # traceloop-sdk imports httpx without declaring it.
        Setup(
            "traceloop", "traceloop_agent.py", ("traceloop-sdk==0.62.4", "openai==3.57.0", "httpx==0.28.1")
        ),
    )
}


def venv_python(setup: Setup) -> Path:
    """The set-up's venv interpreter, built (or rebuilt for new pins) with uv; the build's time goes
    to stderr so `make test-frameworks` shows cold and warm install times."""
    packages = sorted({*setup.packages, *OTEL})
    digest = hashlib.sha256("\n".join(packages).encode()).hexdigest()[:16]
    folder = PEERS / "-".join(sorted(p.split("[")[0].split("=")[0] for p in setup.packages))
    python, stamp = folder / "bin" / "python", folder / ".agenttrail-pins"
    if stamp.exists() and stamp.read_text() == digest and python.exists():
        return python
    # pytest-xdist workers may want the same venv at once (adk and adk_default share one): the
    # first builds it under the lock, the others wait and then find its stamp.
    PEERS.mkdir(parents=True, exist_ok=True)
    with (PEERS / f"{folder.name}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if stamp.exists() and stamp.read_text() == digest and python.exists():
            return python
        return _build(folder, python, stamp, digest, packages)


def _build(folder: Path, python: Path, stamp: Path, digest: str, packages: list[str]) -> Path:
    uv = shutil.which("uv", path=str(Path(sys.executable).parent)) or shutil.which("uv")
    if uv is None:
        raise RuntimeError("uv not found next to the test interpreter or on PATH: run `make install` first")
    started = time.monotonic()
    shutil.rmtree(folder, ignore_errors=True)
    base = os.environ.get("PYTHON", "python3.11")
    subprocess.run([uv, "venv", "--quiet", "--python", base, str(folder)], check=True)
    subprocess.run([uv, "pip", "install", "--quiet", "--python", str(python), *packages], check=True)
    stamp.write_text(digest)
    print(f"built {folder.name} venv in {time.monotonic() - started:.1f}s", file=sys.stderr)
    return python
