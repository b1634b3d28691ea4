"""Generates the package's gRPC stubs from the repository's proto/ folder when
the package is built (pyproject.toml holds the rest of the configuration).

grpcio-tools' protoc writes zbpp/v1/<name>_pb2.py, its type stubs (.pyi)
and zbpp/v1/<name>_pb2_grpc.py into the build tree, so that `import
zbpp.v1.job_pb2` resolves the protos' own import paths (zbpp/v1/*.proto).
Nothing generated is ever written into the source tree.

The protos are ZBPP_PROTO_DIR, else ../../proto beside this file.
"""

import os
import shutil
import sys
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

HERE = Path(__file__).resolve().parent


def proto_dir() -> Path:
    """The folder holding zbpp/v1/*.proto; exits naming it when missing."""
    folder = Path(os.environ.get("ZBPP_PROTO_DIR") or HERE.parent.parent / "proto")
    if not (folder / "zbpp" / "v1").is_dir():
        sys.exit(f"zbpp: no protos in {folder}/zbpp/v1: build the package from the zbpp "
                 "repository (pip install ./client/python) or set ZBPP_PROTO_DIR")
    return folder


def generate_stubs(out: Path) -> None:
    """Runs grpcio-tools' protoc over every proto of zbpp/v1 into `out`."""
    from importlib.resources import files

    from grpc_tools import protoc

    source = proto_dir()
    protos = sorted(str(p.relative_to(source)) for p in (source / "zbpp" / "v1").glob("*.proto"))
    well_known = str(files("grpc_tools") / "_proto")
    package = out / "zbpp" / "v1"
    # A build tree reused from an earlier build may hold the stubs of a
    # proto since removed.
    shutil.rmtree(package, ignore_errors=True)
    out.mkdir(parents=True, exist_ok=True)
    args = ["grpc_tools.protoc", f"-I{source}", f"-I{well_known}", f"--python_out={out}",
            f"--pyi_out={out}", f"--grpc_python_out={out}", *protos]
    if protoc.main(args) != 0:
        sys.exit(f"zbpp: protoc failed on {source} (its message is above)")
    (package / "__init__.py").write_text(
        '"""Messages and service stubs generated from proto/zbpp/v1 at build time."""\n')


def write_build_info(out: Path) -> None:
    """zbpp/_build.py: the checkout the package was built from, whose
    scripts/export `Client.export` runs by default (as zbppctl's compiled-in
    ZBPP_EXPORT_SCRIPT_DEFAULT)."""
    (out / "zbpp" / "_build.py").write_text(
        '"""Where this package was built from (written by setup.py)."""\n\n'
        f"REPOSITORY = {str(HERE.parent.parent)!r}\n")


class BuildPyWithStubs(build_py):
    """build_py, then the stubs and _build.py into the build tree."""

    def run(self) -> None:
        super().run()
        generate_stubs(Path(self.build_lib))
        write_build_info(Path(self.build_lib))


setup(cmdclass={"build_py": BuildPyWithStubs})
