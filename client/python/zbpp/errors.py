"""The package's one exception hierarchy: every failure of a call to the
coordinator is a `zbpp.Error`, never a `grpc.RpcError`.

    Error                 any failure; `code` is the gRPC status name
    ├── SpecError         INVALID_ARGUMENT: a bad job spec or request; `field`
    ├── NotFound          NOT_FOUND: an unknown job (or schedule version)
    ├── PermissionDenied  UNAUTHENTICATED or PERMISSION_DENIED: a missing or
    │                     wrong bearer token, a refused client certificate
    ├── Unavailable       the coordinator cannot be reached (with the TLS hint)
    │                     or the connection was lost
    └── JobFailed         a job that ended otherwise than waited for
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from zbpp.types import Job

# A field path of zbpp.v1.JobSpec as the coordinator and the YAML reader name
# it: "pipeline.microbatches", "schedule.file", "model.layers[0]".
_FIELD = re.compile(r"[a-z_][a-z0-9_]*(\[\d+\])?(\.[a-z_][a-z0-9_]*(\[\d+\])?)*")


class Error(Exception):
    """A call failed. `code` is the gRPC status code's name ("NOT_FOUND",
    "FAILED_PRECONDITION", ...; "UNKNOWN" where none applies); the message is
    the one `zbppctl` prints for the same failure."""

    def __init__(self, message: str, code: str = "UNKNOWN") -> None:
        super().__init__(message)
        self.message = message
        self.code = code


class SpecError(Error):
    """A job spec (or a request) refused, INVALID_ARGUMENT: by the coordinator
    (`"pipeline.microbatches: must be >= 1, got 0"`) or by the package's YAML
    reader before sending (`"model.vocab_size: unknown key; known in model:
    ..."`). `field` is the spec's field path the message starts with
    ("pipeline.microbatches"), or None when the message names none."""

    def __init__(self, message: str, field: str | None = None) -> None:
        super().__init__(message, "INVALID_ARGUMENT")
        self.field = field if field is not None else field_of(message)


class NotFound(Error):
    """NOT_FOUND: no such job (or schedule version) on the coordinator."""

    def __init__(self, message: str) -> None:
        super().__init__(message, "NOT_FOUND")


class PermissionDenied(Error):
    """The coordinator refused the caller: UNAUTHENTICATED (no or a wrong
    bearer token where it requires one, zbpp-coordinator --token-file; a
    missing client certificate under mutual TLS) or PERMISSION_DENIED;
    `code` says which."""


class Unavailable(Error):
    """The coordinator cannot be reached ("cannot reach coordinator at ADDR:
    why", with a hint when a TLS mismatch is the likely cause), the
    connection was lost, or the coordinator itself answered UNAVAILABLE."""

    def __init__(self, message: str) -> None:
        super().__init__(message, "UNAVAILABLE")


class JobFailed(Error):
    """A job that `Client.wait_for_job` waited on ended in a state it did not
    wait for (FAILED, CANCELLED, or SUCCEEDED when that was not wanted).
    `job` is the job as it ended; the message names its state and
    `state_message`."""

    def __init__(self, job: Job) -> None:
        why = f": {job.state_message}" if job.state_message else ""
        super().__init__(f"job {job.id} {job.state}{why}", "FAILED_PRECONDITION")
        self.job = job


def field_of(message: str) -> str | None:
    """The field path `message` starts with ("field: reason"), else None."""
    head, sep, _ = message.partition(": ")
    return head if sep and _FIELD.fullmatch(head) else None
