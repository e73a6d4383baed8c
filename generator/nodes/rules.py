"""The node incident record (starts, 30-day history) and the NodeIncidentsRecurring ticket."""

from __future__ import annotations

from trainsignals.generator.nodes.policy import (
    ALERT,
    HISTORY_GROUP,
    NAME,
    START_GROUP,
    NodesPolicy,
    hardware_faults,
    hardware_tickets,
)
from trainsignals.generator.signals.node_incidents import (
    FAULTS,
    INCIDENTS,
    LAST_JOB,
    SCORE,
    TICKETS,
    node_history_recordings,
    node_incident_recordings,
)
from trainsignals.generator.signals.panels import PANEL_IDS, dashboard_uid
from trainsignals.generator.spec.job import JobSpec, Links
from trainsignals.generator.spec.pipeline_alerts import declared_severity


def _records(names: dict[str, str]) -> list[dict]:
    return [{"record": name, "expr": expr} for name, expr in names.items()]


def infra_teams(specs: list[JobSpec]) -> dict[str, tuple[str, ...]]:
    """{infra team: its jobs}: who repairs the hardware of each job (recovery.infra_team, else
    the job's team), teams sorted."""
    teams: dict[str, list[str]] = {}
    for spec in specs:
        teams.setdefault(spec.infra_team, []).append(spec.name)
    return {team: tuple(sorted(jobs)) for team, jobs in sorted(teams.items())}


def _history(record: str, template: str, sort_by: str) -> str:
    """A Go template ranging over `record` of the alert's node, sorted by a label (Prometheus
    and vmalert both expand `query` and `sortByLabel` in annotations)."""
    query = f'printf "{record}{{node=%q}}" $labels.node | query | sortByLabel "{sort_by}"'
    return f"{{{{ range {query} }}}}{template}{{{{ end }}}}"


def _count(record: str) -> str:
    """The value of `record` for the alert's node, 0 where it has none."""
    query = f'printf "{record}{{node=%q}}" $labels.node | query'
    return f"{{{{ with {query} }}}}{{{{ . | first | value }}}}{{{{ else }}}}0{{{{ end }}}}"


def team_of_node(teams: dict[str, tuple[str, ...]]) -> str:
    """One series per node that had a fault, labelled `team`: the infra team of the job that
    last saw a fault there. The first team also takes nodes whose last job is none of the
    specs' (a spare pool, a job not generated here); label_replace leaves a series whose
    `training_job` does not match unchanged, so each team's regex overrides the first."""
    names = list(teams)
    expr = f'label_replace({LAST_JOB}, "team", "{names[0]}", "node", ".*")'
    for team in names[1:]:
        jobs = "|".join(teams[team])
        expr = f'label_replace({expr}, "team", "{team}", "training_job", "{jobs}")'
    return expr


def alert_rule(policy: NodesPolicy, links: Links, teams: dict[str, tuple[str, ...]]) -> dict:
    """The ticket, routed to the infra team's ticket receiver by its `team` label. No spec: no
    team (the monitoring fallback route takes it). It fires on the node's score (incidents +
    tickets / tickets_per_incident) and says what it is made of: the counts of incidents and
    tickets, each kind's starts, the last job."""
    expr = f"{SCORE} >= {policy.threshold}"
    labels = {"job": NAME, "severity": declared_severity(ALERT)}
    if teams:
        # `* 0 + 1`: the score stays the value, the team joins as a label.
        expr = f"({expr})\n* on (node) group_left (team) ({team_of_node(teams)} * 0 + 1)"
        labels["team"] = "{{ $labels.team }}"
    kinds = _history(FAULTS, "{{ .Labels.alertname }} x{{ .Value }}; ", "alertname")
    last = _history(LAST_JOB, "{{ .Labels.training_job }}", "training_job")
    incidents, tickets = _count(INCIDENTS), _count(TICKETS)
    per = policy.tickets_per_incident
    uid = dashboard_uid(next(iter(teams.values()))[0]) if teams else None
    dashboard = (
        f"{links.grafana_base_url.rstrip('/')}/d/{uid}?viewPanel={PANEL_IDS['nodes_by_incidents']}"
        if uid
        else links.grafana_base_url
    )
    return {
        "alert": ALERT,
        "expr": expr,
        "labels": labels,
        "annotations": {
            "dashboard_url": dashboard,
            "description": (
                f"Node {{{{ $labels.node }}}} had {incidents} hardware incidents that killed a "
                f"job and {tickets} non-fatal hardware tickets in 30 days, across jobs and "
                f'spares: score {{{{ printf "%.2g" $value }}}} ({per} tickets weigh one '
                f"incident; a lemon at {policy.threshold}). By kind: {kinds}last job with a "
                f"fault or ticket there: {last}. Drain it and run the vendor's diagnostics "
                "before it kills another job."
            ),
            "runbook_url": f"{links.runbook_base_url.rstrip('/')}/{ALERT}.md",
            "summary": (
                f"Node {{{{ $labels.node }}}}: {incidents} hardware incidents and {tickets} "
                f"hardware tickets in 30 days (a lemon at {policy.threshold})"
            ),
        },
    }


def rules_document(policy: NodesPolicy, links: Links, teams: dict[str, tuple[str, ...]]) -> dict:
    faults, tickets = hardware_faults(), hardware_tickets()
    per = policy.tickets_per_incident
    return {
        "groups": [
            {
                "name": START_GROUP,
                # Pinned to the start rules' offset: each incident start is seen by exactly one
                # evaluation, whatever the global evaluation_interval is.
                "interval": policy.step,
                "rules": _records(
                    node_incident_recordings(faults, policy.merge, policy.step, tickets)
                ),
            },
            {
                "name": HISTORY_GROUP,
                # Reads only the starts (one sample per incident): cheap at the slow interval.
                "interval": policy.history_interval,
                "rules": [
                    *_records(node_history_recordings(policy.window, per)),
                    alert_rule(policy, links, teams),
                ],
            },
        ]
    }
