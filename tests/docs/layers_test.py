#!/usr/bin/env python3
"""docs/architecture.md's allowed dependencies hold in the code.

The "Allowed dependencies" table of docs/architecture.md names, for each
folder, the folders its C++ may include (with a project-relative
`#include "dir/..."`; `zbpp/v1/...` is proto/). A file belongs to the longest
folder of the table that holds it (coordinator/core/x.h to coordinator/core/,
not coordinator/); every folder may include itself; `*` stands for every
folder of the table but tests/ and bench/, which nothing else includes. The
paragraph below the table adds: the coordinator's core and store include no
gRPC header; in the worker only worker/daemon/ and
worker/comm/rendezvous_store.* do; nothing outside tests/ and bench/ includes
scheduler/testing/ (header-only references, linked into no binary zbpp
ships). A C++ file in no folder of the table is a failure too, so a new
folder gets a row before it gets code.

Prints every violation, file and line; exit 1 when there is one.

    python3 tests/docs/layers_test.py REPOSITORY_ROOT

layers_self_test.py plants violations in a scratch tree and checks that
check() reports each.
"""

import pathlib
import re
import sys

INCLUDE = re.compile(r'^\s*#\s*include\s+[<"]([^">]+)[">]')
TABLE_ROW = re.compile(r"^\|\s*`([^`|]+)`\s*\|([^|]*)\|\s*$")
SOURCES = (".h", ".cc", ".cpp", ".cu")
HEADING = "## Allowed dependencies"
# Every folder but these may be named by `*`.
BELOW_ALL = ("tests", "bench")


def allowed_dependencies(architecture):
    """The table as {folder: set of folders it may include}, folders without
    their trailing slash; `*` expanded."""
    text = architecture.read_text()
    if HEADING not in text:
        raise ValueError(f"{architecture}: no '{HEADING}' section")
    rows = {}
    for line in text[text.index(HEADING):].splitlines()[1:]:
        if line.startswith("## "):
            break
        match = TABLE_ROW.match(line)
        if match:
            rows[match.group(1).strip("/")] = [
                d.strip("/") for d in re.findall(r"`([^`]+)`", match.group(2))]
    every = {folder for folder in rows if folder not in BELOW_ALL}
    table = {}
    for folder, named in rows.items():
        allowed = {folder}
        for entry in named:
            if entry == "*":
                allowed |= every
            elif entry not in rows:
                raise ValueError(f"{architecture}: row {folder}/ names {entry}/, which has no row")
            else:
                allowed.add(entry)
        table[folder] = allowed
    return table


def source_files(root):
    """Every C++ file under `root`, relative, skipping build trees and
    hidden folders."""
    for top in sorted(root.iterdir()):
        if not top.is_dir() or top.name.startswith((".", "build")):
            continue
        for path in sorted(top.rglob("*")):
            if path.suffix in SOURCES and path.is_file():
                yield path.relative_to(root).as_posix()


def check(root):
    """(files checked, violations) of the tree at `root` against its own
    docs/architecture.md."""
    table = allowed_dependencies(root / "docs" / "architecture.md")
    # Longest first, so that coordinator/core/x wins over coordinator/.
    known = sorted(table, key=len, reverse=True)

    def folder_of(path):
        for folder in known:
            if path == folder or path.startswith(folder + "/"):
                return folder
        return None

    failures = []
    checked = 0
    for relative in source_files(root):
        folder = folder_of(relative)
        if folder is None:
            failures.append(f"{relative}: in no folder of docs/architecture.md's "
                            "Allowed dependencies table")
            continue
        checked += 1
        text = (root / relative).read_text(errors="replace")
        for number, line in enumerate(text.splitlines(), 1):
            match = INCLUDE.match(line)
            if not match:
                continue
            included = match.group(1)
            where = f"{relative}:{number}: includes {included}"
            if included.startswith(("grpcpp/", "grpc/", "grpc++/")):
                if folder in ("coordinator/core", "coordinator/store"):
                    failures.append(f"{where}: the coordinator's core and store use no gRPC")
                if (folder.startswith("worker/") and folder != "worker/daemon"
                        and not relative.startswith("worker/comm/rendezvous_store.")):
                    failures.append(f"{where}: in the worker only worker/daemon/ and the "
                                    "rendezvous store speak gRPC")
                continue
            if included.startswith("scheduler/testing/") and folder not in (
                    "scheduler", "tests", "bench"):
                failures.append(f"{where}: scheduler/testing/ is for tests and bench/ only")
            target = "proto" if included.startswith("zbpp/v1/") else folder_of(included)
            if target is None:
                continue  # A third-party header.
            if target not in table[folder]:
                failures.append(f"{where}: {folder}/ may not include {target}/ "
                                "(docs/architecture.md, Allowed dependencies)")
    return checked, failures


def main():
    root = pathlib.Path(sys.argv[1]).resolve()
    try:
        checked, failures = check(root)
    except ValueError as error:
        sys.exit(f"layers_test: {error}")
    if checked < 100:
        sys.exit(f"layers_test: checked only {checked} files; is {root} the repository?")
    for failure in failures:
        print(failure)
    print(f"layers_test: {checked} files, {len(failures)} violations")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
