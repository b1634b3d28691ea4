"""What the deploy tests share: one-line failures, a tally of problems, and
the import of the Python packages that scripts/deploy-test-deps.sh installs
into the project's virtual environment (requirements/deploy-tests.txt).

A missing package fails the test with the command that installs it.
"""

import importlib
import sys

FIX = "run scripts/deploy-test-deps.sh"


def fail(message):
    """Prints `FAIL: message` on stderr and exits 1."""
    print(f"FAIL: {message}", file=sys.stderr)
    sys.exit(1)


def need(module, package):
    """Imports `module` (from the PyPI package `package`), or fails naming the fix."""
    try:
        return importlib.import_module(module)
    except ImportError as e:
        fail(f"Python package {package} not found for {sys.executable} ({e}); {FIX}")


class Tally:
    """Counts the problems a test finds; the test goes on after each one."""

    def __init__(self):
        self.failures = 0

    @staticmethod
    def ok(what):
        print(f"ok   {what}", flush=True)

    def problem(self, what):
        print(f"FAIL {what}", file=sys.stderr, flush=True)
        self.failures += 1

    def expect(self, condition, what):
        """A problem `what` unless `condition` holds."""
        if not condition:
            self.problem(what)

    def finish(self, success):
        """Exits 1 if any problem was found, else prints `success`."""
        if self.failures:
            fail(f"{self.failures} problem(s)")
        print(success)
