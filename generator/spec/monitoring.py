"""Who owns the monitoring pipeline itself, and where its heartbeat goes: global settings.

The meta-monitoring alerts (generator/meta/rules.py) are not about any training job: they say that
Prometheus or Alertmanager cannot do their work. Whoever runs that pipeline must act, whatever
job is affected, so their owner, receivers and heartbeat are one global setting instead of a
field repeated in every job spec (where specs could disagree).

The defaults below are the repository's committed settings (the generated files must match
them: `trainsignals check`). A deployment overrides them with `--monitoring FILE`, a YAML file
with the same fields; unknown keys are errors, as in job specs.

No secret is written: the dead man's switch is a URL that is not itself the credential and,
when the service wants a token, a secret reference (a file Alertmanager reads at run time,
`http_config.authorization.credentials_file`), as for every receiver (generator/spec/secrets.py).
"""

from __future__ import annotations

from pathlib import Path

import yaml
from pydantic import Field, ValidationError, field_validator

from trainsignals.generator.spec.errors import SpecError, problem_lines
from trainsignals.generator.spec.job import Duration, Severity, StrictModel
from trainsignals.generator.spec.pipeline_alerts import (
    HEARTBEAT,
    META_ALERT_NAMES,
    NODE_INCIDENTS_ALERT,
)
from trainsignals.generator.spec.receivers import Receiver, Routing
from trainsignals.generator.spec.secrets import HOW_TO_REFERENCE, SecretRef, looks_secret

# Kokolis et al. 2024 (Meta RSC): removing the nodes that failed again and again cut the failure
# rate of large jobs from 14% to 4%; three incidents in 30 days is far above a healthy node's.
DEFAULT_LEMON_NODE_INCIDENTS = 3
# Non-fatal hardware tickets of a node that weigh as much as one incident (generator/nodes/).
DEFAULT_LEMON_TICKETS_PER_INCIDENT = 3


class Heartbeat(StrictModel):
    """The always-firing Watchdog alert, sent to an external dead man's switch.

    The switch (healthchecks-style ping service, PagerDuty's heartbeat, cronitor...) pages
    when the pings stop: that covers what no alert from inside can, a dead Prometheus,
    Alertmanager or monitoring host. Alertmanager 0.25 has no `url_file` on webhooks, so the
    URL must not be the credential; a token goes in `secret` (a bearer token Alertmanager reads
    from a file, generator/spec/secrets.py).
    """

    url: str = "https://deadmansswitch.example.com/ping/trainsignals"
    secret: SecretRef | None = SecretRef(name="deadmansswitch", key="token")
    # How often Alertmanager repeats the ping; the switch's timeout should be 2-3 times this.
    interval: Duration = 60

    @field_validator("url")
    @classmethod
    def _plain_http_url(cls, value: str) -> str:
        if not value.startswith(("http://", "https://")):
            raise ValueError("the heartbeat url must start with http:// or https://")
        what = looks_secret(value)
        if what:
            raise ValueError(
                f"the heartbeat url looks like {what}: it would be written in plain text; use "
                f"a URL that is not the credential and {HOW_TO_REFERENCE}"
            )
        return value

    def receiver(self) -> Receiver:
        return Receiver(kind="webhook", target=self.url, secret=self.secret)


class MonitoringSettings(StrictModel):
    team: str = "monitoring"
    owners: tuple[str, ...] = ("sre@example.com",)
    rotation: str | None = "monitoring-oncall"
    # Scrape job names under which Prometheus scrapes itself and its Alertmanagers.
    prometheus_job: str = "prometheus"
    alertmanager_job: str = "alertmanager"
    # Alertmanagers in the HA cluster; fewer healthy ones is a ticket (delivery still works).
    alertmanager_replicas: int = Field(default=2, ge=1)
    # Where the runbook and dashboard links point (the Prometheus and Alertmanager UIs).
    prometheus_url: str = "http://prometheus.example.com:9090"
    alertmanager_url: str = "http://alertmanager.example.com:9093"
    runbook_base_url: str = "https://github.com/example/trainsignals/blob/main/runbooks"
    heartbeat: Heartbeat = Heartbeat()
    # The pipeline's own pages and tickets (and the unrouted alerts' fallback). Required:
    # generation fails without them unless routing.notify_nobody lists the severity.
    routing: Routing = Routing()
    # Severity per meta alert name (page, ticket or off); Watchdog cannot be changed.
    alerts: dict[str, Severity] = Field(default_factory=dict)
    # A lemon node: this many hardware incidents in 30 days, across jobs (generator/nodes/).
    lemon_node_incidents: int = Field(
        default=DEFAULT_LEMON_NODE_INCIDENTS,
        ge=2,
        le=1000,
        description=(
            "Hardware incidents of one node in 30 days, over every job and spare, at which "
            f"{NODE_INCIDENTS_ALERT} tickets the infra team (default "
            f"{DEFAULT_LEMON_NODE_INCIDENTS}; at least 2: one incident is bad luck, not a "
            "lemon). Tickets count too, `lemon_tickets_per_incident` of them as one incident. "
            "The 'nodes by incident count' panel draws its threshold from it."
        ),
    )
    # Non-fatal evidence: tickets that weigh as much as one incident toward the lemon threshold.
    lemon_tickets_per_incident: int = Field(
        default=DEFAULT_LEMON_TICKETS_PER_INCIDENT,
        ge=1,
        le=1000,
        description=(
            "Non-fatal hardware tickets of one node (a non-fatal XID, row remaps pending, "
            "throttling, a flapping port, a fail-slow: the infra tickets about one node that are "
            "no hardware fault) that weigh as much as one incident toward "
            f"`lemon_node_incidents` (default {DEFAULT_LEMON_TICKETS_PER_INCIDENT}: with the "
            "default threshold, 1 incident and 6 tickets, or 9 tickets, in 30 days flag a lemon "
            "before its second job-killing incident; a healthy node's one or two tickets do not)."
        ),
    )

    @field_validator("alerts")
    @classmethod
    def _known(cls, value: dict[str, str]) -> dict[str, str]:
        for name in value:
            if name == HEARTBEAT:
                raise ValueError(
                    f"{HEARTBEAT} is the heartbeat and always fires; set heartbeat.url instead"
                )
            if name not in META_ALERT_NAMES:
                raise ValueError(
                    f"unknown meta alert {name!r}; use one of {', '.join(META_ALERT_NAMES[1:])}"
                )
        return value


# The repository's committed settings: example Secrets and an example heartbeat URL.
# `trainsignals validate` / `generate` say so whenever they are used (spec/placeholders.py).
DEFAULT_SETTINGS = MonitoringSettings(
    routing=Routing(
        page=Receiver(
            kind="pagerduty", secret=SecretRef(name="monitoring-pagerduty", key="routing-key")
        ),
        ticket=Receiver(kind="slack", secret=SecretRef(name="monitoring-slack", key="webhook-url")),
    )
)


def load_monitoring(path: Path) -> MonitoringSettings:
    """Validate a monitoring settings file; SpecError names file, field and the fix."""
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise SpecError([f"{path}: cannot read ({exc.strerror}); check the path"]) from None
    except yaml.YAMLError as exc:
        raise SpecError([f"{path}: not valid YAML ({exc}); fix the syntax"]) from None
    if not isinstance(data, dict):
        raise SpecError([f"{path}: (top level): write a mapping, e.g. `team: monitoring`"])
    try:
        return MonitoringSettings.model_validate(data)
    except ValidationError as exc:
        raise SpecError(problem_lines(path, exc, MonitoringSettings)) from None
