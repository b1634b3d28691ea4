#!/usr/bin/env python3
"""docs/architecture.md's layering holds in the code.

The "Layers" table of docs/architecture.md lists the directories in order;
each may include (with a project-relative `#include "dir/..."`) only its
own directory and those above it. Its paragraph below adds: the
coordinator's core and store include no gRPC header; in the worker only
worker/daemon/ and worker/comm/rendezvous_store.* do; nothing outside tests/
and bench/ includes scheduler/testing/ (header-only references, linked into
no binary zbpp ships). Prints every violation, file and line; exit 1 when
there is one.

    python3 tests/docs/layers_test.py REPOSITORY_ROOT
"""

import pathlib
import re
import sys

INCLUDE = re.compile(r'^\s*#\s*include\s+[<"]([^">]+)[">]')
TABLE_ROW = re.compile(r"^\|\s*(`[^|]*`)\s*\|")
SOURCES = (".h", ".cc", ".cpp", ".cu")


def layers(architecture):
    """The table's directories, top first: a list of lists (a row may name
    several directories, e.g. `coordinator/server/`, `coordinator/`)."""
    text = architecture.read_text()
    start = text.index("## Layers")
    rows = []
    for line in text[start:].splitlines()[1:]:
        if line.startswith("## "):
            break
        match = TABLE_ROW.match(line)
        if match:
            rows.append([d.strip("/") for d in re.findall(r"`([^`]+)`", match.group(1))])
    return rows


def main():
    root = pathlib.Path(sys.argv[1]).resolve()
    rows = layers(root / "docs" / "architecture.md")
    if len(rows) < 10:
        sys.exit(f"layers_test: found only {len(rows)} rows in docs/architecture.md's Layers table")
    rank = {}
    for index, row in enumerate(rows):
        for directory in row:
            rank[directory] = index
    # Longest prefix first, so that coordinator/core/x wins over coordinator/.
    known = sorted(rank, key=len, reverse=True)

    def layer_of(path):
        for directory in known:
            if path == directory or path.startswith(directory + "/"):
                return directory
        return None

    failures = []
    checked = 0
    for directory in known:
        if directory in ("tests", "bench", "scripts", "proto"):
            continue  # Below everything (tests, bench) or not C++ (scripts, proto).
        for source in sorted((root / directory).rglob("*")):
            relative = source.relative_to(root).as_posix()
            if source.suffix not in SOURCES or layer_of(relative) != directory:
                continue
            checked += 1
            for number, line in enumerate(source.read_text(errors="replace").splitlines(), 1):
                match = INCLUDE.match(line)
                if not match:
                    continue
                included = match.group(1)
                where = f"{relative}:{number}: includes {included}"
                if included.startswith(("grpcpp/", "grpc/", "grpc++/")):
                    if directory in ("coordinator/core", "coordinator/store"):
                        failures.append(f"{where}: the coordinator's core and store use no gRPC")
                    if (directory.startswith("worker/") and directory != "worker/daemon"
                            and not relative.startswith("worker/comm/rendezvous_store.")):
                        failures.append(f"{where}: in the worker only worker/daemon/ and the "
                                        "rendezvous store speak gRPC")
                    continue
                if included.startswith("scheduler/testing/") and directory != "scheduler":
                    failures.append(f"{where}: scheduler/testing/ is for tests and bench/ only")
                if included.startswith("zbpp/v1/"):
                    target = "proto"  # Generated from proto/zbpp/v1.
                else:
                    target = layer_of(included)
                if target is None or target in ("tests", "bench"):
                    if target is not None:
                        failures.append(f"{where}: tests/ and bench/ are below every source")
                    continue
                if rank[target] > rank[directory]:
                    failures.append(f"{where}: {target}/ is below {directory}/ in the table")
    if checked < 100:
        sys.exit(f"layers_test: checked only {checked} files; is {root} the repository?")
    for failure in failures:
        print(failure)
    print(f"layers_test: {checked} files, {len(failures)} violations")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
