"""Alertmanager configuration from the specs: one route per team, split by severity, plus the
inhibition rules that make one fault page once.

The YAML is written piece by piece (each piece dumped deterministically) so that the routing
and every inhibit rule can carry a comment explaining why it exists.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from trainsignals import __version__
from trainsignals.generator.artifacts.kind import ArtifactKind, Run
from trainsignals.generator.output.files import GENERATED_MARK
from trainsignals.generator.output.yaml import dump
from trainsignals.generator.routing.inhibit import INHIBIT_RULES
from trainsignals.generator.routing.receivers import receiver_config
from trainsignals.generator.signals.recording import HARDWARE_FAULT_LABEL
from trainsignals.generator.spec.job import JobSpec
from trainsignals.generator.spec.receivers import Receiver, Routing

if TYPE_CHECKING:  # only in annotations
    from trainsignals.generator.spec.monitoring import MonitoringSettings

PATH = "alerts/alertmanager.yaml"

SEVERITIES = ("page", "ticket")
# A hardware fault's pages are grouped by the part that failed, not by alert name.
HARDWARE_FAULT_MATCHER = f'{HARDWARE_FAULT_LABEL[0]}="{HARDWARE_FAULT_LABEL[1]}"'
HARDWARE_GROUP_BY = ("training_job", "node", "gpu")

# Pages notify fast and repeat while unresolved; tickets wait and batch.
DEFAULT_TIMING: dict[str, dict[str, str]] = {
    "default": {"group_wait": "30s", "group_interval": "5m", "repeat_interval": "4h"},
    "page": {"group_wait": "30s", "group_interval": "5m", "repeat_interval": "4h"},
    # A cause that an automatic restart heals within minutes must still reach its ticket, and
    # Alertmanager never notifies a group whose alerts all resolved before its first flush
    # (the fleet replay lost every such GpuLost/XID/NodeDown ticket with 5m): wait 30s, batch
    # the rest with group_interval.
    "ticket": {"group_wait": "30s", "group_interval": "30m", "repeat_interval": "24h"},
}

_SMTP_PLACEHOLDER = {"smtp_smarthost": "localhost:25", "smtp_from": "alertmanager@localhost"}


def _team_routings(specs: list[JobSpec]) -> list[tuple[JobSpec, str, Routing]]:
    """(spec, team, routing) for each job's team and, where set, its infra team."""
    pairs = []
    for spec in sorted(specs, key=lambda s: s.name):
        pairs.append((spec, spec.team, spec.routing))
        if spec.recovery.infra_team not in (None, spec.team):
            pairs.append((spec, spec.infra_team, spec.recovery.infra_routing))
    return pairs


def team_receivers(specs: list[JobSpec]) -> dict[str, dict[str, Receiver | None]]:
    """{team: {severity: receiver or None}}, checking that a team's specs agree.

    A spec that leaves a severity unset does not conflict: routing is by the `team` label, so it
    shares whatever receiver its team's other specs name.
    """
    chosen: dict[str, dict[str, tuple[Receiver, str] | None]] = {}
    for spec, team_name, routing in _team_routings(specs):
        team = chosen.setdefault(team_name, dict.fromkeys(SEVERITIES))
        for severity in SEVERITIES:
            receiver = getattr(routing, severity)
            if receiver is None:
                continue
            seen = team[severity]
            if seen is None:
                team[severity] = (receiver, spec.name)
            elif seen[0] != receiver:
                raise ValueError(
                    f"specs {seen[1]!r} and {spec.name!r} of team {team_name!r} disagree on "
                    f"routing.{severity} ({seen[0].describe} vs {receiver.describe}); "
                    "give them the same receiver"
                )
    return {
        team: {sev: (value[0] if value else None) for sev, value in by_severity.items()}
        for team, by_severity in sorted(chosen.items())
    }


def _timing(timing: dict[str, dict[str, str]] | None, key: str) -> dict[str, str]:
    return {**DEFAULT_TIMING[key], **((timing or {}).get(key) or {})}


def _comment(text: str, indent: str = "") -> str:
    """Wrap `text` as YAML comment lines of at most ~96 characters."""
    lines, line = [], ""
    for word in text.split():
        if line and len(indent) + len(line) + len(word) + 3 > 96:
            lines.append(line)
            line = word
        else:
            line = f"{line} {word}".strip()
    lines.append(line)
    return "".join(f"{indent}# {item}\n" for item in lines)


def alertmanager_config(
    specs: list[JobSpec],
    header: str,
    *,
    local_webhook_base: str | None = None,
    timing: dict[str, dict[str, str]] | None = None,
    global_config: dict[str, str] | None = None,
    monitoring: MonitoringSettings | None = None,
) -> str:
    """The Alertmanager config (YAML text) routing every spec's alerts by team and severity.

    `timing` overrides group_wait / group_interval / repeat_interval per key "default" (root),
    "page" or "ticket", e.g. {"page": {"group_wait": "1s"}} for end-to-end tests.
    Raises RoutingError (generator/routing/check.py) when a severity some alert can have has no
    receiver and no explicit `notify_nobody`, ValueError when a team's specs disagree on one.
    `local_webhook_base` (test and demo stacks only) replaces every receiver, whatever the specs
    name, by a webhook to `<base>/<team>/<severity>` that the stack listens on and prints.
    `monitoring` adds the meta-monitoring routes and receivers first (generator/routing/meta.py)
    and makes its ticket receiver the root's: an alert no route matches reaches the pipeline's
    owners instead of a receiver that notifies nobody.
    """
    from trainsignals.generator.routing.check import RoutingError, routing_problems

    teams = team_receivers(specs)  # first: disagreeing specs are the clearer message
    if local_webhook_base is None:
        problems = routing_problems([(s, f"job {s.name!r}") for s in specs], monitoring)
        if problems:
            raise RoutingError(problems)
    nobody = {
        (team_name, level)
        for spec in specs
        for team_name, routing in (
            (spec.team, spec.routing),
            (spec.infra_team, spec.recovery.infra_routing),
        )
        for level in routing.notify_nobody
    }
    receivers: list[dict] = []
    unrouted: list[str] = []
    uses_email = False
    team_routes: list[dict] = []
    for team, by_severity in teams.items():
        children = []
        for severity in SEVERITIES:
            name = f"{team}-{severity}"
            receiver = by_severity[severity]
            if local_webhook_base is not None:
                receiver = Receiver(
                    kind="webhook", target=f"{local_webhook_base}/{team}/{severity}"
                )
            if receiver is None and (team, severity) not in nobody:
                # No alert of the team has this severity (routing_problems refused the
                # rest): no route, so a stray alert with it falls through to the root, the
                # monitoring team's tickets, instead of a receiver that notifies no one.
                continue
            if receiver is None:  # notify_nobody: the one receiver without integration
                receivers.append({"name": name})
                unrouted.append(name)
            else:
                uses_email = uses_email or receiver.kind == "email"
                receivers.append(receiver_config(name, receiver))
            if severity == "page":
                # One faulty part, one incident: the alerts a GPU or node fault raises
                # (GpuXidCritical{xid="48"} and GpuUncorrectableEccErrors, a minute or more
                # apart) share one group, so PagerDuty opens one incident, whichever fires
                # first (inhibition only helps when the cause is first).
                children.append(
                    {
                        "receiver": name,
                        "matchers": [f'severity="{severity}"', HARDWARE_FAULT_MATCHER],
                        "group_by": list(HARDWARE_GROUP_BY),
                        **_timing(timing, severity),
                    }
                )
            children.append(
                {
                    "receiver": name,
                    "matchers": [f'severity="{severity}"'],
                    **_timing(timing, severity),
                }
            )
        team_routes.append({"matchers": [f'team="{team}"'], "routes": children})

    root = "default"
    route = {
        "receiver": root,
        "group_by": ["training_job", "alertname"],
        **_timing(timing, "default"),
        "routes": team_routes,
    }
    if monitoring is not None:  # meta-monitoring: heartbeat and pipeline alerts, first
        from trainsignals.generator.routing.meta import meta_receivers, meta_routes, receiver_name

        timing_of = {severity: _timing(timing, severity) for severity in SEVERITIES}
        route["routes"] = [*meta_routes(monitoring, timing_of), *team_routes]
        route["receiver"] = root = receiver_name(monitoring, "ticket")
        receivers[0:0] = meta_receivers(monitoring, local_webhook_base)
    elif local_webhook_base is not None:
        receivers.insert(
            0,
            receiver_config(
                root, Receiver(kind="webhook", target=f"{local_webhook_base}/{root}/unrouted")
            ),
        )
    else:
        receivers.insert(0, {"name": root})
    global_section = dict(global_config or {})
    if uses_email and "smtp_smarthost" not in global_section:
        global_section = {**_SMTP_PLACEHOLDER, **global_section}

    parts = [header]
    if global_section:
        if uses_email:
            parts.append(
                _comment(
                    "Email receivers need an SMTP relay: set smtp_smarthost and smtp_from "
                    "(localhost:25 is a placeholder) through `global_config`."
                )
            )
        parts.append(dump({"global": global_section}))
    parts.append(
        _comment(
            "Alerts are grouped per training job and alert name (a hardware fault's pages per "
            "node and GPU: one faulty part, one incident). Each team's alerts go to "
            "<team>-page (fast, repeated every few hours) or <team>-ticket (waits and batches); "
            f"anything no route matches (no team or severity) ends in `{root}`"
            + (
                ", the monitoring team's tickets: a misrouted alert is a pipeline bug."
                if root != "default"
                else ", which notifies nobody (no monitoring settings given)."
            )
        )
    )
    if monitoring is not None:
        from trainsignals.generator.routing.meta import COMMENT

        parts.append(_comment(COMMENT))
    parts.append(dump({"route": route}))
    if local_webhook_base is not None:
        parts.append(
            _comment(
                f"Local stack: every receiver posts to {local_webhook_base}/<team>/<severity>, "
                "whatever the specs name (tests and `make demo` only)."
            )
        )
    elif unrouted:
        parts.append(
            _comment(
                f"{', '.join(unrouted)}: no integration, on purpose (routing.notify_nobody): "
                "those alerts reach no one."
            )
        )
    parts.append(dump({"receivers": receivers}))
    parts.append("inhibit_rules:\n")
    for comment, rule in INHIBIT_RULES:
        parts.append(_comment(comment))
        parts.append(dump([rule]))
    return "".join(parts)


def config_header(sources: str) -> str:
    """The comment the generated Alertmanager configuration starts with."""
    return (
        f"# {GENERATED_MARK} {__version__} from {sources}.\n"
        "# Do not edit: change the specs and run `trainsignals generate`.\n"
    )


class AlertmanagerKind(ArtifactKind):
    """alerts/alertmanager.yaml: every team's routes, the meta routes, the inhibitions."""

    name = "alertmanager"

    def fleet_files(self, run: Run, parts: Sequence[Any]) -> dict[str, str]:
        header = config_header(run.sources)
        return {PATH: alertmanager_config(run.job_specs, header, monitoring=run.settings)}
