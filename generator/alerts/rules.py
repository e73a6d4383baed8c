"""Alerting rules of one spec, rendered for Prometheus: severity and team per recovery mode.

Each alert is defined once in generator/alerts/definitions/ (meaning, severities, owner, PromQL,
test fault); this module turns the definitions into the spec's rules.
"""

from __future__ import annotations

from trainsignals.generator.alerts.catalog import ALERTS, BY_NAME
from trainsignals.generator.alerts.model import AlertRule, firing_expr
from trainsignals.generator.signals.panels import PANEL_IDS, dashboard_uid
from trainsignals.generator.signals.promql import RuleContext
from trainsignals.generator.signals.recording import HARDWARE_FAULT_LABEL

__all__ = ["AlertRule", "alert_rules", "firing_expr", "render_alert", "severity", "team"]


def alert_rules(ctx: RuleContext) -> list[AlertRule]:
    """Every alert the spec enables, in definition order."""
    rules = []
    for definition in ALERTS:
        if severity(ctx, definition.name) == "off":
            continue
        rule = definition.rule(ctx, rules)
        if rule is not None:
            rules.append(rule)
    return rules


def severity(ctx: RuleContext, name: str) -> str:
    """The spec's choice, else the catalogue's default for the job's recovery mode."""
    return ctx.spec.alerts.get(name, BY_NAME[name].severity_for(ctx.spec.recovery.mode))


def team(ctx: RuleContext, name: str) -> str:
    """Hardware tickets go to whoever repairs hardware; pages to whoever must act now."""
    if BY_NAME[name].owner == "infra" and severity(ctx, name) == "ticket":
        return ctx.spec.infra_team
    return ctx.spec.team


def static_labels(ctx: RuleContext, name: str) -> dict[str, str]:
    """The labels the rule gives every instance of alert `name` (the generated tests expect
    exactly these, with the ones its expression keeps)."""
    labels = {
        "job": ctx.spec.name,
        "severity": severity(ctx, name),
        "team": team(ctx, name),
        "training_job": ctx.spec.name,
    }
    if BY_NAME[name].hardware_fault:  # what node:trainsignals_hardware_fault:bool selects on
        labels[HARDWARE_FAULT_LABEL[0]] = HARDWARE_FAULT_LABEL[1]
    return labels


def render_alert(ctx: RuleContext, alert: AlertRule) -> dict:
    spec = ctx.spec
    uid = dashboard_uid(spec.name)
    rule: dict = {"alert": alert.name, "expr": firing_expr(ctx, alert)}
    if alert.for_seconds:
        rule["for"] = ctx.for_duration(alert.for_seconds)
    rule["labels"] = static_labels(ctx, alert.name)
    rule["annotations"] = {
        "dashboard_url": f"{spec.links.grafana_base_url}/d/{uid}/{spec.name}"
        f"?viewPanel={PANEL_IDS[alert.panel]}",
        "description": alert.description,
        "runbook_url": f"{spec.links.runbook_base_url}/{alert.name}.md",
        "summary": alert.summary,
        **dict(alert.annotations),
    }
    return rule
