"""Runbooks in Markdown, one per alert, rendered with jinja2 from generator/templates/.

Several jobs share an alert name, so a runbook has a general part (one template per alert,
extending the shared layout) and a per-job section filled from each job's spec: severity,
threshold, the exact PromQL, the dashboard panel, checkpoint path, owners and rotation.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from trainsignals import __version__
from trainsignals.generator.alerts.catalog import ALERTS, relations
from trainsignals.generator.alerts.model import Explains
from trainsignals.generator.alerts.rules import AlertRule, firing_expr, severity, team
from trainsignals.generator.artifacts.kind import ArtifactKind, JobOutput, Run
from trainsignals.generator.output.files import GENERATED_MARK
from trainsignals.generator.output.templates import environment
from trainsignals.generator.signals.panels import PANEL_IDS, PANEL_TITLES, dashboard_uid
from trainsignals.generator.signals.promql import RuleContext


@dataclass(frozen=True)
class JobRow:
    """One job's values for one alert, as the per-job section shows them."""

    name: str
    source: str
    team: str
    severity: str
    threshold: str
    window: str
    for_: str
    expr: str
    panel: str
    dashboard_url: str
    checkpoint_path: str
    owners: tuple[str, ...]
    rotation: str | None

    @property
    def owners_text(self) -> str:
        return ", ".join(self.owners) if self.owners else "(none listed in the spec)"

    @property
    def rotation_text(self) -> str:
        return f"`{self.rotation}`" if self.rotation else "(none in the spec)"

    @property
    def checkpoint_text(self) -> str:
        return f"`{self.checkpoint_path}`" if self.checkpoint_path else "(not set in the spec)"


def _row(ctx: RuleContext, alert: AlertRule, source: str) -> JobRow:
    spec = ctx.spec
    return JobRow(
        name=spec.name,
        source=source,
        team=team(ctx, alert.name),
        severity=severity(ctx, alert.name),
        threshold=alert.threshold,
        window=alert.window,
        for_=ctx.for_duration(alert.for_seconds),
        expr=firing_expr(ctx, alert),
        panel=PANEL_TITLES[alert.panel],
        # Same link as the alert's dashboard_url annotation.
        dashboard_url=f"{spec.links.grafana_base_url}/d/{dashboard_uid(spec.name)}/{spec.name}"
        f"?viewPanel={PANEL_IDS[alert.panel]}",
        checkpoint_path=spec.checkpoint_path,
        owners=spec.owners,
        rotation=spec.rotation,
    )


def _header(sources: list[str]) -> str:
    files = ", ".join(sources) if sources else "no spec"
    return (
        f"<!-- {GENERATED_MARK} {__version__} from {files}. Do not edit: change the spec "
        "and run `trainsignals generate`. -->"
    )


def pipeline_alerts() -> list[dict[str, str]]:
    """The meta-monitoring, on-call and lemon-node alerts, for the index (their runbooks are
    written by generator/meta/files.py, generator/oncall/ and generator/nodes/)."""
    from trainsignals.generator.meta.files import RUNBOOKS
    from trainsignals.generator.meta.rules import DEFAULT_SEVERITIES
    from trainsignals.generator.nodes.policy import ALERT as NODES_ALERT
    from trainsignals.generator.nodes.policy import MEANING as NODES_MEANING
    from trainsignals.generator.oncall.policy import ALERT, MEANING

    rows = [
        {
            "name": book.name,
            "severity": DEFAULT_SEVERITIES.get(book.name, "none (heartbeat)"),
            "meaning": book.meaning,
        }
        for book in RUNBOOKS
    ]
    return [
        *rows,
        {"name": ALERT, "severity": "ticket", "meaning": MEANING},
        {"name": NODES_ALERT, "severity": "ticket", "meaning": NODES_MEANING},
    ]


def _scope(explains: Explains) -> str:
    """`same node, gpu; xid="79"`: what must match for the relation to hold."""
    same = [label for label in explains.equal if label != "training_job"]
    text = f"same {', '.join(f'`{label}`' for label in same)}" if same else "same job"
    text += "".join(f"; `{m}`" for m in explains.label_matchers())
    return text + ("; when it pages" if explains.page_only else "")


def _links(pairs: list[tuple[str, Explains]]) -> str:
    """One `[A](A.md), [B](B.md) (scope)` group per declaration, in declaration order."""
    groups: dict[Explains, list[str]] = {}
    for name, explains in pairs:
        groups.setdefault(explains, []).append(f"[{name}]({name}.md)")
    return "; ".join(f"{', '.join(names)} ({_scope(e)})" for e, names in groups.items())


def related_text(name: str) -> str:
    """The alert's declared relations (`explains=`), as Alertmanager applies them: what this
    alert mutes while it fires, and what mutes it. Empty when it has none."""
    explains, explained_by = relations(name)
    lines = []
    if explains:
        lines.append(f"**Explains** (muted while this fires: one incident): {_links(explains)}.")
    if explained_by:
        lines.append(
            "**Explained by** (muted while one fires; a ticket mutes only tickets): "
            f"{_links(explained_by)}."
        )
    return "\n\n".join(lines)


@dataclass(frozen=True)
class JobRunbooks:
    """One job's part of the runbooks: its name, spec file and its row of each alert it has."""

    name: str
    source: str
    rows: dict[str, JobRow]


def job_runbooks(
    ctx: RuleContext, alerts: list[AlertRule], source: str | None = None
) -> JobRunbooks:
    """`source`: the job's spec file (default `jobs/<name>.yaml`), for the header."""
    source = source or f"jobs/{ctx.spec.name}.yaml"
    rows: dict[str, JobRow] = {}
    for alert in alerts:
        if alert.name not in rows:
            rows[alert.name] = _row(ctx, alert, source)
    return JobRunbooks(ctx.spec.name, source, rows)


def render_runbooks(
    ctxs_and_alerts: list[tuple[RuleContext, list[AlertRule]]],
    sources: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """{"runbooks/<Alert>.md": markdown} for every catalogued alert, plus runbooks/README.md.

    `sources` maps a job name to its spec file (default `jobs/<name>.yaml`), for the header.
    """
    return render_job_runbooks(
        [
            job_runbooks(ctx, alerts, (sources or {}).get(ctx.spec.name))
            for ctx, alerts in ctxs_and_alerts
        ]
    )


def render_job_runbooks(jobs: list[JobRunbooks]) -> dict[str, str]:
    """render_runbooks from each job's rows. Every alert gets a runbook, even one no job
    enables, so runbook links never dangle."""
    env = environment()
    ordered = sorted(jobs, key=lambda job: job.name)
    header = _header([job.source for job in ordered])
    files: dict[str, str] = {}
    for info in ALERTS:
        rows, disabled = [], []
        for job in ordered:
            row = job.rows.get(info.name)
            if row is None:
                disabled.append(job.name)
            else:
                rows.append(row)
        template = env.get_template(f"runbook_{info.name}.md.j2")
        files[f"runbooks/{info.name}.md"] = template.render(
            header=header, alert=info, jobs=rows, disabled=disabled, related=related_text(info.name)
        )
    jobs_index = [{"name": job.name, "source": job.source} for job in ordered]
    files["runbooks/README.md"] = env.get_template("runbook_index.md.j2").render(
        header=header, alerts=ALERTS, jobs=jobs_index, pipeline=pipeline_alerts()
    )
    return dict(sorted(files.items()))


class RunbooksKind(ArtifactKind):
    """runbooks/<Alert>.md and runbooks/README.md: each job's rows (in its worker), then one
    runbook per catalogued alert."""

    name = "runbooks"

    def job_part(self, job: JobOutput, run: Run) -> JobRunbooks:
        return job_runbooks(job.ctx, job.alerts, job.source)

    def fleet_files(self, run: Run, parts: Sequence[Any]) -> dict[str, str]:
        return render_job_runbooks(list(parts))
