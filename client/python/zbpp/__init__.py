"""zbpp from Python: submit zero-bubble pipeline-parallel training jobs to a
zbpp coordinator, watch them, read their reports (docs/python.md).

    import zbpp

    with zbpp.Client("127.0.0.1:50051") as client:
        job_id = client.submit("deploy/examples/gpt-bible-cpu.yaml")
        for event in client.watch(job_id):
            print(event.kind, event.step or event.state or "")
        print(client.report(job_id))
"""

from zbpp.client import Client, cost_file
from zbpp.connection import DEFAULT_COORDINATOR, DeadlineExceeded, Tls, read_token_file
from zbpp.errors import Error, JobFailed, NotFound, PermissionDenied, SpecError, Unavailable
from zbpp.report import Report
from zbpp.spec import job_spec
from zbpp.types import (TERMINAL_STATES, Assignment, Event, Job, ScheduleChange, StageStats,
                        Step, Transition, Validation)

__all__ = [
    "Assignment", "Client", "DEFAULT_COORDINATOR", "DeadlineExceeded", "Error", "Event", "Job",
    "JobFailed", "NotFound", "PermissionDenied", "Report", "ScheduleChange", "SpecError",
    "StageStats", "Step", "TERMINAL_STATES", "Tls", "Transition", "Unavailable", "Validation",
    "cost_file",
    "job_spec", "read_token_file",
]
