"""Inhibition rules: one fault pages once. A cause (NodeDown, GpuLost, no progress) mutes the
symptoms that follow from it, by the roles the alert definitions declare (node_scoped,
progress_symptom, incident_consequence). generator/oncall/delivered.py reads them too.
"""

from __future__ import annotations

from trainsignals.generator.alerts.catalog import ALERTS

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
