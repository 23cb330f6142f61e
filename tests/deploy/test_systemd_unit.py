"""deploy/agenttrail.service: the unit parses, and the one capability it grants its non-root user
is what `engine_nice` needs, held here by running the embedded engine under exactly the unit's
user-switch, capability and no-new-privileges settings (setpriv, as systemd applies them)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

UNIT = Path(__file__).resolve().parents[2] / "deploy" / "agenttrail.service"

pytestmark = pytest.mark.timeout(300)

# Runs one long statement at engine_nice 7 and prints every nice value a thread of the process
# held meanwhile (field 19 of /proc/<pid>/task/<tid>/stat).
PROBE = """
    import os, sys, threading, time
    from pathlib import Path
    from agenttrail.collector.store import Store, parse_store

    store = Store(parse_store(sys.argv[1]), engine_nice=7)
    seen = set()
    statement = threading.Thread(target=lambda: store.query(
        "SELECT count() FROM numbers(100000000) WHERE sipHash64(number) % 7 = 1"))
    statement.start()
    while statement.is_alive():
        for tid in os.listdir("/proc/self/task"):
            try:
                stat = Path(f"/proc/self/task/{tid}/stat").read_text()
            except OSError:
                continue
            seen.add(int(stat[stat.rindex(")") + 2:].split()[16]))
        time.sleep(0.02)
    print(" ".join(map(str, sorted(seen))))
"""


def _service_section() -> dict[str, str]:
    """The unit's [Service] keys (the last assignment of a key wins, as in systemd)."""
    keys: dict[str, str] = {}
    section = ""
    for line in UNIT.read_text().splitlines():
        line = line.strip()
        if line.startswith("["):
            section = line
        elif section == "[Service]" and "=" in line and not line.startswith("#"):
            key, value = line.split("=", 1)
            keys[key] = value
    return keys


@pytest.fixture
def workdir() -> Iterator[Path]:
    """A directory the unit's unprivileged user can reach (pytest's tmp_path is root's alone)."""
    path = Path(tempfile.mkdtemp(prefix="agenttrail-unit-"))
    path.chmod(0o777)
    yield path
    shutil.rmtree(path, ignore_errors=True)


def _run_as_the_unit(workdir: Path, *, ambient: list[str]) -> set[int]:
    """The probe under the unit's user-switch and no-new-privs, with these ambient capabilities."""
    service = _service_section()
    assert service.get("NoNewPrivileges") == "true"
    caps = ",".join(["-all", *(f"+{cap}" for cap in ambient)])
    probe = workdir / "probe.py"
    probe.write_text(textwrap.dedent(PROBE))
    probe.chmod(0o644)
    command = [
        "setpriv",
        "--reuid=nobody",
        "--regid=nogroup",
        "--clear-groups",
        f"--inh-caps={caps}",
        f"--bounding-set={caps}",
        "--no-new-privs",
    ]
    if ambient:
        command.append(f"--ambient-caps={caps.removeprefix('-all,')}")
    result = subprocess.run(
        [*command, sys.executable, str(probe), str(workdir / "store")],
        capture_output=True,
        text=True,
        timeout=240,
        cwd=workdir,
        env={**os.environ, "HOME": str(workdir)},
    )
    assert result.returncode == 0, result.stderr[-2000:]
    return {int(value) for value in result.stdout.split()}


def test_the_unit_parses(tmp_path: Path) -> None:
    """systemd's own check, with ExecStart pointed at a binary that exists here."""
    if shutil.which("systemd-analyze") is None:
        pytest.skip("systemd-analyze is not installed")
    unit = tmp_path / "agenttrail.service"
    unit.write_text(
        "\n".join(
            "ExecStart=/bin/true" if line.startswith("ExecStart=") else line
            for line in UNIT.read_text().splitlines()
        )
    )
    result = subprocess.run(
        ["systemd-analyze", "verify", str(unit)], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr
    assert "Unknown key" not in result.stderr, result.stderr
    assert "Failed to parse" not in result.stderr, result.stderr


@pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("setpriv") is None,
    reason="needs root and util-linux's setpriv to switch to the unit's unprivileged user",
)
def test_the_units_capabilities_let_engine_nice_act(workdir: Path) -> None:
    service = _service_section()
    assert service.get("User") not in (None, "", "root")
    granted = service.get("AmbientCapabilities", "").split()
    assert service.get("CapabilityBoundingSet", "").split() == granted  # nothing else is held
    assert 7 in _run_as_the_unit(workdir, ambient=[cap.lower().removeprefix("cap_") for cap in granted])


@pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("setpriv") is None,
    reason="needs root and util-linux's setpriv to switch to the unit's unprivileged user",
)
def test_without_the_capability_the_setting_changes_nothing(workdir: Path) -> None:
    """What the unit was before it granted CAP_SYS_NICE: ClickHouse ignores the setting."""
    assert 7 not in _run_as_the_unit(workdir, ambient=[])


def test_the_service_has_a_writable_temp_directory() -> None:
    """ProtectSystem=strict makes /tmp read-only too; the engine writes its config file (the merge
    settings that bound merge memory, `store.engine_config_file`) under the temp directory, so
    the unit gives the service a private /tmp (or names /tmp writable)."""
    service = _service_section()
    assert service.get("ProtectSystem") == "strict"
    writable = service.get("ReadWritePaths", "").split()
    assert service.get("PrivateTmp") in ("true", "yes") or "/tmp" in writable


def test_the_readmes_install_steps_match_the_unit() -> None:
    """deploy/README.md's systemd install block makes what the unit expects: its venv holds
    ExecStart's binary, the user it creates is User= with the state directory as home, the config
    and the secrets file land where ExecStart and EnvironmentFile= read them, the unit where
    systemctl finds it under its own name."""
    import re

    readme = (UNIT.parent / "README.md").read_text()
    block = re.search(r"<!-- systemd-install:[^>]*-->\n```bash\n(.*?)```", readme, re.S)
    assert block is not None, "deploy/README.md has no systemd-install block"
    steps = block.group(1)
    service = _service_section()
    binary, _, arguments = service["ExecStart"].partition(" ")
    venv = re.search(r"python3\.11 -m venv (\S+)", steps)
    assert venv is not None
    assert binary == f"{venv.group(1)}/bin/agenttrail"
    user = re.search(r"useradd --system --home-dir (\S+) .*?(\S+)$", steps, re.M)
    assert user is not None
    assert (user.group(2), user.group(1)) == (service["User"], f"/var/lib/{service['StateDirectory']}")
    config = re.search(r"--config (\S+)", arguments)
    assert config is not None
    assert f"deploy/agenttrail.yaml {config.group(1)}\n" in steps
    assert f"/dev/null {service['EnvironmentFile'].removeprefix('-')} " in steps
    assert f"deploy/{UNIT.name} /etc/systemd/system/{UNIT.name}\n" in steps
    assert f"systemctl enable --now {UNIT.stem}\n" in steps
