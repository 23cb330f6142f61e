"""The container image: hadolint passes the Dockerfile, shellcheck the entrypoint, and the
entrypoint (run here, outside a container) starts a real sidecar, reads its secret from a file,
answers the HEALTHCHECK and refuses bad mounts with a clear message."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from serve_processes import ServeProcess

from .tools import DEPLOY, ROOT, VENV_BIN, run, tool

# Tests here start real sidecars and builds in subprocesses: minutes on a loaded machine.
pytestmark = pytest.mark.timeout(450)

ENTRYPOINT = DEPLOY / "docker" / "entrypoint.sh"
DOCKERFILE = DEPLOY / "Dockerfile"


def test_hadolint_passes_the_dockerfile() -> None:
    """hadolint finds nothing, not even at info level."""
    result = run(tool("hadolint"), "--failure-threshold", "info", "--no-color", DOCKERFILE)
    assert result.returncode == 0, result.stdout + result.stderr


def test_hadolint_would_catch_a_regression(tmp_path: Path) -> None:
    """The same check rejects the Dockerfile once it runs as root with an unpinned install."""
    bad = DOCKERFILE.read_text().replace("USER ${UID}:${UID}\n", "") + "RUN pip install requests\n"
    (tmp_path / "Dockerfile").write_text(bad)
    result = run(tool("hadolint"), "--failure-threshold", "info", "--no-color", tmp_path / "Dockerfile")
    assert result.returncode != 0
    assert "DL3013" in result.stdout
    assert "DL3002" in result.stdout or "DL3013" in result.stdout


def test_dockerfile_shape() -> None:
    """Multi-stage, non-root numeric user, the volume, both OTLP ports, the healthcheck on the
    entrypoint, and every COPY source present in the repository (nothing builds it here)."""
    text = DOCKERFILE.read_text()
    assert len(re.findall(r"^FROM ", text, re.M)) == 2
    assert re.search(r"^USER \$\{UID\}:\$\{UID\}$", text, re.M)
    assert re.search(r"^ARG UID=(\d+)$", text, re.M).group(1) != "0"  # type: ignore[union-attr]
    assert 'VOLUME ["/var/lib/agenttrail"]' in text
    assert re.search(r"^EXPOSE 4317 4318$", text, re.M)
    assert 'CMD ["agenttrail-entrypoint", "healthcheck"]' in text
    for source in re.findall(r"^COPY (?!--from)(\S+) ", text, re.M):
        assert (ROOT / source).exists(), f"COPY {source}: not in the repository"


def test_shellcheck_passes_the_entrypoint() -> None:
    result = run(tool("shellcheck"), "--shell=sh", ENTRYPOINT)
    assert result.returncode == 0, result.stdout


def entry_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith("AGENTTRAIL_") or key == "AGENTTRAIL_RAISE_INTERNAL_ERRORS"
    }
    env.update(
        PATH=f"{VENV_BIN}:{env.get('PATH', '/usr/bin:/bin')}",
        AGENTTRAIL_CONFIG=str(DEPLOY / "docker" / "agenttrail.yaml"),
        AGENTTRAIL_STORE=str(tmp_path / "volume" / "store"),
        AGENTTRAIL_SPOOL_DIR=str(tmp_path / "volume" / "spool"),
        AGENTTRAIL_GRPC="127.0.0.1:0",  # serve's banner says the bound ports (see the serving test)
        AGENTTRAIL_HTTP="127.0.0.1:0",
    )
    env.update(extra)
    return env


def healthcheck(env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return run("sh", ENTRYPOINT, "healthcheck", env=env, timeout=30)


@pytest.mark.slow
def test_entrypoint_serves_with_a_secret_file_and_answers_the_healthcheck(tmp_path: Path) -> None:
    """`serve` through the entrypoint: healthy once started (the healthcheck sends the token,
    which health_auth requires here), the bearer token from AGENTTRAIL_BEARER_TOKEN_FILE guards
    the API, SIGTERM stops it cleanly, then unhealthy."""
    (tmp_path / "token").write_text("s3cret\n")
    env = entry_env(
        tmp_path, AGENTTRAIL_BEARER_TOKEN_FILE=str(tmp_path / "token"), AGENTTRAIL_HEALTH_AUTH="true"
    )
    log = tmp_path / "serve.log"
    with log.open("w") as sink:
        command = ["sh", str(ENTRYPOINT), "serve"]
        process = subprocess.Popen(command, env=env, stdout=sink, stderr=sink, text=True)
    try:
        # Port 0 and the banner, not a port chosen before: a parallel test could take that first.
        env["AGENTTRAIL_HTTP"] = ServeProcess(process, log).wait_listening(150).http
        deadline = time.monotonic() + 150
        while healthcheck(env).returncode != 0:
            assert process.poll() is None, log.read_text()
            assert time.monotonic() < deadline, "the sidecar never became ready"
            time.sleep(1)
        api = f"http://{env['AGENTTRAIL_HTTP']}/api/v1/trajectories"
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(api, timeout=10)
        assert refused.value.code == 401
        request = urllib.request.Request(api, headers={"Authorization": "Bearer s3cret"})
        with urllib.request.urlopen(request, timeout=10) as response:
            assert response.status == 200
        assert (tmp_path / "volume" / "spool").is_dir()
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(60)
    assert process.returncode == 0, log.read_text()
    assert healthcheck(env).returncode == 1


def test_entrypoint_refuses_a_missing_secret_file(tmp_path: Path) -> None:
    """A secret file that is not there stops start-up, naming the variable; no open sidecar."""
    env = entry_env(tmp_path, AGENTTRAIL_BEARER_TOKEN_FILE=str(tmp_path / "missing"))
    result = run("sh", ENTRYPOINT, "serve", env=env)
    assert result.returncode == 64
    assert "AGENTTRAIL_BEARER_TOKEN_FILE names" in result.stderr


def test_entrypoint_refuses_an_unusable_volume(tmp_path: Path) -> None:
    """A store path that cannot be a directory (volume not mounted right) is named plainly."""
    (tmp_path / "volume").write_text("a file where the volume should be")
    result = run("sh", ENTRYPOINT, "serve", env=entry_env(tmp_path))
    assert result.returncode == 64
    assert "cannot create the store directory" in result.stderr


def test_entrypoint_refuses_a_missing_config(tmp_path: Path) -> None:
    result = run(
        "sh", ENTRYPOINT, "serve", env=entry_env(tmp_path, AGENTTRAIL_CONFIG=str(tmp_path / "no.yaml"))
    )
    assert result.returncode == 64
    assert "is not a readable file" in result.stderr


def test_entrypoint_passes_other_commands_to_the_cli(tmp_path: Path) -> None:
    """Any other command runs the CLI, e.g. the cluster DDL."""
    result = run("sh", ENTRYPOINT, "schema", "--cluster", "prod", env=entry_env(tmp_path), timeout=300)
    assert result.returncode == 0, result.stderr
    assert "ENGINE = Distributed(prod, agenttrail, trajectories_local" in result.stdout


@pytest.mark.slow
def test_the_build_stage_wheel_holds_the_whole_package(tmp_path: Path) -> None:
    """The image's first stage builds the wheel from the files it copies (pyproject, README and
    the three package folders); built here the same way (the hatchling backend, through uv), it
    holds every tracked package file and the `agenttrail` command."""
    import zipfile

    source = tmp_path / "src"
    source.mkdir()
    copied = re.findall(r"^COPY (?!--from)(.+) (\S+)$", DOCKERFILE.read_text(), re.M)
    build_copies = [c for c in copied if not c[0].startswith("deploy/")]
    for sources, _target in build_copies:
        for name in sources.split():
            target = source / name
            if (ROOT / name).is_dir():
                files = run("git", "ls-files", name, cwd=ROOT).stdout.split()
                for file in files:
                    (source / file).parent.mkdir(parents=True, exist_ok=True)
                    (source / file).write_bytes((ROOT / file).read_bytes())
            else:
                target.write_bytes((ROOT / name).read_bytes())
    result = run(VENV_BIN / "uv", "build", "--wheel", "--out-dir", tmp_path / "dist", source, timeout=300)
    assert result.returncode == 0, result.stderr
    (wheel,) = (tmp_path / "dist").glob("agenttrail-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    tracked = run("git", "ls-files", "instrumentation", "collector", "evaluators", cwd=ROOT).stdout.split()
    expected = {path.split("/", 1)[1] for path in tracked if "/agenttrail/" in path}
    assert expected <= names, sorted(expected - names)[:10]
    (entry_file,) = [name for name in names if name.endswith(".dist-info/entry_points.txt")]
    entry_points = zipfile.ZipFile(wheel).read(entry_file).decode()
    assert "agenttrail = agenttrail.evaluators.cli.entry:main" in entry_points
