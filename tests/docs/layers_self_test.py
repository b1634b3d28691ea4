#!/usr/bin/env python3
"""layers_test.py catches what it is for.

Builds a scratch tree holding the repository's docs/architecture.md and one
file per folder of its Allowed dependencies table, each including only what
its row allows; checks that this tree passes, then plants one violation at
a time (an include the table forbids, gRPC in the core, a file in no folder)
and checks that check() reports exactly it. Finally the repository itself
passes.

    python3 tests/docs/layers_self_test.py REPOSITORY_ROOT
"""

import pathlib
import shutil
import sys
import tempfile
import unittest

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import layers_test  # noqa: E402

ROOT = None  # The repository, from argv.


class LayersSelfTest(unittest.TestCase):

    def setUp(self):
        self.scratch = pathlib.Path(tempfile.mkdtemp(prefix="layers_self_test."))
        (self.scratch / "docs").mkdir()
        shutil.copy(ROOT / "docs" / "architecture.md", self.scratch / "docs")
        table = layers_test.allowed_dependencies(self.scratch / "docs" / "architecture.md")
        for folder, allowed in table.items():
            lines = [f'#include "{other}/clean.h"' for other in sorted(allowed)
                     if other != "proto"]
            if "proto" in allowed:
                lines.append('#include "zbpp/v1/job.pb.h"')
            self.write(f"{folder}/clean.h", lines)

    def tearDown(self):
        shutil.rmtree(self.scratch)

    def write(self, relative, lines):
        path = self.scratch / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("\n".join(["#pragma once", "#include <vector>", *lines]) + "\n")

    def failures(self):
        return layers_test.check(self.scratch)[1]

    def assert_reported(self, relative, include, expected):
        self.write(relative, [f'#include "{include}"'])
        failures = self.failures()
        self.assertEqual(len(failures), 1, failures)
        self.assertIn(f"{relative}:3: includes {include}: {expected}", failures[0])

    def test_a_tree_that_keeps_the_table_passes(self):
        self.assertEqual(self.failures(), [])

    def test_worker_including_the_coordinator(self):
        self.assert_reported("worker/runtime/planted.cc", "coordinator/core/job.h",
                             "worker/runtime/ may not include coordinator/core/")
        (self.scratch / "worker/runtime/planted.cc").unlink()
        self.assert_reported("worker/daemon/planted.cc", "coordinator/service/rpc_scope.h",
                             "worker/daemon/ may not include coordinator/service/")
        (self.scratch / "worker/daemon/planted.cc").unlink()
        self.assert_reported("worker/comm/planted.h", "coordinator/coordinator_flags.h",
                             "worker/comm/ may not include coordinator/")

    def test_client_including_the_coordinator(self):
        self.assert_reported("client/planted.cc", "coordinator/server/coordinator_server.h",
                             "client/ may not include coordinator/server/")
        (self.scratch / "client/planted.cc").unlink()
        self.assert_reported("client/planted.cc", "coordinator/core/job.h",
                             "client/ may not include coordinator/core/")

    def test_metrics_including_the_core(self):
        self.assert_reported("metrics/planted.cc", "coordinator/core/coordinator.h",
                             "metrics/ may not include coordinator/core/")

    def test_a_lower_layer_including_a_higher_one(self):
        self.assert_reported("scheduler/planted.cc", "api/job_state.h",
                             "scheduler/ may not include api/")
        (self.scratch / "scheduler/planted.cc").unlink()
        self.assert_reported("coordinator/core/planted.cc", "metrics/coordinator_metrics.h",
                             "coordinator/core/ may not include metrics/")

    def test_tests_are_included_by_nothing_else(self):
        self.assert_reported("testing/planted.h", "tests/coordinator/raw_call.h",
                             "testing/ may not include tests/")

    def test_grpc_in_the_core_and_below_the_worker_daemon(self):
        self.write("coordinator/core/planted.cc", ["#include <grpcpp/grpcpp.h>"])
        self.write("worker/runtime/planted.cc", ["#include <grpcpp/grpcpp.h>"])
        failures = self.failures()
        self.assertEqual(len(failures), 2, failures)
        self.assertIn("the coordinator's core and store use no gRPC", failures[0])
        self.assertIn("in the worker only worker/daemon/", failures[1])

    def test_scheduler_testing_outside_tests_and_bench(self):
        self.assert_reported("client/planted.cc", "scheduler/testing/solver_grid.h",
                             "scheduler/testing/ is for tests and bench/ only")

    def test_a_file_in_no_folder_of_the_table(self):
        self.write("newfolder/planted.cc", [])
        failures = self.failures()
        self.assertEqual(len(failures), 1, failures)
        self.assertIn("newfolder/planted.cc: in no folder", failures[0])

    def test_a_row_naming_a_folder_without_a_row_is_an_error(self):
        architecture = self.scratch / "docs" / "architecture.md"
        architecture.write_text(architecture.read_text().replace(
            "| `metrics/` | `common/`,", "| `metrics/` | `nowhere/`, `common/`,"))
        with self.assertRaisesRegex(ValueError, "names nowhere/, which has no row"):
            self.failures()

    def test_the_repository_passes(self):
        checked, failures = layers_test.check(ROOT)
        self.assertGreater(checked, 100)
        self.assertEqual(failures, [])


if __name__ == "__main__":
    ROOT = pathlib.Path(sys.argv.pop(1)).resolve()
    unittest.main()
