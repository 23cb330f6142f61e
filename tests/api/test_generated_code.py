"""The checked-in API modules are exactly what `make proto` generates from proto/."""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
GENERATED = ("*_pb2.py", "*_pb2.pyi", "*_pb2_grpc.py")


def generated_files(directory: Path) -> dict[str, bytes]:
    return {
        str(path.relative_to(directory)): path.read_bytes()
        for pattern in GENERATED
        for path in sorted(directory.rglob(pattern))
    }


def test_generated_code_is_up_to_date(tmp_path: Path) -> None:
    """Regenerating from the .proto files (as `make proto` does) changes no file and adds none."""
    protos = sorted(str(path.relative_to(ROOT)) for path in (ROOT / "proto").rglob("*.proto"))
    assert protos, "no .proto files under proto/"
    outputs = [f"--{kind}_out={tmp_path}" for kind in ("python", "pyi", "grpc_python")]
    subprocess.run(
        [sys.executable, "-m", "grpc_tools.protoc", "-Iproto", *outputs, *protos],
        cwd=ROOT,
        check=True,
        capture_output=True,
    )
    fresh = generated_files(tmp_path)
    checked_in = generated_files(ROOT / "evaluators")
    stale = sorted(
        name for name in fresh.keys() | checked_in.keys() if fresh.get(name) != checked_in.get(name)
    )
    assert not stale, (
        f"generated API code is stale ({', '.join(stale)}): run `make proto` and commit the result"
    )


def test_generated_modules_import_as_agenttrail_api_v1() -> None:
    """The messages and the client stub import under agenttrail.api.v1 and describe the service."""
    from agenttrail.api.v1 import evaluation_pb2, evaluation_pb2_grpc

    service = evaluation_pb2.DESCRIPTOR.services_by_name["EvaluationService"]
    assert service.full_name == "agenttrail.api.v1.EvaluationService"
    assert [method.name for method in service.methods] == ["Evaluate", "GetRun", "ListScores"]
    assert hasattr(evaluation_pb2_grpc, "EvaluationServiceStub")


@pytest.mark.slow
def test_an_installed_wheel_carries_the_api(tmp_path: Path) -> None:
    """A built (non-editable) wheel holds agenttrail/api/v1 and imports it from where it is installed."""
    uv = Path(sys.executable).with_name("uv")
    if not uv.exists():
        pytest.skip("uv is installed with `make install`")
    subprocess.run(
        [uv, "build", "--wheel", "--out-dir", tmp_path / "dist"], cwd=ROOT, check=True, capture_output=True
    )
    (wheel,) = (tmp_path / "dist").glob("agenttrail-*.whl")
    venv = tmp_path / "venv"
    subprocess.run([uv, "venv", "-q", "-p", sys.executable, venv], check=True, capture_output=True)
    python = venv / "bin" / "python"
    subprocess.run(
        [uv, "pip", "install", "-q", "--python", python, "--no-deps", wheel], check=True, capture_output=True
    )
    # Dependencies from this environment; agenttrail itself only from the wheel (a .pth on
    # PYTHONPATH is not processed, so the editable install stays out).
    env = {**os.environ, "PYTHONPATH": sysconfig.get_paths()["purelib"]}
    code = "import agenttrail.api.v1.evaluation_pb2_grpc as g; print(g.__file__)"
    found = subprocess.run([python, "-c", code], env=env, check=True, capture_output=True, text=True)
    assert Path(found.stdout.strip()).is_relative_to(venv)
