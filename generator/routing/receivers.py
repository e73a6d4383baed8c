"""Alertmanager receivers: one integration (Slack, PagerDuty, e-mail, webhook) per configured
receiver, and the notification text they share.

`receiver_config` is one receiver of the plain Alertmanager config (routing/alertmanager.py
puts them in the routing tree; routing/meta.py adds the monitoring team's). `NOTIFICATION_TEXT`
is what every notification says; the operator's AlertmanagerConfig (routing/kubernetes.py)
renders the same text with its own keys.
"""

from __future__ import annotations

from dataclasses import dataclass

from trainsignals.generator.spec.receivers import Receiver

# Alertmanager templates shared by the chat and pager integrations. A group holds one alert or
# many (64 nodes of one file system, two lost GPUs): annotations that differ per alert (the
# summary names node and GPU) are not in .CommonAnnotations, so a template of those alone is
# empty for a group, and PagerDuty answers 400 to an empty summary, which Alertmanager does not
# retry. Each template starts with what is always there (status, count, alert name) and
# bounds what grows with the group.
_STATUS = (
    '[{{ .Status | toUpper }}{{ if eq .Status "firing" }}:{{ .Alerts.Firing | len }}{{ end }}]'
)
_GROUP = "{{ .GroupLabels.alertname }}{{ with .GroupLabels.training_job }} on {{ . }}{{ end }}"
# One summary, the group's common one or the first alert's, with how many there are in all.
_ONE_SUMMARY = (
    "{{ with .CommonAnnotations.summary }}{{ . }}{{ else }}"
    "{{ (index .Alerts 0).Annotations.summary }} (1 of {{ len .Alerts }}){{ end }}"
)
SLACK_SHOWN = 5  # alerts written out in a chat message; the rest are counted


@dataclass(frozen=True)
class NotificationText:
    """Alertmanager templates of one notification, per integration."""

    slack_title: str
    slack_text: str
    # PagerDuty's `summary` (Alertmanager's `description`): required, at most 1024 characters.
    pagerduty_description: str
    # Events v2 takes critical, error, warning or info; our labels say page or ticket.
    pagerduty_severity: str
    links: tuple[tuple[str, str], ...]  # (href, text) under a PagerDuty incident


NOTIFICATION_TEXT = NotificationText(
    slack_title=f"{_STATUS} {_GROUP}",
    slack_text=(
        "{{ range $i, $a := .Alerts }}{{ if lt $i " + str(SLACK_SHOWN) + " }}"
        "*{{ $a.Annotations.summary }}*\n{{ $a.Annotations.description }}\n{{ end }}{{ end }}"
        "{{ if gt (len .Alerts) " + str(SLACK_SHOWN) + " }}"
        "... {{ len .Alerts }} alerts in all: see the dashboard\n{{ end }}"
        "Runbook: {{ (index .Alerts 0).Annotations.runbook_url }}\n"
        "Dashboard: {{ (index .Alerts 0).Annotations.dashboard_url }}"
    ),
    pagerduty_description=f"{_STATUS} {_GROUP}: {_ONE_SUMMARY}",
    pagerduty_severity=(
        '{{ if eq .CommonLabels.severity "page" }}critical{{ else }}warning{{ end }}'
    ),
    links=(
        ("{{ (index .Alerts 0).Annotations.runbook_url }}", "Runbook"),
        ("{{ (index .Alerts 0).Annotations.dashboard_url }}", "Dashboard"),
    ),
)

# Placeholder SMTP settings: Alertmanager refuses an email receiver without a smarthost and a
# sender, so a config with email receivers gets these unless `global_config` names real ones.


def receiver_config(name: str, receiver: Receiver) -> dict:
    """One receiver; credentials are read by Alertmanager from files (`*_file`), never inlined."""
    if receiver.kind == "webhook":
        webhook: dict = {"url": receiver.target, "send_resolved": True}
        if receiver.secret is not None:
            # Alertmanager 0.25 has no `url_file` on webhooks: the URL stays plain (it was
            # checked to hold no credential) and the token is a bearer token from a file.
            webhook["http_config"] = {
                "authorization": {"type": "Bearer", "credentials_file": receiver.secret.path}
            }
        return {"name": name, "webhook_configs": [webhook]}
    if receiver.kind == "slack":
        return {
            "name": name,
            "slack_configs": [
                {
                    "api_url_file": receiver.secret.path,
                    "send_resolved": True,
                    "title": NOTIFICATION_TEXT.slack_title,
                    "text": NOTIFICATION_TEXT.slack_text,
                }
            ],
        }
    if receiver.kind == "pagerduty":
        return {
            "name": name,
            "pagerduty_configs": [
                {
                    "routing_key_file": receiver.secret.path,
                    "send_resolved": True,
                    "description": NOTIFICATION_TEXT.pagerduty_description,
                    "severity": NOTIFICATION_TEXT.pagerduty_severity,
                    "links": [
                        {"href": href, "text": text} for href, text in NOTIFICATION_TEXT.links
                    ],
                }
            ],
        }
    # email: the SMTP relay is global configuration (global.smtp_smarthost / smtp_from).
    return {"name": name, "email_configs": [{"to": receiver.target, "send_resolved": True}]}
