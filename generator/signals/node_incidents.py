"""Hardware incidents per node across jobs: the PromQL of the lemon-node record (generator/nodes/).

A node keeps its name across jobs (the `node` label is the real host), so Prometheus' own
`ALERTS` series of the hardware-fault alerts, from every job and spare it evaluates, say which
nodes failed and when. The alert names are passed in: this layer sits below the alert
definitions, and the caller derives them from their `hardware_fault=True` declarations.

Why starts, not minutes. `count_over_time(ALERTS{...}[30d])` reads one sample per firing series
per evaluation: a node down for a day is 1,440 samples per series, and every evaluation reads the
whole 30 days again (at 131,072 GPUs, a few hundred firing series are ~10^7 samples per query).
Instead a 1m rule records an incident's *start* once: a node with a firing hardware alert now
and none in the 10 minutes before. Its output is one sample per incident, so the 30-day count
reads as many samples as there were incidents (a few per node per month) and can run at the
slow interval (3m). The start rule itself reads only the hardware alerts firing now and in the
last 11 minutes: a handful of series.

What is one incident. A node's hardware alerts that overlap, or follow each other within the
merge window, are one incident: a GPU that logs a critical XID and then falls off the bus, a
node down and its GPUs lost, a fault that resolves and returns across a restart of the job (or
a Prometheus outage) shorter than the window. An alert that stays firing for hours is one
start. Which kinds fired is recorded apart (per node and alert name), and so is the last job
that saw a fault there.

Tickets: evidence that kills nothing. A count of job-killing incidents cannot flag a lemon before
its second one, and Meta's lemon detector (Kokolis et al. 2024) reads more than failures: per
node it weighs tickets and XIDs with the job failures. So the record also counts *tickets*: a
start of the alerts that are non-fatal evidence against a node's hardware (declared, or derived
from the alert model: generator/alerts/model.py `is_hardware_ticket`), merged like incidents, and
absorbed by an incident (a ticket firing on a node with a hardware fault in the merge window is
part of that incident: the pending row remap of an ECC fault, the XID beside a lost GPU). A
node's score is its incidents plus its tickets divided by `tickets_per_incident`: a lemon at
the same threshold as before, so N incidents alone still flag it, and so do fewer incidents
with enough tickets. The ticket count costs what the incident count does: one sample per start.
"""

from __future__ import annotations

from collections.abc import Sequence

from trainsignals.generator.signals.promql import matchers, regex

WINDOW_SECONDS = 30 * 86400  # the record's memory: "incidents in 30 days"
# Faults of one node less than this apart are one incident (flaps, restarts, cascades).
MERGE_SECONDS = 600
ONSET_STEP_SECONDS = 60  # the start rules' group interval and their `offset`

# One sample per incident start, its value the start time (labels: node).
INCIDENT_START = "node:trainsignals_hardware_incident_start:timestamp"
# One sample per start of one alert name on one node, a fault's or a ticket's (labels: node,
# alertname, training_job).
FAULT_START = "node_alertname:trainsignals_hardware_fault_start:timestamp"
# One sample per ticket start outside incidents, its value the start time (labels: node).
TICKET_START = "node:trainsignals_hardware_ticket_start:timestamp"
# Incident starts of each node in the last 30 days (labels: node).
INCIDENTS = "node:trainsignals_hardware_incidents:count30d"
# Ticket starts of each node in the last 30 days (labels: node).
TICKETS = "node:trainsignals_hardware_tickets:count30d"
# Incidents + tickets / tickets_per_incident in the last 30 days (labels: node): what flags a lemon.
SCORE = "node:trainsignals_hardware_score:count30d"
# Fault starts per node and alert name in the last 30 days (labels: node, alertname).
FAULTS = "node_alertname:trainsignals_hardware_faults:count30d"
# The job of the newest fault start on each node, its value that time (labels: node, training_job).
LAST_JOB = "node_training_job:trainsignals_hardware_fault_last:timestamp"


def hardware_alerts(faults: Sequence[str]) -> str:
    """`ALERTS` of the named alerts (hardware faults, tickets) firing on a named node, whatever
    job or spare."""
    if not faults:
        raise ValueError("no hardware-fault alert is declared: nothing to count per node")
    labels = {"alertname": regex("|".join(faults)), "alertstate": "firing", "node": regex(".+")}
    return "ALERTS" + matchers(labels)


def start_expr(
    faults: Sequence[str], on: Sequence[str], merge: str, step: str, keep: Sequence[str] = ()
) -> str:
    """Firing now on the labels `on`, and not at any time in the `merge` window before the last
    step: true at exactly one evaluation of a group whose interval is `step`, the first one
    after the alert fired (the window ends a step back, so the next evaluation sees it).
    `keep`: labels of the firing series kept on the start (the job that saw it)."""
    alerts, labels = hardware_alerts(faults), ", ".join(on)
    return (
        f"(count by ({', '.join((*on, *keep))}) ({alerts})\n"
        f"  unless on ({labels})\n"
        f"  count by ({labels}) (count_over_time({alerts}[{merge}] offset {step})))\n"
        "* 0 + time()"
    )


def ticket_start_expr(tickets: Sequence[str], faults: Sequence[str], merge: str, step: str) -> str:
    """A ticket's start on a node: a ticket firing now, none of the node's tickets or faults
    firing in the merge window before, and no fault firing now (a ticket beside or right after
    a hardware fault is that incident's, not more evidence)."""
    fired = hardware_alerts((*faults, *tickets))
    return (
        f"(count by (node) ({hardware_alerts(tickets)})\n"
        "  unless on (node)\n"
        f"  count by (node) (count_over_time({fired}[{merge}] offset {step}))\n"
        f"  unless on (node) count by (node) ({hardware_alerts(faults)}))\n"
        "* 0 + time()"
    )


def node_incident_recordings(
    faults: Sequence[str], merge: str, step: str, tickets: Sequence[str] = ()
) -> dict[str, str]:
    """The start rules, for a group evaluated every `step`: a node's incident (whatever alerts
    and jobs fired there), its tickets outside incidents, and each alert name's start on it
    with the job that saw it (a job moving onto a node whose fault still fires is no new
    start)."""
    starts = {INCIDENT_START: start_expr(faults, ("node",), merge, step)}
    if tickets:
        starts[TICKET_START] = ticket_start_expr(tickets, faults, merge, step)
    kinds = (*faults, *tickets)
    starts[FAULT_START] = start_expr(kinds, ("node", "alertname"), merge, step, ("training_job",))
    return starts


def incidents_expr(window: str) -> str:
    return f"count_over_time({INCIDENT_START}[{window}])"


def tickets_expr(window: str) -> str:
    return f"count_over_time({TICKET_START}[{window}])"


def score_expr(tickets_per_incident: int) -> str:
    """Incidents + tickets / tickets_per_incident, on every node with either (0 for the other)."""
    return (
        f"({INCIDENTS} or {TICKETS} * 0)\n+ ({TICKETS} / {tickets_per_incident} or {INCIDENTS} * 0)"
    )


def faults_expr(window: str) -> str:
    return f"sum by (node, alertname) (count_over_time({FAULT_START}[{window}]))"


def last_job_expr(window: str) -> str:
    """The job of each node's newest fault start (one series per node)."""
    return (
        "topk by (node) (1,\n"
        f"  max by (node, training_job) (max_over_time({FAULT_START}[{window}]))\n)"
    )


def node_history_recordings(window: str, tickets_per_incident: int = 0) -> dict[str, str]:
    """The 30-day record over the starts, for the slow group (the tickets and the score where
    tickets count: `tickets_per_incident` > 0)."""
    history = {INCIDENTS: incidents_expr(window)}
    if tickets_per_incident:
        history |= {TICKETS: tickets_expr(window), SCORE: score_expr(tickets_per_incident)}
    return history | {FAULTS: faults_expr(window), LAST_JOB: last_job_expr(window)}
