"""What scripts/tokenize and scripts/export share: a bad argument or input is
one line on stderr, "PROGRAM: reason", and exit status 2."""

import argparse
import sys


class UsageError(Exception):
    """Bad arguments or input: exit 2 with one line."""


class Parser(argparse.ArgumentParser):
    """argparse, whose errors are UsageErrors instead of its usage text."""

    def error(self, message):
        raise UsageError(message)


def run(program, main):
    """Exits with main(argv)'s status, or 2 and one line on a UsageError."""
    try:
        sys.exit(main(sys.argv[1:]))
    except UsageError as e:
        print(f"{program}: {e}", file=sys.stderr)
        sys.exit(2)
