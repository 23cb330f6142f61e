"""`agenttrail serve` as a subprocess in tests: the command, starting it on port 0 and reading
the addresses it bound, and stopping it as a supervisor does."""

from __future__ import annotations

import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

AGENTTRAIL = [sys.executable, "-c", "from agenttrail.evaluators.cli.entry import main; main()"]

# serve's first line once both receivers listen (collector/cli.py: serve).
BANNER = re.compile(r"agenttrail serving on .*: OTLP/gRPC (\S+), OTLP/HTTP (\S+) ")


@dataclass
class ServeProcess:
    """A running `agenttrail serve`, its stdout and stderr in one log file: a file never fills and
    blocks serve as an unread pipe does, and it can be read while serve runs and shown on failure."""

    process: subprocess.Popen[str]
    log: Path
    grpc: str = ""
    http: str = ""

    def output(self) -> str:
        return self.log.read_text(errors="replace")

    def wait_listening(self, timeout: float = 240) -> ServeProcess:
        """Until the banner names the bound addresses. Generous: serve took over 60 s to listen
        with the suite on 4 pytest-xdist workers on a loaded 2-core machine."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            found = BANNER.search(self.output())
            if found:
                self.grpc, self.http = found.groups()
                return self
            if self.process.poll() is not None:
                raise AssertionError(
                    f"serve exited ({self.process.returncode}) before it listened:\n{self.output()}"
                )
            time.sleep(0.1)
        raise AssertionError(f"serve did not listen within {timeout:g} s:\n{self.output()}")

    def stop(self, timeout: float = 120) -> int:
        """SIGTERM, as a supervisor stops serve; its exit code. Killed if it has not ended within
        `timeout`, and the test fails with its log."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        try:
            return self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(30)
            raise AssertionError(
                f"serve did not stop within {timeout:g} s of SIGTERM:\n{self.output()}"
            ) from None


# The serve_process fixture's type: start serve with these arguments, once it listens.
StartServe = Callable[..., ServeProcess]


def port_of(held: socket.socket) -> int:
    """The port of a socket held bound (the `closed_port` fixture's)."""
    return int(held.getsockname()[1])


def launch_serve(
    log: Path, *args: str, options: tuple[str, ...] = (), env: dict[str, str] | None = None
) -> ServeProcess:
    """`agenttrail [options] serve` on 127.0.0.1:0 for both receivers (an address in `args` wins:
    click keeps an option's last value), writing to `log`. Port 0 and the banner, never a port
    chosen beforehand: a parallel test may take such a port before serve binds it."""
    command = [*AGENTTRAIL, *options, "serve", "--grpc", "127.0.0.1:0", "--http", "127.0.0.1:0", *args]
    with log.open("w") as sink:  # the child keeps its own descriptor
        process = subprocess.Popen(command, stdout=sink, stderr=subprocess.STDOUT, text=True, env=env)
    return ServeProcess(process, log)


def call_json(http: str, path: str, body: dict[str, Any] | None = None, token: str | None = None) -> Any:
    """(status, JSON answer) of `path` on the sidecar at `http` (host:port), e.g. its admin API:
    a POST of `body` as JSON, a GET without one; with `token` as the bearer token."""
    import json
    import urllib.error
    import urllib.request

    data = None if body is None else json.dumps(body).encode()
    call = urllib.request.Request(f"http://{http}{path}", data=data)
    if token:
        call.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(call, timeout=30) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())
