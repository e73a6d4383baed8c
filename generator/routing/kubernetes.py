"""The job's routing as a prometheus-operator AlertmanagerConfig (monitoring.coreos.com/v1alpha1).

The same tree as alerts/alertmanager.yaml, for one job: its alerts split by severity into a
page and a ticket receiver, the same timing and inhibition rules. Credentials are Secret
references in the object's namespace (routingKey, apiURL, authorization.credentials); the
operator reads them, so no secret is in the file. The object carries only this spec's
receivers, so each severity its alerts can have needs a receiver in this spec (or an explicit
`notify_nobody`); an alert no child route matches goes to the team's ticket receiver.
"""

from __future__ import annotations

import re

from trainsignals.generator.routing.alertmanager import (
    DEFAULT_TIMING,
    HARDWARE_GROUP_BY,
    SEVERITIES,
)
from trainsignals.generator.routing.check import emitted
from trainsignals.generator.routing.inhibit import INHIBIT_RULES
from trainsignals.generator.routing.receivers import NOTIFICATION_TEXT
from trainsignals.generator.signals.recording import HARDWARE_FAULT_LABEL
from trainsignals.generator.spec.job import JobSpec
from trainsignals.generator.spec.receivers import Receiver, Routing
from trainsignals.generator.spec.secrets import SecretRef

_MATCHER = re.compile(r'^([a-zA-Z_][a-zA-Z0-9_]*)(=~|!~|!=|=)"(.*)"$')


def matcher(text: str) -> dict:
    """'alertname=~"A|B"' as the operator's {name, matchType, value}."""
    found = _MATCHER.match(text)
    if not found:
        raise ValueError(f"cannot translate matcher {text!r}")
    name, match_type, value = found.groups()
    return {"name": name, "matchType": match_type, "value": value}


def _secret(ref: SecretRef, field: str) -> dict:
    if ref.name is None or ref.key is None:
        raise ValueError(
            f"{field}: a Kubernetes AlertmanagerConfig needs a Secret reference; add "
            "`name` and `key` to the secret (its `file` is for a plain Alertmanager)"
        )
    return {"name": ref.name, "key": ref.key}


def _receiver(name: str, receiver: Receiver | None, field: str) -> dict:
    text = NOTIFICATION_TEXT  # the plain Alertmanager config's text (routing/receivers.py)
    if receiver is None:
        return {"name": name}
    if receiver.kind == "pagerduty":
        assert receiver.secret is not None
        return {
            "name": name,
            "pagerdutyConfigs": [
                {
                    "routingKey": _secret(receiver.secret, field),
                    "sendResolved": True,
                    "description": text.pagerduty_description,
                    "severity": text.pagerduty_severity,
                    "pagerDutyLinkConfigs": [
                        {"href": href, "alt": alt} for href, alt in text.links
                    ],
                }
            ],
        }
    if receiver.kind == "slack":
        assert receiver.secret is not None
        return {
            "name": name,
            "slackConfigs": [
                {
                    "apiURL": _secret(receiver.secret, field),
                    "sendResolved": True,
                    "title": text.slack_title,
                    "text": text.slack_text,
                }
            ],
        }
    if receiver.kind == "email":
        return {"name": name, "emailConfigs": [{"to": receiver.target, "sendResolved": True}]}
    webhook: dict = {"url": receiver.target, "sendResolved": True}
    if receiver.secret is not None:
        webhook["httpConfig"] = {
            "authorization": {"type": "Bearer", "credentials": _secret(receiver.secret, field)}
        }
    return {"name": name, "webhookConfigs": [webhook]}


def _timing(key: str) -> dict[str, str]:
    timing = DEFAULT_TIMING[key]
    return {
        "groupWait": timing["group_wait"],
        "groupInterval": timing["group_interval"],
        "repeatInterval": timing["repeat_interval"],
    }


def _teams(spec: JobSpec) -> list[tuple[str, str, Routing, str]]:
    """(receiver name prefix, team, routing, spec field): the job's team, then the infra team
    that gets hardware tickets under recovery.infra_team (as in alerts/alertmanager.yaml)."""
    teams = [("", spec.team, spec.routing, "routing")]
    if spec.recovery.infra_team not in (None, spec.team):
        infra = ("infra-", spec.infra_team, spec.recovery.infra_routing, "recovery.infra_routing")
        teams.append(infra)
    return teams


def _team_route(prefix: str, team: str, severities: list[str]) -> dict:
    routes = []
    for severity in severities:
        by_severity = {"name": "severity", "matchType": "=", "value": severity}
        if severity == "page":  # one faulty part, one incident (as in alertmanager.yaml)
            name, value = HARDWARE_FAULT_LABEL
            routes.append(
                {
                    "receiver": f"{prefix}{severity}",
                    "matchers": [by_severity, {"name": name, "matchType": "=", "value": value}],
                    "groupBy": list(HARDWARE_GROUP_BY),
                    **_timing(severity),
                }
            )
        routes.append(
            {"receiver": f"{prefix}{severity}", "matchers": [by_severity], **_timing(severity)}
        )
    return {"matchers": [{"name": "team", "matchType": "=", "value": team}], "routes": routes}


def _severities(spec: JobSpec, team: str, routing: Routing) -> list[str]:
    """The severities the team gets from this job, or has a receiver for: no empty receiver
    for a severity no alert has (an infra team gets only tickets from a self-healing job)."""
    sent = {level for team_name, level in emitted(spec) if team_name == team}
    return [s for s in SEVERITIES if s in sent or getattr(routing, s) is not None]


def alertmanager_config_object(spec: JobSpec, metadata: dict) -> dict:
    teams = [
        (prefix, team, routing, field, _severities(spec, team, routing))
        for prefix, team, routing, field in _teams(spec)
    ]
    routes = [_team_route(prefix, team, sevs) for prefix, team, _, _, sevs in teams]
    receivers = [
        _receiver(f"{prefix}{sev}", getattr(routing, sev), f"{field}.{sev}.secret")
        for prefix, _, routing, field, sevs in teams
        for sev in sevs
    ]
    inhibit = [
        {
            "sourceMatch": [matcher(m) for m in rule["source_matchers"]],
            "targetMatch": [matcher(m) for m in rule["target_matchers"]],
            **({"equal": list(rule["equal"])} if rule.get("equal") else {}),
        }
        for _, rule in INHIBIT_RULES
    ]
    return {
        "apiVersion": "monitoring.coreos.com/v1alpha1",
        "kind": "AlertmanagerConfig",
        "metadata": metadata,
        "spec": {
            "route": {
                # No team or severity: the job team's tickets, not a receiver of nobody.
                "receiver": "ticket",
                "groupBy": ["training_job", "alertname"],
                **_timing("default"),
                "matchers": [{"name": "training_job", "matchType": "=", "value": spec.name}],
                "routes": routes,
            },
            "receivers": receivers,
            "inhibitRules": inhibit,
        },
    }


def secret_reference_problems(spec: JobSpec) -> list[str]:
    """'field: problem' for receivers a Kubernetes spec cannot reference (a file, no Secret)."""
    if spec.deploy.kubernetes is None:
        return []
    found = []
    own = {team: (routing, field) for _, team, routing, field in _teams(spec)}
    for (team, severity), example in sorted(emitted(spec).items()):
        routing, field = own[team]
        if getattr(routing, severity) is None and severity not in routing.notify_nobody:
            found.append(
                f"{field}.{severity}: team {team!r} gets {severity}s (e.g. {example}) and this "
                "job's AlertmanagerConfig carries only its own receivers; set "
                f"{field}.{severity} with a Secret reference, or add {severity} to "
                f"{field}.notify_nobody to send them to no one on purpose"
            )
    for _, _, routing, field in _teams(spec):
        for severity in SEVERITIES:
            receiver = getattr(routing, severity)
            if receiver is not None and receiver.secret is not None:
                try:
                    _secret(receiver.secret, f"{field}.{severity}.secret")
                except ValueError as exc:
                    found.append(str(exc))
    return found
