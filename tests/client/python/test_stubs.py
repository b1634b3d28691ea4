"""The package's gRPC stubs are proto/ as it is: every proto of zbpp/v1 has
its module, and each module's file descriptor equals a fresh protoc run's,
both in the package under test (built by ctest from this checkout) and in
the copy scripts/install-deps.sh put in the project's virtual environment."""

from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
from collections.abc import Iterable
from importlib.resources import files
from pathlib import Path

from conftest import REPO
from google.protobuf import descriptor_pb2
from grpc_tools import protoc

PROTOS = sorted(p.name for p in (REPO / "proto" / "zbpp" / "v1").glob("*.proto"))

# Prints {proto file: hex of its module's serialized FileDescriptorProto} for
# the zbpp package the interpreter finds, and the package's folder.
DUMP = """
import json, pathlib, sys, zbpp, importlib
folder = pathlib.Path(zbpp.__file__).parent / "v1"
out = {}
for module in sorted(folder.glob("*_pb2.py")):
    m = importlib.import_module("zbpp.v1." + module.stem)
    out[m.DESCRIPTOR.name] = m.DESCRIPTOR.serialized_pb.hex()
print(json.dumps({"folder": str(folder), "files": out}))
"""


def without_json_names(file: descriptor_pb2.FileDescriptorProto) -> bytes:
    """`file` serialized without the json_name protoc's descriptor sets add
    to every field (the generated modules leave it out: it is derived)."""
    def clear(messages: Iterable[descriptor_pb2.DescriptorProto]) -> None:
        for message in messages:
            for field in message.field:
                field.ClearField("json_name")
            clear(message.nested_type)

    clear(file.message_type)
    return file.SerializeToString()


def fresh_descriptors(tmp_path: Path) -> dict[str, bytes]:
    """protoc's FileDescriptorProto of each proto, serialized."""
    out = tmp_path / "set.pb"
    args = ["protoc", f"-I{REPO / 'proto'}", f"-I{files('grpc_tools') / '_proto'}",
            f"--descriptor_set_out={out}", *(f"zbpp/v1/{p}" for p in PROTOS)]
    assert protoc.main(args) == 0
    fresh = descriptor_pb2.FileDescriptorSet.FromString(out.read_bytes())
    return {f.name: without_json_names(f) for f in fresh.file}


def mismatches(dumped: dict[str, str], fresh: dict[str, bytes]) -> list[str]:
    problems = [f"{name}: no module" for name in fresh if name not in dumped]
    problems += [f"{name}: a module without a proto" for name in dumped if name not in fresh]
    for name in set(dumped) & set(fresh):
        ours = descriptor_pb2.FileDescriptorProto.FromString(bytes.fromhex(dumped[name]))
        if without_json_names(ours) != fresh[name]:
            problems.append(f"{name}: differs from proto/{name}")
    return problems


def test_package_under_test_matches_proto(tmp_path: Path) -> None:
    dumped = {}
    for proto in PROTOS:
        module = importlib.import_module(f"zbpp.v1.{proto.removesuffix('.proto')}_pb2")
        dumped[module.DESCRIPTOR.name] = module.DESCRIPTOR.serialized_pb.hex()
    assert len(PROTOS) >= 5
    assert mismatches(dumped, fresh_descriptors(tmp_path)) == []


def test_installed_package_matches_proto(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    run = subprocess.run([sys.executable, "-c", DUMP], capture_output=True, text=True,
                         env=env, cwd=tmp_path, check=False)
    assert run.returncode == 0, f"no zbpp package in {sys.executable}'s environment " \
        f"({run.stderr.strip().splitlines()[-1:]}): run scripts/install-deps.sh"
    dumped = json.loads(run.stdout)
    problems = mismatches(dumped["files"], fresh_descriptors(tmp_path))
    assert problems == [], f"{dumped['folder']}: {problems}; run scripts/install-deps.sh"
