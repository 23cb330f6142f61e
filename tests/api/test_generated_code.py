"""The checked-in API modules are exactly what `make proto` generates from proto/."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

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
