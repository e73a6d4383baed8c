"""The meta-monitoring files: rules, promtool tests and one runbook per meta alert.

Runbooks use the runbook machinery's jinja2 environment (generator/runbooks/render.py) with one
shared template, `runbook_meta.md.j2`: the alerts are about the pipeline, not a job, so there is no
per-job section; the text for each alert lives here, next to nothing else.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from trainsignals import __version__
from trainsignals.generator.artifacts.kind import ArtifactKind, Run
from trainsignals.generator.meta.rules import (
    DEFAULT_SEVERITIES,
    HEARTBEAT,
    NAME,
    Scale,
    meta_rules,
    rules_document,
)
from trainsignals.generator.meta.unit_tests import meta_rule_tests
from trainsignals.generator.output.files import GENERATED_MARK, Options
from trainsignals.generator.output.templates import environment
from trainsignals.generator.output.yaml import dump
from trainsignals.generator.spec.job import JobSpec
from trainsignals.generator.spec.monitoring import (
    DEFAULT_SETTINGS,
    META_ALERT_NAMES,
    MonitoringSettings,
)


@dataclass(frozen=True)
class MetaRunbook:
    name: str
    meaning: str
    impact: str
    confirm: tuple[str, ...]
    mitigate: tuple[str, ...]


RUNBOOKS: tuple[MetaRunbook, ...] = (
    MetaRunbook(
        HEARTBEAT,
        "Always firing, on purpose. Alertmanager sends it to the dead man's switch (receiver "
        "`deadmansswitch`) every `heartbeat.interval`; the switch pages the monitoring team when "
        "the pings stop. It is the only alert that notices a dead Prometheus, a dead "
        "Alertmanager cluster or a dead monitoring host. It also stops on purpose while "
        "AlertmanagerNotificationsFailing fires: an integration that carries pages (PagerDuty) "
        "is failing, and the switch is a path around it.",
        "You see this page only from the switch (the Watchdog itself never pages). No pings "
        "means no alert of any training job can reach anyone right now.",
        (
            "Open Prometheus `/-/ready` and Alertmanager `/-/ready`: which one is down?",
            'Prometheus up: `ALERTS{alertname="AlertmanagerNotificationsFailing"}` firing? '
            "Then pages are failing: see its runbook (your ticket channel has it too).",
            'Otherwise `ALERTS{alertname="Watchdog"}` should be 1; if not, the meta rule '
            "file is not loaded (`/rules`).",
            "Alertmanager up: `/#/alerts` should list Watchdog; if it does, the receiver "
            "`deadmansswitch` fails (see AlertmanagerNotificationsFailing, the Alertmanager log).",
        ),
        (
            "Restart what is down (systemd unit, pod); Prometheus restores pending alerts' `for` "
            "state from `ALERTS_FOR_STATE`, Alertmanager its silences and notification log from "
            "`--storage.path`, so nothing already paged pages twice.",
            "While it is down, watch the training jobs by hand (their dashboards, the scheduler).",
        ),
    ),
    MetaRunbook(
        "PrometheusRuleFailures",
        "Prometheus fails to evaluate rules of a group: a metric or label was renamed, an "
        "expression became invalid after an upgrade (many-to-many matching, a changed function), "
        "or queries time out. Every alert of that group is silently off.",
        "Alerts of the failing group cannot fire: a real fault of that job would not page.",
        (
            "Prometheus `/rules`: the failing rule shows its last error.",
            "`promtool check rules` and `promtool test rules` on the group's file; "
            "`trainsignals lint` on the generated rules.",
        ),
        (
            "Revert the last rule or exporter change, or regenerate (`trainsignals generate`) "
            "after fixing the spec; reload Prometheus (`POST /-/reload`).",
            "Query timeouts: see PrometheusRuleGroupSlow.",
        ),
    ),
    MetaRunbook(
        "PrometheusRuleGroupSlow",
        "A rule group takes longer to evaluate than its interval, or Prometheus skipped "
        "evaluations: its alerts fire late (by at least one interval per skipped iteration).",
        "Alerts still fire, late. No page lost yet; it gets worse with more jobs and series.",
        (
            "Prometheus `/rules`: evaluation time per group and rule.",
            "`prometheus_rule_group_last_duration_seconds` by `rule_group` over the last day.",
        ),
        (
            "Find the expensive rule (high-cardinality selectors, long ranges) and record it "
            "instead, or give the group a longer interval.",
            "Check Prometheus' CPU and memory; scale it up or shard the jobs over two.",
        ),
    ),
    MetaRunbook(
        "PrometheusNotConnectedToAlertmanagers",
        "Prometheus has discovered no Alertmanager: its `alerting` section or the Alertmanager "
        "service discovery is empty or broken. Alerts fire in Prometheus and go nowhere.",
        "Nothing pages. This alert itself cannot reach you through Alertmanager: you see it on "
        "Prometheus' `/alerts` page or because the dead man's switch stopped getting pings.",
        (
            "Prometheus `/status` (Alertmanagers section) and `/config` (`alerting:`).",
            "`prometheus_notifications_alertmanagers_discovered` is 0.",
        ),
        (
            "Fix the `alerting.alertmanagers` section (one target per Alertmanager of the "
            "cluster: Prometheus must send to all of them, not to a load balancer) and reload.",
        ),
    ),
    MetaRunbook(
        "PrometheusNotificationsFailing",
        "Prometheus fails to send alerts to every Alertmanager it knows (more than 3% errors on "
        "each), or drops alerts because its notification queue is full.",
        "Pages are not leaving Prometheus. With one Alertmanager of a cluster failing this does "
        "not fire (the others deliver); AlertmanagerClusterDegraded does.",
        (
            "Prometheus log: `Error sending alert` names the Alertmanager and the error.",
            "`rate(prometheus_notifications_errors_total[5m])` by `alertmanager`; "
            "`prometheus_notifications_queue_length` against `_capacity`.",
        ),
        (
            "Bring the Alertmanagers back (their `/-/ready`); they get every firing alert again "
            "at the next resend (`--rules.alert.resend-delay`, 1m by default).",
            "Queue full: raise `--alertmanager.notification-queue-capacity` or fix the slowness.",
        ),
    ),
    MetaRunbook(
        "AlertmanagerNotificationsFailing",
        "Alertmanager's notifications to an integration (webhook, PagerDuty, Slack, email) fail "
        "after all retries: the receiver rejects them (4xx/5xx), times out or is unreachable.",
        "Pages routed through that integration are not arriving. This alert is routed around "
        "it (to the monitoring team's receiver that does not use it, e.g. their ticket channel "
        "when PagerDuty fails), and the Watchdog heartbeat stops while it fires, so the dead "
        "man's switch pages too. If every receiver of the monitoring team uses the failing "
        "integration (`validate` warns), the switch is the only path.",
        (
            "Alertmanager log: `Notify for alerts failed` names the receiver and the HTTP status.",
            "`increase(alertmanager_notifications_failed_total[5m])` by `integration`.",
        ),
        (
            "Receiver down: Alertmanager keeps retrying every group interval and delivers once it "
            "recovers; nothing to do but restore it (or its credentials file).",
            "Receiver rejecting (400/401/403): a wrong key or URL in the config; fix and reload.",
        ),
    ),
    MetaRunbook(
        "AlertmanagerTicketNotificationsFailing",
        "Alertmanager's notifications to an integration that only ticket receivers use (no page "
        "receiver of any team uses it) fail after all retries: the ticket system or chat "
        "rejects them, times out or is unreachable.",
        "Tickets are late or missing; no page is lost. When a page integration fails too, "
        "AlertmanagerNotificationsFailing pages for it.",
        (
            "Alertmanager log: `Notify for alerts failed` names the receiver and the HTTP status.",
            "`increase(alertmanager_notifications_failed_total[5m])` by `integration`.",
        ),
        (
            "Receiver down: Alertmanager retries every group interval and delivers once it "
            "recovers. Rejecting (400/401/403): fix the URL or the credentials file and reload.",
        ),
    ),
    MetaRunbook(
        "PrometheusConfigReloadFailed",
        "Prometheus failed to load its configuration on the last reloads "
        "(`prometheus_config_last_reload_successful` is 0): a syntax error, a rule file that "
        "does not parse, or a file it cannot read. It keeps running the previous configuration.",
        "Alerting still works with the old configuration, but the change just applied (a new "
        "job's rules or scrape configs, a fixed threshold) is not in effect: a new job can be "
        "unmonitored while everyone believes its alerts are live.",
        (
            "Prometheus log: `Error reloading config` / `Loading configuration file failed` "
            "names the file and the error; `/status` shows the last successful reload time.",
            "`promtool check config prometheus.yml` and `trainsignals check` on the checkout.",
            "Kubernetes: the config-reloader container's log and the operator's log (a "
            "PrometheusRule the operator rejected is not even written).",
        ),
        (
            "Fix the file (or regenerate: `trainsignals generate`) and reload (`POST /-/reload`). "
            "Do not restart Prometheus with a configuration that does not load: it will not start.",
        ),
    ),
    MetaRunbook(
        "AlertmanagerConfigReloadFailed",
        "An Alertmanager failed to load its configuration on the last reloads "
        "(`alertmanager_config_last_reload_successful` is 0): invalid YAML, an unknown field, "
        "a template that does not parse, or a credentials file it cannot read.",
        "Alerts are routed with the previous configuration: a new team's routes, a new "
        "receiver or a fixed inhibition is not in effect.",
        (
            "Alertmanager log: `Loading configuration file failed` names the error.",
            "`amtool check-config alertmanager.yaml` on the generated file.",
            "Kubernetes: the config-reloader's log; an AlertmanagerConfig the operator "
            "rejected is listed in the operator's log.",
        ),
        ("Fix the configuration (or regenerate) and reload (`POST /-/reload`) every replica.",),
    ),
    MetaRunbook(
        "AlertmanagerConfigInconsistent",
        "The Alertmanager replicas report different `alertmanager_config_hash` values for "
        "20 minutes: a change reached some replicas only (one failed to reload, a config "
        "volume not updated, a replica pinned to an old ConfigMap).",
        "Each alert is routed by whichever replica sends it first: the same alert can page "
        "through one replica and go nowhere, or elsewhere, through another.",
        (
            "`alertmanager_config_hash` by `instance`; each replica's `/#/status` shows its "
            "configuration.",
            "See AlertmanagerConfigReloadFailed on the odd replica.",
        ),
        ("Apply the same configuration to every replica and reload them.",),
    ),
    MetaRunbook(
        "AlertmanagerClusterDegraded",
        "Fewer Alertmanagers are up than the cluster should have (`alertmanager_replicas`), or "
        "a member sees fewer peers than that (gossip broken: a split cluster can page twice).",
        "Notifications still go out while one member is up. One more failure and nothing does.",
        (
            '`up{job="alertmanager"}` per instance; each member\'s `/#/status` lists its peers.',
            "Members up but not peered: cluster port (9094 TCP and UDP) blocked, or a wrong "
            "`--cluster.peer`.",
        ),
        (
            "Restart the missing member; it rejoins through `--cluster.peer` and gets silences "
            "and the notification log from its peers.",
        ),
    ),
    MetaRunbook(
        "ScrapeTargetsVanished",
        "A running training job's GPU exporters (or its training ranks) disappeared from "
        "service discovery while the other half is still scraped: a relabeling or SD change "
        "dropped them, the exporter's pod or service lost its labels, or the discovery file "
        "was rewritten without them. `up` has no series at all, so no `up == 0` alert fires.",
        "Every alert that reads the vanished series (GPU health, or training progress) is "
        "blind for that job. A job restarting re-registers its ranks within its restart time; "
        "this waits longer than that before paging.",
        (
            "Prometheus `/service-discovery`: the job's targets, before and after relabeling.",
            '`count by (job) (up{training_job="<job>"})`: which scrape job is missing.',
            '`vanished="node"`: the node_exporters of the job\'s nodes (the InfiniBand '
            "alerts read them): its file_sd `node*.json` files, or on Kubernetes the job's "
            "`-node` PodMonitor and the node label on its nodes.",
        ),
        (
            "Restore the labels or discovery entries (the spec's `selector` labels and "
            "`scrape_jobs` names must match); `trainsignals readiness` checks a live setup.",
            "If the job really stopped its exporters on purpose, end the job or the alert.",
        ),
    ),
)


def _runbooks(
    settings: MonitoringSettings, specs: list[JobSpec], header: str, rules_file: str
) -> dict[str, str]:
    env = environment()
    template = env.get_template("runbook_meta.md.j2")
    rules = meta_rules(settings, specs)
    files = {}
    for book in RUNBOOKS:
        severity = (
            "none (heartbeat to the dead man's switch)"
            if book.name == HEARTBEAT
            else settings.alerts.get(book.name, DEFAULT_SEVERITIES[book.name])
        )
        shown = [
            {
                "expr": rule.expr,
                "for_": Scale().duration(rule.for_seconds) if rule.for_seconds else "",
                "labels": ", ".join(f"`{k}={v}`" for k, v in sorted(rule.extra_labels.items()))
                or "those of the series",
            }
            for rule in rules
            if rule.alert == book.name
        ]
        files[f"runbooks/{book.name}.md"] = template.render(
            header=header,
            alert=book,
            severity=severity,
            settings=settings,
            rules=shown,
            rules_file=rules_file,
        )
    return files


def meta_files(
    specs: list[tuple[JobSpec, str]],
    options: Options | None = None,
    settings: MonitoringSettings = DEFAULT_SETTINGS,
) -> dict[str, str]:
    """alerts/meta.rules.yaml, alerts/meta.test.yaml (scale 1 only) and the meta runbooks."""
    options = options or Options()
    if any(spec.name == NAME for spec, _ in specs):
        raise ValueError(
            f"a job may not be named {NAME!r}: the meta-monitoring files use that name; "
            "rename the job"
        )
    job_specs = [spec for spec, _ in specs]
    sources = ", ".join(source for _, source in specs) or "no spec"
    mark = f"{GENERATED_MARK} {__version__} from {sources} and the monitoring settings"
    header = (
        f"# {mark} (team {settings.team}).\n"
        "# Do not edit: change the monitoring settings (--monitoring FILE) and run "
        "`trainsignals generate`.\n"
    )
    scale = Scale(options.time_scale, options.min_range_seconds)
    rules_file = f"{NAME}.rules.yaml"
    files = {f"alerts/{rules_file}": dump(rules_document(settings, job_specs, scale), header)}
    if options.with_tests and options.time_scale == 1:
        files[f"alerts/{NAME}.test.yaml"] = dump(
            meta_rule_tests(settings, job_specs, rules_file), header
        )
    files |= _runbooks(settings, job_specs, f"<!-- {mark}. Do not edit. -->", rules_file)
    missing = set(META_ALERT_NAMES) - {book.name for book in RUNBOOKS}
    assert not missing, f"meta alerts without a runbook: {sorted(missing)}"
    return files


class MetaKind(ArtifactKind):
    """Meta-monitoring: the pipeline's own rules, tests and runbooks (meta_files)."""

    name = "meta"

    def fleet_files(self, run: Run, parts: Sequence[Any]) -> dict[str, str]:
        return meta_files(list(run.specs), run.options, run.settings)
