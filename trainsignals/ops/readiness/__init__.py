"""`trainsignals readiness`: a pass/fail checklist of a live setup before anyone relies on it.

checks.py checks rules, series, targets, routing and runbooks (and is the command);
delivery.py checks that a page can be delivered, not only routed; model.py is one line of
the checklist.
"""

from trainsignals.ops.readiness.checks import (
    Job,
    check_routing,
    check_runbooks,
    check_series,
    readiness,
    readiness_command,
)
from trainsignals.ops.readiness.model import Check

__all__ = [
    "Check",
    "Job",
    "check_routing",
    "check_runbooks",
    "check_series",
    "readiness",
    "readiness_command",
]
