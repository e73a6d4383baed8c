"""Score a replay against its ground truth and print the one table `make fleet` shows."""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, field

from trainsignals.generator.signals.recording import SLOW_INTERVAL

from .history import THERMAL_LEAD_S, Interruption
from .routing import Notification
from .run import EPOCH, Replay

PAGE_GRACE_S = 30 * 60  # a page up to 30 min after an incident ends still belongs to it


@dataclass
class Score:
    pages: int
    nonrecovering: int
    extra_pages: int
    ticketed: int
    hardware: int
    ettr_error_pts: float
    time_to_page: dict[str, int | None] = field(default_factory=dict)
    pages_per_incident: dict[str, int] = field(default_factory=dict)
    unticketed: list[Interruption] = field(default_factory=list)
    uuid_named: int = 0
    unclaimed: list[Notification] = field(default_factory=list)  # the extra pages

    def last_line(self) -> str:
        error = "nan" if math.isnan(self.ettr_error_pts) else f"{self.ettr_error_pts:.2f}"
        return (
            f"fleet: pages={self.pages} nonrecovering={self.nonrecovering} "
            f"extra_pages={self.extra_pages} hw_faults_ticketed={self.ticketed}/{self.hardware} "
            f"ettr_error_pts={error}"
        )


def _names(labels: dict[str, str], fault: Interruption) -> bool:
    if labels.get("node") != fault.node:
        return False
    return fault.gpu is None or labels.get("gpu") == str(fault.gpu)


def score(replay: Replay) -> Score:
    history = replay.history
    pages = [n for n in replay.notifications if n.severity == "page"]
    claimed: set[int] = set()
    time_to_page: dict[str, int | None] = {}
    per_incident: dict[str, int] = {}
    for incident in history.incidents:
        lo, hi = EPOCH + incident.start_s, EPOCH + incident.end_s + PAGE_GRACE_S
        mine = [i for i, n in enumerate(pages) if lo <= n.at <= hi]
        per_incident[incident.kind] = len(mine)
        time_to_page[incident.kind] = pages[mine[0]].at - lo if mine else None
        claimed.update(mine[:1])
    tickets = [
        (at, labels)
        for n in replay.notifications
        if n.severity == "ticket"
        for at, labels in n.alerts
    ]
    unticketed: list[Interruption] = []
    uuid_named = 0
    for fault in history.hardware_faults:
        lo = EPOCH + fault.fault_s - THERMAL_LEAD_S - 600
        hi = EPOCH + fault.up_s + 3600
        named = [labels for at, labels in tickets if lo <= at <= hi and _names(labels, fault)]
        if not named:
            unticketed.append(fault)
        elif any(labels.get("uuid") == fault.uuid for labels in named if fault.uuid):
            uuid_named += 1
    error = math.nan
    if replay.ettr_measured is not None:
        error = abs(replay.ettr_measured - replay.truth.ettr) * 100
    hardware = len(history.hardware_faults)
    return Score(
        pages=len(pages),
        nonrecovering=len(history.incidents),
        extra_pages=len(pages) - len(claimed),
        ticketed=hardware - len(unticketed),
        hardware=hardware,
        ettr_error_pts=error,
        time_to_page=time_to_page,
        pages_per_incident=per_incident,
        unticketed=unticketed,
        uuid_named=uuid_named,
        unclaimed=[n for i, n in enumerate(pages) if i not in claimed],
    )


def _minute(at_s: int) -> str:
    """Seconds from the run start as day and time: `d12 07:41`."""
    day, rest = divmod(at_s, 86400)
    return f"d{day} {rest // 3600:02d}:{rest % 3600 // 60:02d}"


def explain(replay: Replay, result: Score) -> list[str]:
    """What a failing last line needs: each extra page and each unticketed fault, with the
    interruptions around it (an extra page beside two back-to-back restarts reads differently
    from one in a quiet stretch)."""
    history = replay.history
    lines: list[str] = []

    def around(at_s: int) -> str:
        near = [i for i in history.interruptions if at_s - 3 * 3600 <= i.fault_s <= at_s + 600]
        return (
            "; ".join(
                f"{i.cause} {i.node or 'job'} at {_minute(i.fault_s)}, up {_minute(i.up_s)}, "
                f"first step {_minute(i.first_step_s)}"
                for i in near
            )
            or "no interruption in the 3 h before"
        )

    for page in result.unclaimed:
        at_s = page.at - EPOCH
        labels = page.alerts[0][1] if page.alerts else {}
        shown = ", ".join(f"{k}={v}" for k, v in sorted(labels.items()) if k != "alertname")
        lines.append(f"- extra page {page.alertname} at {_minute(at_s)} ({shown}): {around(at_s)}")
    for fault in result.unticketed:
        lines.append(
            f"- unticketed {fault.cause} on {fault.node} GPU {fault.gpu} at "
            f"{_minute(fault.fault_s)}, up {_minute(fault.up_s)}: {around(fault.fault_s)}"
        )
    return ["", "Why the last line is not clean:", *lines] if lines else []


def render(replay: Replay, result: Score) -> str:
    history, truth = replay.history, replay.truth
    causes = Counter(i.cause for i in history.interruptions if not i.incident)
    planned = causes.pop("planned", 0)
    lines = [
        f"fleet replay: {history.days:g} days of a 2,048-node x 8-GPU job, seed {history.seed}; "
        f"{replay.slots} node slots stored, 60 s resolution",
        "method: raw series as OpenMetrics -> promtool tsdb create-blocks-from openmetrics; "
        f"Prometheus 2.42 on 127.0.0.1; recording rules in {replay.tiers} dependency tiers as "
        f"range queries at each group's interval (60 s, the slow group's {SLOW_INTERVAL} s), "
        "imported as blocks; alert expressions as range queries with for/keep_firing_for "
        "applied as Prometheus does (ALERTS written "
        "back for rules that read it); the generated Alertmanager routing, grouping and "
        "inhibition applied minute by minute",
        f"rules generated for recovery mode: {replay.mode}",
        f"samples written: {replay.samples:,}; raw series the rules read but the replay cannot "
        f"write: {', '.join(replay.series_missing) or 'none'}",
        f"interruptions: {sum(causes.values())} unexpected + {planned} planned; "
        f"{len(history.incidents)} incidents automation does not fix",
        "",
        "| pages by alert | count |",
        "|---|---|",
    ]
    page_names = Counter(n.alertname for n in replay.notifications if n.severity == "page")
    lines += [f"| {name} | {count} |" for name, count in sorted(page_names.items())] or [
        "| none | 0 |"
    ]
    lines += ["", "| non-recovering incident | pages | time to page |", "|---|---|---|"]
    for incident in history.incidents:
        ttp = result.time_to_page[incident.kind]
        shown = "no page" if ttp is None else f"{ttp / 60:.0f} min"
        lines.append(f"| {incident.kind} | {result.pages_per_incident[incident.kind]} | {shown} |")
    if history.completed_s:
        after = sum(1 for n in replay.notifications if n.at >= EPOCH + history.completed_s)
        lines.append(f"| completed (a clean exit; must not page) | {after} | never |")
    lines += [
        "",
        "| hardware fault | faults | ticketed (node, GPU named) | UUID named |",
        "|---|---|---|---|",
    ]
    missed = Counter(f.cause for f in result.unticketed)
    hardware = Counter(f.cause for f in history.hardware_faults)
    for cause, count in sorted(hardware.items()):
        lines.append(f"| {cause} | {count} | {count - missed[cause]} | |")
    lines.append(f"| all | {result.hardware} | {result.ticketed} | {result.uuid_named} |")
    measured = "n/a" if replay.ettr_measured is None else f"{replay.ettr_measured:.2%}"
    lines += [
        "",
        f"ETTR (productive / wall): truth {truth.ettr:.2%}, measured {measured} "
        f"({replay.ettr_query or 'no goodput recording answered'})",
        "badput (truth, share of wall): "
        + ", ".join(f"{k} {v / truth.wall_s:.2%}" for k, v in truth.seconds.items()),
        "replay seconds: " + ", ".join(f"{k} {v:.0f}" for k, v in replay.seconds.items()),
        *explain(replay, result),
        result.last_line(),
    ]
    return "\n".join(lines)
