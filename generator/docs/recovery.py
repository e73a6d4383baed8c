"""docs/recovery.md: what each recovery mode pages and tickets, from the alert declarations.

One table, one row per job alert, grouped by the kind of incident it belongs to: the kind is
read from the declaration (`incident=`, `hardware_fault=`, `owner=`, `signal=`), the severities
from its severity per mode (`severity=`, `auto_restart=`). README's recovery section carries a
copy of the table between the markers below; tests/test_recovery_table.py fails when it differs.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from trainsignals import __version__
from trainsignals.generator.alerts.catalog import ALERTS
from trainsignals.generator.alerts.definitions.restarts import TRAINING_RESTARTED
from trainsignals.generator.alerts.model import (
    CHECKPOINT_INCIDENT,
    MODES,
    PROGRESS_INCIDENT,
    AlertDef,
)
from trainsignals.generator.artifacts.kind import ArtifactKind, Run
from trainsignals.generator.output.files import GENERATED_MARK

PATH = "docs/recovery.md"
BEGIN = "<!-- recovery table: generated from the alert declarations (docs/recovery.md) -->"
END = "<!-- end of the generated recovery table -->"

# Kinds of incident, in the table's order: (key, words).
KINDS = (
    (PROGRESS_INCIDENT, "job stopped: dead, hung, restarts that never reach a step"),
    (CHECKPOINT_INCIDENT, "checkpoints stopped: the newest save too old to restart from"),
    ("hardware", "hardware fault of one node (counted per node)"),
    ("infrastructure", "infrastructure condition (degraded, not stopped)"),
    ("speed", "slow, starved or full: throughput, step time, GPU memory, disks"),
    ("health", "bad loss, dropped batches, checkpoints too old"),
    ("slo", "SLO error budget"),
    ("inputs", "monitoring inputs missing"),
)
# The job's own alerts that declare no incident, by their golden signal.
_BY_SIGNAL = {
    "latency": "speed",
    "traffic": "speed",
    "saturation": "speed",
    "errors": "health",
    "loss": "health",
    "slo": "slo",
    "infrastructure": "inputs",
}


def kind_of(alert: AlertDef) -> str:
    """The incident kind an alert's declaration puts it in (a key of KINDS)."""
    if alert.incident is not None:
        return alert.incident
    if alert.hardware_fault:
        return "hardware"
    if alert.owner == "infra":
        return "infrastructure"
    return _BY_SIGNAL[alert.signal]


def _cell(alert: AlertDef, mode: str) -> str:
    severity = alert.severity_for(mode)
    if severity == "off":
        return "-"
    if severity == "ticket" and alert.owner == "infra":  # generator/alerts/rules.py team()
        return "ticket (infra_team)"
    return f"**{severity}**" if severity == "page" else severity


def recovery_table() -> str:
    """The table itself (what README copies), without the page's header."""
    head = f"| incident kind | alert | {' | '.join(f'`{m}`' for m in MODES)} |"
    lines = [head, "|---|---|" + "---|" * len(MODES)]
    for key, words in KINDS:
        members = [a for a in ALERTS if kind_of(a) == key]
        for i, alert in enumerate(members):
            kind = words if i == 0 else ""
            cells = " | ".join(_cell(alert, mode) for mode in MODES)
            name = f"`{alert.name}`"
            if alert.hardware_fault and key != "hardware":
                name += " (hardware fault)"
            lines.append(f"| {kind} | {name} | {cells} |")
    unplaced = {kind_of(a) for a in ALERTS} - {key for key, _ in KINDS}
    if unplaced:
        raise ValueError(f"docs/recovery.md: incident kinds without a row: {sorted(unplaced)}")
    return "\n".join(lines) + "\n"


def recovery_markdown() -> str:
    return (
        f"<!-- {GENERATED_MARK} {__version__} from the alert declarations. "
        "Do not edit: run `trainsignals generate`. -->\n"
        "# What each recovery mode pages\n\n"
        "`recovery.mode` changes who is woken, never what progress, checkpoint age or\n"
        "completion mean. Per job alert, its severity in each mode (a spec's `alerts:` may\n"
        "override one): **page** wakes the job's team, ticket goes to the job's team, ticket\n"
        "(infra_team) to `recovery.infra_team` (the job's team when unset), `-` not generated.\n"
        "Alerts of one incident kind page once per incident; a cause mutes what it explains\n"
        "(the generated Alertmanager inhibit rules, from each alert's `explains=`).\n\n"
        "The modes differ in whether a restart itself is an incident. `auto_restart`: a\n"
        "restart that brings the job back is no incident (its cause is a ticket naming the\n"
        "node). `manual`: every unexpected interruption is one incident, one page: the\n"
        "hardware fault that caused it, or ranks down, or else the restart itself\n"
        f"(`{TRAINING_RESTARTED}`, held while restarts keep coming: a crash loop is one page).\n"
        "A planned stop is none in either mode: every rank announces it before its clean\n"
        'exit (`metrics.stopping()`, phase "stopping"), and neither the exit nor\n'
        "the restart after it pages.\n\n"
        f"{BEGIN}\n{recovery_table()}{END}\n"
    )


def readme_copy(readme: str) -> str | None:
    """The table README carries between the markers; None when it has no markers."""
    if BEGIN not in readme or END not in readme:
        return None
    return readme.split(BEGIN, 1)[1].split(END, 1)[0].lstrip("\n")


def recovery_files() -> dict[str, str]:
    return {PATH: recovery_markdown()}


class RecoveryDocKind(ArtifactKind):
    """docs/recovery.md: what each recovery mode pages (README copies it)."""

    name = "docs-recovery"

    def fleet_files(self, run: Run, parts: Sequence[Any]) -> dict[str, str]:
        return recovery_files()
