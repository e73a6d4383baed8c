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
node down and its GPUs lost, a fault that resolves and returns after a Prometheus restart or a
restart of the job. An alert that stays firing for hours is one start. Which kinds fired is
recorded apart (per node and alert name), and so is the last job that saw a fault there.
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
# One sample per start of one alert name on one node (labels: node, alertname, training_job).
FAULT_START = "node_alertname:trainsignals_hardware_fault_start:timestamp"
# Incident starts of each node in the last 30 days (labels: node).
INCIDENTS = "node:trainsignals_hardware_incidents:count30d"
# Fault starts per node and alert name in the last 30 days (labels: node, alertname).
FAULTS = "node_alertname:trainsignals_hardware_faults:count30d"
# The job of the newest fault start on each node, its value that time (labels: node, training_job).
LAST_JOB = "node_training_job:trainsignals_hardware_fault_last:timestamp"


def hardware_alerts(faults: Sequence[str]) -> str:
    """`ALERTS` of the hardware-fault alerts firing on a named node, whatever job or spare."""
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


def node_incident_recordings(faults: Sequence[str], merge: str, step: str) -> dict[str, str]:
    """The start rules, for a group evaluated every `step`: a node's incident (whatever alerts
    and jobs fired there), and each alert name's start on it with the job that saw it (a job
    moving onto a node whose fault still fires is no new start)."""
    return {
        INCIDENT_START: start_expr(faults, ("node",), merge, step),
        FAULT_START: start_expr(faults, ("node", "alertname"), merge, step, ("training_job",)),
    }


def incidents_expr(window: str) -> str:
    return f"count_over_time({INCIDENT_START}[{window}])"


def faults_expr(window: str) -> str:
    return f"sum by (node, alertname) (count_over_time({FAULT_START}[{window}]))"


def last_job_expr(window: str) -> str:
    """The job of each node's newest fault start (one series per node)."""
    return (
        "topk by (node) (1,\n"
        f"  max by (node, training_job) (max_over_time({FAULT_START}[{window}]))\n)"
    )


def node_history_recordings(window: str) -> dict[str, str]:
    """The 30-day record over the starts, for the slow group."""
    return {
        INCIDENTS: incidents_expr(window),
        FAULTS: faults_expr(window),
        LAST_JOB: last_job_expr(window),
    }
