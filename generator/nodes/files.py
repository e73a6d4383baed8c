"""The node files for all specs: the incident record's rules, promtool tests and runbook."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from trainsignals import __version__
from trainsignals.generator.artifacts.kind import ArtifactKind, Run
from trainsignals.generator.nodes.policy import (
    ALERT,
    MEANING,
    NAME,
    NodesPolicy,
    hardware_faults,
    hardware_tickets,
)
from trainsignals.generator.nodes.rules import infra_teams, rules_document
from trainsignals.generator.nodes.unit_tests import long_tests, rule_tests
from trainsignals.generator.output.files import GENERATED_MARK, Options
from trainsignals.generator.output.templates import environment
from trainsignals.generator.output.yaml import dump
from trainsignals.generator.signals.node_incidents import (
    FAULTS,
    INCIDENT_START,
    INCIDENTS,
    LAST_JOB,
    MERGE_SECONDS,
    SCORE,
    TICKET_START,
    TICKETS,
)
from trainsignals.generator.spec.durations import format_duration
from trainsignals.generator.spec.job import JobSpec, Links
from trainsignals.generator.spec.monitoring import DEFAULT_SETTINGS, MonitoringSettings

RULES_FILE = f"{NAME}.rules.yaml"


def nodes_policy(settings: MonitoringSettings | None, options: Options) -> NodesPolicy:
    settings = settings or DEFAULT_SETTINGS
    return NodesPolicy(
        settings.lemon_node_incidents, options.time_scale, settings.lemon_tickets_per_incident
    )


def nodes_document(
    specs: list[JobSpec], settings: MonitoringSettings | None, options: Options = Options()
) -> dict:
    """The rules document (the Kubernetes PrometheusRule and the global ruler wrap it)."""
    links = specs[0].links if specs else Links()
    return rules_document(nodes_policy(settings, options), links, infra_teams(specs))


def nodes_rules(
    specs: list[tuple[JobSpec, str]],
    options: Options | None = None,
    settings: MonitoringSettings | None = None,
) -> tuple[str, dict]:
    """The header and the document of alerts/nodes.rules.yaml, as nodes_files writes them
    (the Kubernetes PrometheusRule and the sharded global ruler wrap them)."""
    options = options or Options()
    header = _header(_mark(specs, nodes_policy(settings, options)))
    return header, nodes_document([spec for spec, _ in specs], settings, options)


def _header(mark: str) -> str:
    return f"# {mark}\n# Do not edit: change the specs and run `trainsignals generate`.\n"


def _mark(specs: list[tuple[JobSpec, str]], policy: NodesPolicy) -> str:
    sources = ", ".join(source for _, source in specs) or "no spec"
    return (
        f"{GENERATED_MARK} {__version__} from {sources} (lemon nodes: "
        f"{policy.threshold} hardware incidents in 30 days, {policy.tickets_per_incident} tickets "
        "weighing one)."
    )


def nodes_files(
    specs: list[tuple[JobSpec, str]],
    options: Options | None = None,
    settings: MonitoringSettings | None = None,
) -> dict[str, str]:
    """alerts/nodes.rules.yaml, its promtool tests and runbooks/NodeIncidentsRecurring.md.

    Links (runbook base URL) come from the first spec; the threshold from `settings`."""
    if any(spec.name == NAME for spec, _ in specs):
        raise ValueError(
            f"a job may not be named {NAME!r}: the node files use that name; rename the job"
        )
    options = options or Options()
    policy = nodes_policy(settings, options)
    job_specs = [spec for spec, _ in specs]
    links = job_specs[0].links if job_specs else Links()
    teams = infra_teams(job_specs)
    mark = _mark(specs, policy)
    header = _header(mark)
    document = rules_document(policy, links, teams)
    files = {f"alerts/{RULES_FILE}": dump(document, header)}
    if options.with_tests and policy.time_scale == 1:
        files[f"alerts/{NAME}.test.yaml"] = dump(
            rule_tests(policy, links, teams, RULES_FILE), header
        )
        files[f"alerts/{NAME}.long.test.yaml"] = dump(
            long_tests(policy, links, teams, RULES_FILE), header
        )
    alerts = [r for g in document["groups"] for r in g["rules"] if r.get("alert") == ALERT]
    files[f"runbooks/{ALERT}.md"] = (
        environment()
        .get_template(f"runbook_{ALERT}.md.j2")
        .render(
            header=f"<!-- {mark} Do not edit. -->",
            alert=ALERT,
            meaning=MEANING,
            rules_file=RULES_FILE,
            threshold=policy.threshold,
            faults=hardware_faults(),
            tickets=hardware_tickets(),
            tickets_per_incident=policy.tickets_per_incident,
            score=SCORE,
            tickets_record=TICKETS,
            ticket_start=TICKET_START,
            merge=format_duration(MERGE_SECONDS),
            incidents=INCIDENTS,
            faults_record=FAULTS,
            last_job=LAST_JOB,
            incident_start=INCIDENT_START,
            rules=alerts,
            teams=teams,
        )
    )
    return files


class NodesKind(ArtifactKind):
    """The lemon-node record across all jobs: nodes_files."""

    name = "nodes"

    def fleet_files(self, run: Run, parts: Sequence[Any]) -> dict[str, str]:
        return nodes_files(list(run.specs), run.options, run.settings)
