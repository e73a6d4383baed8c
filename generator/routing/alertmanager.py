"""Alertmanager configuration from the specs: one route per team, split by severity, plus the
inhibition rules that make one fault page once.

The YAML is written piece by piece (each piece dumped deterministically) so that the routing
and every inhibit rule can carry a comment explaining why it exists.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from trainsignals.generator.alerts.catalog import ALERTS
from trainsignals.generator.output.yaml import dump
from trainsignals.generator.spec.job import JobSpec
from trainsignals.generator.spec.receivers import Receiver, Routing

if TYPE_CHECKING:  # generator/monitoring.py imports the loader, which imports this module
    from trainsignals.generator.spec.monitoring import MonitoringSettings

SEVERITIES = ("page", "ticket")

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
_SLACK_TITLE = f"{_STATUS} {_GROUP}"
_SLACK_TEXT = (
    "{{ range $i, $a := .Alerts }}{{ if lt $i " + str(SLACK_SHOWN) + " }}"
    "*{{ $a.Annotations.summary }}*\n{{ $a.Annotations.description }}\n{{ end }}{{ end }}"
    "{{ if gt (len .Alerts) " + str(SLACK_SHOWN) + " }}"
    "... {{ len .Alerts }} alerts in all: see the dashboard\n{{ end }}"
    "Runbook: {{ (index .Alerts 0).Annotations.runbook_url }}\n"
    "Dashboard: {{ (index .Alerts 0).Annotations.dashboard_url }}"
)
# PagerDuty's `summary` (Alertmanager's `description`): required, at most 1024 characters.
_PAGERDUTY_DESCRIPTION = f"{_STATUS} {_GROUP}: {_ONE_SUMMARY}"
# Events v2 takes critical, error, warning or info; our labels say page or ticket.
_PAGERDUTY_SEVERITY = '{{ if eq .CommonLabels.severity "page" }}critical{{ else }}warning{{ end }}'
_LINKS = (
    ("{{ (index .Alerts 0).Annotations.runbook_url }}", "Runbook"),
    ("{{ (index .Alerts 0).Annotations.dashboard_url }}", "Dashboard"),
)

# Placeholder SMTP settings: Alertmanager refuses an email receiver without a smarthost and a
# sender, so a config with email receivers gets these unless `global_config` names real ones.
_SMTP_PLACEHOLDER = {"smtp_smarthost": "localhost:25", "smtp_from": "alertmanager@localhost"}

# Per-GPU and per-node alerts a dead node explains (its exporter and ranks vanish with it).
NODE_SCOPED = tuple(a.name for a in ALERTS if a.node_scoped)
# Job-wide symptoms of ranks that stopped making progress; the stall first, it explains the rest.
PROGRESS_SYMPTOMS = tuple(a.name for a in ALERTS if a.progress_symptom)
SLOWDOWN_SYMPTOMS = tuple(name for name in PROGRESS_SYMPTOMS if name != "TrainingStalled")
# What a job that makes no progress (or keeps crashing) also shows: one incident, one page.
INCIDENT_CONSEQUENCES = tuple(a.name for a in ALERTS if a.incident_consequence)


def _alternation(names: tuple[str, ...] | list[str]) -> str:
    return f'alertname=~"{"|".join(names)}"'


# (comment, rule). Alertmanager lets an inhibited source still inhibit, so chains
# (NodeDown -> TrainingTargetsDown -> TrainingStalled) hold even when the middle is muted.
# Written as the page case; `_page_only` adds severity="page" to each source and a twin for a
# ticket source that mutes only tickets (a ticket must never mute a page).
_CAUSE_RULES: tuple[tuple[str, dict], ...] = (
    (
        "A node that is down explains every per-GPU and per-node alert of that node: its "
        "exporter and disk metrics vanish or go stale with it. Page for the node only.",
        {
            "source_matchers": ['alertname="NodeDown"'],
            "target_matchers": [_alternation(NODE_SCOPED)],
            "equal": ["training_job", "node"],
        },
    ),
    (
        "A node that is down takes its ranks with it: the job-wide crash and progress "
        "symptoms are consequences, not separate faults.",
        {
            "source_matchers": ['alertname="NodeDown"'],
            "target_matchers": [_alternation(("TrainingTargetsDown", *PROGRESS_SYMPTOMS))],
            "equal": ["training_job"],
        },
    ),
    (
        "A lost GPU or a critical XID crashes (or hangs) the rank on that GPU, and with it "
        "every collective of the job: the missing rank, the stall and the slowdown are the "
        "same fault, which already paged once.",
        {
            "source_matchers": ['alertname=~"GpuLost|GpuXidCritical"'],
            "target_matchers": [_alternation(("TrainingTargetsDown", *PROGRESS_SYMPTOMS))],
            "equal": ["training_job"],
        },
    ),
    (
        "A lost GPU cannot answer NVML queries: the exporter's NVML errors for that GPU are "
        "the symptom, not a second problem.",
        {
            "source_matchers": ['alertname="GpuLost"'],
            "target_matchers": ['alertname="GpuExporterNvmlErrors"'],
            "equal": ["training_job", "node", "gpu"],
        },
    ),
    (
        "A crashed rank (targets down) stops every step: stall, throughput, step time, MFU "
        "and data-wait alerts follow from it.",
        {
            "source_matchers": ['alertname="TrainingTargetsDown"'],
            "target_matchers": [_alternation(PROGRESS_SYMPTOMS)],
            "equal": ["training_job"],
        },
    ),
    (
        "A stalled job (no steps while processes are up) has zero throughput and MFU and "
        "unbounded step time; a hung data loader is one of the stall's causes and its "
        "runbook covers it: report the stall only.",
        {
            "source_matchers": ['alertname="TrainingStalled"'],
            "target_matchers": [_alternation(SLOWDOWN_SYMPTOMS)],
            "equal": ["training_job"],
        },
    ),
    (
        "Self-healing jobs (recovery: auto_restart): a crash loop is the diagnosis of an "
        "incident whose restarts keep failing; when the restarts finally stop, the lack of "
        "progress that follows is the same incident, which already paged.",
        {
            "source_matchers": ['alertname="TrainingCrashLooping"', 'severity="page"'],
            "target_matchers": ['alertname="TrainingNoProgress"'],
            "equal": ["training_job"],
        },
    ),
    (
        "A job restarted onto a bad node is the diagnosis; the crash loop and the lack of "
        "progress it leads to are the same incident, which already paged.",
        {
            "source_matchers": ['alertname="TrainingRestartsOnBadNode"', 'severity="page"'],
            "target_matchers": ['alertname=~"TrainingCrashLooping|TrainingNoProgress"'],
            "equal": ["training_job"],
        },
    ),
    (
        "No progress (or a crash loop) beyond the restart budget is the page for the incident; "
        "the stall, the missing ranks, the slowdown, the aging checkpoint and the goodput "
        "burn it causes are the same incident.",
        {
            "source_matchers": [
                'alertname=~"TrainingNoProgress|TrainingCrashLooping|TrainingRestartsOnBadNode"',
                'severity="page"',
            ],
            "target_matchers": [_alternation(INCIDENT_CONSEQUENCES)],
            "equal": ["training_job"],
        },
    ),
    (
        "If one alert exists both as page and as ticket for a job, the page covers the ticket.",
        {
            "source_matchers": ['severity="page"'],
            "target_matchers": ['severity="ticket"'],
            "equal": ["alertname", "training_job"],
        },
    ),
    (
        "A port that is down also counts a link-down: the flap ticket for that port is the "
        "same fault.",
        {
            "source_matchers": ['alertname="InfinibandPortDown"'],
            "target_matchers": ['alertname="InfinibandPortFlapping"'],
            "equal": ["training_job", "node", "device", "port"],
        },
    ),
)

_PAGE = 'severity="page"'
_TICKET = 'severity="ticket"'


def _page_only(rules: tuple[tuple[str, dict], ...]) -> tuple[tuple[str, dict], ...]:
    """Only a page may inhibit a page: each source gets severity="page"; a source that can also
    be a ticket (recovery: auto_restart makes causes infra tickets) gets a twin that mutes
    tickets only. A ticket muting the owning team's page hid real pages for hours."""
    out: list[tuple[str, dict]] = []
    for comment, rule in rules:
        sources = list(rule["source_matchers"])
        if any(m.startswith("severity=") for m in sources):
            out.append((comment, rule))
            continue
        out.append((comment, {**rule, "source_matchers": [*sources, _PAGE]}))
        targets = list(rule["target_matchers"])
        if _PAGE not in targets:
            twin = {
                **rule,
                "source_matchers": [*sources, _TICKET],
                "target_matchers": [*targets, _TICKET] if _TICKET not in targets else targets,
            }
            out.append(("The same cause as a ticket mutes only tickets: never a page.", twin))
    return tuple(out)


INHIBIT_RULES = _page_only(_CAUSE_RULES)


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


def _receiver_config(name: str, receiver: Receiver) -> dict:
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
                    "title": _SLACK_TITLE,
                    "text": _SLACK_TEXT,
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
                    "description": _PAGERDUTY_DESCRIPTION,
                    "severity": _PAGERDUTY_SEVERITY,
                    "links": [{"href": href, "text": text} for href, text in _LINKS],
                }
            ],
        }
    # email: the SMTP relay is global configuration (global.smtp_smarthost / smtp_from).
    return {"name": name, "email_configs": [{"to": receiver.target, "send_resolved": True}]}


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
    Raises RoutingError (generator/routing_check.py) when a severity some alert can have has no
    receiver and no explicit `notify_nobody`, ValueError when a team's specs disagree on one.
    `local_webhook_base` (test and demo stacks only) replaces every receiver, whatever the specs
    name, by a webhook to `<base>/<team>/<severity>` that the stack listens on and prints.
    `monitoring` adds the meta-monitoring routes and receivers first (generator/meta_routing.py)
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
            if receiver is None:  # notify_nobody, or no alert of the team has this severity
                receivers.append({"name": name})
                if (team, severity) in nobody:
                    unrouted.append(name)
            else:
                uses_email = uses_email or receiver.kind == "email"
                receivers.append(_receiver_config(name, receiver))
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
            _receiver_config(
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
            "Alerts are grouped per training job and alert name. Each team's alerts go to "
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
