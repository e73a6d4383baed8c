"""Print the one table `make fleet` shows, from a replay and its score (score.py)."""

from __future__ import annotations

from collections import Counter

from trainsignals.generator.signals.recording import SLOW_INTERVAL

from .culprit import judge, report_lines
from .run import EPOCH, Replay
from .score import Score, score

__all__ = ["explain", "render", "score"]


def _minute(at_s: int) -> str:
    """Seconds from the run start as day and time: `d12 07:41`."""
    day, rest = divmod(at_s, 86400)
    return f"d{day} {rest // 3600:02d}:{rest % 3600 // 60:02d}"


def explain(replay: Replay, result: Score) -> list[str]:
    """What a failing last line needs: each extra page, page resolved while its incident
    lasted, incident without a page and unticketed fault, with the
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
    for event, page in result.resolved_early:
        lines.append(
            f"- {event.name}: page {page.alertname} at {_minute(page.at - EPOCH)} resolved at "
            f"{_minute((page.resolved or 0) - EPOCH)}, before the job healed at "
            f"{_minute(event.healed_s)}"
        )
    for event in result.missed:
        lines.append(
            f"- no page for {event.name} ({_minute(event.lo)} to {_minute(event.hi)}): "
            f"{around(event.lo)}"
        )
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
        "inhibition applied minute by minute; the job's rule file and the meta alerts fed by "
        "its series (scrape targets vanishing)",
        f"rules generated for recovery mode: {replay.mode}; must page once each, for as long "
        "as it lasts: "
        + (
            "every unexpected interruption (nothing is trusted to heal the job) and every incident"
            if result.mode == "manual"
            else "the incidents automation does not fix"
        ),
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
    early = {event.name: page for event, page in result.resolved_early if event.incident}
    lines += [
        "",
        "| non-recovering incident | pages | time to page | page open until healed |",
        "|---|---|---|---|",
    ]
    for incident in history.incidents:
        ttp = result.time_to_page[incident.kind]
        shown = "no page" if ttp is None else f"{ttp / 60:.0f} min"
        if ttp is not None and incident.start_s + ttp > incident.healed_s:
            shown += " (after it healed)"
        held = "-" if ttp is None else "yes"
        if incident.kind in early:
            gone = (early[incident.kind].resolved or 0) - EPOCH - incident.start_s
            held = (
                f"no: resolved {gone / 60:.0f} min in, healed "
                f"{(incident.healed_s - incident.start_s) / 60:.0f} min in"
            )
        count = result.pages_per_incident[incident.kind]
        lines.append(f"| {incident.kind} | {count} | {shown} | {held} |")
    if history.completed_s:
        done = EPOCH + history.completed_s
        after = [n for n in replay.notifications if n.at >= done]
        paged = sum(1 for n in after if n.severity == "page")
        tail = (history.wall_s - history.completed_s) / 3600
        lines.append(
            f"| completed (finish(), GPU exporter scraped {tail:.1f} h on; must not page; "
            f"{len(after) - paged} tickets) | {paged} | never | - |"
        )
    if result.per_cause:
        lines += [
            "",
            "| interruption (manual: each an incident) | count | paged exactly once |",
            "|---|---|---|",
        ]
        for cause, (count, once) in sorted(result.per_cause.items()):
            lines.append(f"| {cause} | {count} | {once} |")
    lines += [
        "",
        f"| hardware fault | faults | {result.hardware_key} (node, GPU) | UUID named |",
        "|---|---|---|---|",
    ]
    missed = Counter(f.cause for f in result.unticketed)
    hardware = Counter(f.cause for f in history.hardware_faults)
    for cause, count in sorted(hardware.items()):
        lines.append(f"| {cause} | {count} | {count - missed[cause]} | |")
    lines.append(f"| all | {result.hardware} | {result.ticketed} | {result.uuid_named} |")
    culprits = judge(replay)  # issue 28: named the culprit, fail-slows, lemons
    lines += report_lines(replay, culprits)
    measured = "n/a" if replay.ettr_measured is None else f"{replay.ettr_measured:.2%}"
    lines += [
        "",
        f"ETTR (productive / wall): truth {truth.ettr:.2%}, measured {measured} "
        f"({replay.ettr_query or 'no goodput recording answered'})",
        "badput (truth, share of wall): "
        + ", ".join(f"{k} {v / truth.wall_s:.2%}" for k, v in truth.seconds.items()),
        "replay seconds: " + ", ".join(f"{k} {v:.0f}" for k, v in replay.seconds.items()),
        *explain(replay, result),
        culprits.line(),
        result.last_line(),
    ]
    return "\n".join(lines)
