"""Inhibition rules: one fault pages once. A cause (NodeDown, GpuLost, no progress) mutes the
symptoms that follow from it: one rule per `explains=` declaration of the alert definitions
(generator/alerts/model.py Explains), its targets named there or by the roles the targets hold
(node_scoped, progress_symptom, incident_consequence); this module types no alert's name.
generator/oncall/delivered.py reads them too.
"""

from __future__ import annotations

from trainsignals.generator.alerts.catalog import ALERTS, cause_depth, explained
from trainsignals.generator.alerts.model import AlertDef, Explains
from trainsignals.generator.spec.pipeline_alerts import PIPELINE_ALERTS, PipelineAlert

_PAGE = 'severity="page"'
_TICKET = 'severity="ticket"'


def _alternation(names: tuple[str, ...] | list[str]) -> str:
    if len(names) == 1:
        return f'alertname="{names[0]}"'
    return f'alertname=~"{"|".join(names)}"'


def _declared(alerts: tuple[AlertDef, ...]) -> list[tuple[str, dict]]:
    """(comment, rule) per declaration, root causes first (then definition order), so the
    file reads from a dead node down to its symptoms; alerts sharing one declaration share
    its rule."""
    sources: dict[Explains, list[str]] = {}
    for alert in alerts:
        for explains in alert.explains:
            sources.setdefault(explains, []).append(alert.name)
    depth = cause_depth()
    out = []
    for explains, names in sorted(sources.items(), key=lambda i: min(depth[n] for n in i[1])):
        source = [_alternation(names)]
        if explains.page_only:
            source.append(_PAGE)
        target = [_alternation(explained(explains, names))]
        target += explains.label_matchers()
        rule = {"source_matchers": source, "target_matchers": target}
        out.append((explains.why, {**rule, "equal": list(explains.equal)}))
    return out


def _pipeline_declared(alerts: tuple[PipelineAlert, ...]) -> list[tuple[str, dict]]:
    """(comment, rule) per pipeline alert that declares what it explains (the monitoring
    pipeline's own faults, generator/spec/pipeline_alerts.py): one Alertmanager cluster, one
    Prometheus fleet, so no label need be equal."""
    return [
        (
            alert.why,
            {
                "source_matchers": [_alternation([alert.name])],
                "target_matchers": [_alternation(alert.explains)],
                "equal": [],
            },
        )
        for alert in alerts
        if alert.explains
    ]


# (comment, rule). Alertmanager lets an inhibited source still inhibit, so chains
# (NodeDown -> TrainingTargetsDown -> TrainingStalled) hold even when the middle is muted.
# Written as the page case; `_page_only` adds severity="page" to each source and a twin for a
# ticket source that mutes only tickets (a ticket must never mute a page).
_SAME_ALERT = (
    "If one alert exists both as page and as ticket for a job, the page covers the ticket.",
    {
        "source_matchers": ['severity="page"'],
        "target_matchers": ['severity="ticket"'],
        "equal": ["alertname", "training_job"],
    },
)


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


INHIBIT_RULES = _page_only((*_declared(ALERTS), *_pipeline_declared(PIPELINE_ALERTS), _SAME_ALERT))
