"""No route to nowhere: every severity a team's alerts can have reaches a real integration.

A page routed to a receiver without integration, or to a placeholder webhook on this host, is
worse than no monitoring: everyone believes they are covered. So generation fails, naming the
spec (or monitoring-settings) field and the fix, unless the user opted in explicitly with
`routing.notify_nobody`. The teams and severities come from the same functions that label the
generated rules (generator/alerts/rules.py), the meta rules and the on-call ticket.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from trainsignals.generator.alerts.catalog import ALERTS
from trainsignals.generator.alerts.rules import severity, team
from trainsignals.generator.signals.promql import RuleContext
from trainsignals.generator.spec.job import JobSpec
from trainsignals.generator.spec.pipeline_alerts import META_SEVERITIES, ONCALL_ALERT
from trainsignals.generator.spec.receivers import Routing

if TYPE_CHECKING:  # monitoring.py imports the loader, which imports alertmanager.py
    from trainsignals.generator.spec.monitoring import MonitoringSettings

SEVERITIES = ("page", "ticket")
_EXAMPLE = {
    "page": "{kind: pagerduty, secret: {file: /etc/alertmanager/secrets/<team>-pagerduty}}",
    "ticket": "{kind: slack, secret: {file: /etc/alertmanager/secrets/<team>-slack}}",
}


class RoutingError(ValueError):
    """Alerts that would reach nobody; `problems` holds one line each (field and fix)."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__("\n".join(problems))
        self.problems = problems


def emitted(spec: JobSpec) -> dict[tuple[str, str], str]:
    """{(team, severity): an alert name with it} for the alerts this spec's rules can emit,
    plus the on-call ticket (OncallPageLoadHigh) every paged team can get."""
    ctx = RuleContext(spec)
    found: dict[tuple[str, str], str] = {}
    for definition in ALERTS:
        level = severity(ctx, definition.name)
        if level in SEVERITIES:
            found.setdefault((team(ctx, definition.name), level), definition.name)
    for paged_team, level in list(found):
        if level == "page":
            found.setdefault((paged_team, "ticket"), ONCALL_ALERT)
    return found


def _routings(spec: JobSpec) -> dict[str, tuple[Routing, str]]:
    """{team: (its routing in this spec, the field it is written in)}."""
    found = {spec.team: (spec.routing, "routing")}
    if spec.recovery.infra_team not in (None, spec.team):
        found[spec.infra_team] = (spec.recovery.infra_routing, "recovery.infra_routing")
    return found


def _fix(field: str, level: str) -> str:
    return (
        f"set {field}.{level} (e.g. `{level}: {_EXAMPLE[level]}`), or add {level} to "
        f"{field}.notify_nobody to send them to no one on purpose"
    )


def routing_problems(
    specs: Iterable[tuple[JobSpec, str]], settings: MonitoringSettings | None = None
) -> list[str]:
    """One line per (team, severity) some alert can have that no receiver and no explicit
    `notify_nobody` covers; `specs` are (spec, source file) pairs."""
    pairs = list(specs)
    covered: set[tuple[str, str]] = set()
    for spec, _ in pairs:
        for team_name, (routing, _field) in _routings(spec).items():
            for level in SEVERITIES:
                if getattr(routing, level) is not None or level in routing.notify_nobody:
                    covered.add((team_name, level))
    problems: list[str] = []
    reported: set[tuple[str, str]] = set()
    for spec, source in pairs:
        routings = _routings(spec)
        for (team_name, level), example in sorted(emitted(spec).items()):
            if (team_name, level) in covered or (team_name, level) in reported:
                continue
            reported.add((team_name, level))
            field = routings.get(team_name, (None, "routing"))[1]
            problems.append(
                f"{source}: {field}.{level}: team {team_name!r} gets {level}s (e.g. {example}) "
                f"but no receiver, so they would reach no one; {_fix(field, level)}"
            )
    if settings is not None:
        problems += monitoring_problems(settings)
    return problems


def monitoring_problems(
    settings: MonitoringSettings, source: str = "monitoring settings"
) -> list[str]:
    """The meta-monitoring receivers: the pipeline's own alerts must reach its owners."""
    # Each meta alert at its severity (the settings' override, else its declared default); the
    # on-call and shard tickets always.
    levels = {settings.alerts.get(n, s) for n, s in META_SEVERITIES.items()} | {"ticket"}
    problems = []
    for level in SEVERITIES:
        routing = settings.routing
        if (
            level in levels
            and getattr(routing, level) is None
            and level not in routing.notify_nobody
        ):
            problems.append(
                f"{source}: routing.{level}: the monitoring team {settings.team!r} gets "
                f"{level}s (pipeline alerts, {ONCALL_ALERT}) but no receiver; "
                f"{_fix('routing', level)} (pass the file with --monitoring)"
            )
    return problems


def delivery_warnings(
    specs: Iterable[tuple[JobSpec, str]], settings: MonitoringSettings
) -> list[str]:
    """The monitoring team's only integration is one that carries pages: when it fails,
    AlertmanagerNotificationsFailing would have to travel through it (routing/meta.py sends
    it around the failing integration where the team has another), and only the heartbeat
    stopping tells anyone. A warning, not an error: the dead man's switch still pages."""
    from trainsignals.generator.meta.notify import PAGES_FAILING, integrations

    page_kinds, _ = integrations(settings, [spec for spec, _ in specs])
    own = {r.kind for r in (settings.routing.page, settings.routing.ticket) if r is not None}
    if len(own) != 1 or not own <= set(page_kinds):
        return []
    (kind,) = own
    other = "slack" if kind != "slack" else "email"
    return [
        f"monitoring settings: routing: every receiver of the monitoring team uses {kind}, "
        f"which carries pages: when {kind} fails, {PAGES_FAILING} can only travel through "
        f"{kind} itself and just the dead man's switch (the heartbeat stops) tells anyone; "
        f"give routing.ticket another integration (e.g. `ticket: {{kind: {other}, ...}}`)"
    ]
