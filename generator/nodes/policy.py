"""The lemon-node policy (threshold, windows) and the names the node files share."""

from __future__ import annotations

from dataclasses import dataclass

from trainsignals.generator.alerts.catalog import ALERTS
from trainsignals.generator.signals.node_incidents import (
    MERGE_SECONDS,
    ONSET_STEP_SECONDS,
    WINDOW_SECONDS,
)
from trainsignals.generator.signals.recording import SLOW_INTERVAL
from trainsignals.generator.spec.durations import format_duration
from trainsignals.generator.spec.monitoring import (
    DEFAULT_LEMON_NODE_INCIDENTS,
    DEFAULT_LEMON_TICKETS_PER_INCIDENT,
)
from trainsignals.generator.spec.pipeline_alerts import NODE_INCIDENTS_ALERT

NAME = "nodes"  # file stem and the `job` label of the ticket
ALERT = NODE_INCIDENTS_ALERT
START_GROUP = "trainsignals-nodes-incident-starts"
HISTORY_GROUP = "trainsignals-nodes-history"


def hardware_faults() -> tuple[str, ...]:
    """The alerts whose incidents count against a node: those declared `hardware_fault=True`."""
    return tuple(a.name for a in ALERTS if a.hardware_fault)


def hardware_tickets() -> tuple[str, ...]:
    """The alerts that are non-fatal evidence against a node: `hardware_ticket` of the alert
    model (declared, or derived: the infra team's node-scoped alerts that are no fault)."""
    return tuple(a.name for a in ALERTS if a.hardware_ticket)


@dataclass(frozen=True)
class NodesPolicy:
    """How many incidents in 30 days make a lemon (MonitoringSettings.lemon_node_incidents),
    and how many non-fatal tickets weigh as one incident (lemon_tickets_per_incident).

    `time_scale` divides every window, as `Options.time_scale` does for the job rules
    (end-to-end tests only)."""

    threshold: int = DEFAULT_LEMON_NODE_INCIDENTS
    time_scale: float = 1.0
    tickets_per_incident: int = DEFAULT_LEMON_TICKETS_PER_INCIDENT

    def _scaled(self, seconds: float) -> str:
        return format_duration(seconds / self.time_scale)

    @property
    def step(self) -> str:
        return self._scaled(ONSET_STEP_SECONDS)

    @property
    def merge(self) -> str:
        return self._scaled(MERGE_SECONDS)

    @property
    def window(self) -> str:
        return self._scaled(WINDOW_SECONDS)

    @property
    def history_interval(self) -> str:
        return self._scaled(SLOW_INTERVAL)


MEANING = (
    "A node keeps failing across jobs: its hardware incidents in 30 days, plus its non-fatal "
    "hardware tickets (`lemon_tickets_per_incident` of them weigh one incident), reached the "
    "monitoring settings' `lemon_node_incidents`. Such lemon nodes are few and touch many "
    "jobs; drain the node and repair it before it kills the next job."
)
