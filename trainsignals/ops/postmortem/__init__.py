"""`trainsignals postmortem`: a blameless postmortem draft for one job and one time window.

draft.py collects and renders the draft (the command); timeline.py reads the incident from
`ALERTS`, delivery.py replays what Alertmanager suppressed, signals.py and plot.py draw the
golden signals, impact.py sums the impact.
"""

from trainsignals.ops.postmortem.draft import postmortem_command, write_postmortem
from trainsignals.ops.postmortem.timeline import (
    AlertEvent,
    Detection,
    build_timeline,
    detection,
    runs,
)

__all__ = [
    "AlertEvent",
    "Detection",
    "build_timeline",
    "detection",
    "postmortem_command",
    "runs",
    "write_postmortem",
]
