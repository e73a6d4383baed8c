"""Did the notifications name the culprit? Issue 28's measures, against the history's truth.

- culprit_named: of the incidents with a faulty node (each hardware fault, and the crash loop's
  bad node), the share whose FIRST notification (page or ticket, the earliest alert delivered
  about it) names that node (and, for a GPU fault, names the GPU too: reported apart);
- time to localize: fault (a thermal fault: its throttling onset) to the first notification
  naming the node;
- failslow_ticketed: of the fail-slows costing >= FAILSLOW_MIN_COST throughput, the share a
  ticket names (its node) within FAILSLOW_TICKET_S of the onset;
- wrong_accusations_per_week: alerts delivered naming a node that nothing was wrong with;
- lemons_flagged: of the lemon nodes, the share flagged by the fleet's recurring-incidents
  ticket before their second job-killing incident (and before their (N+1)th, N the rule's
  threshold: a count of incidents alone cannot flag before its Nth; the node's non-fatal
  tickets, failslow.add_tickets, can). A recurring-incidents ticket naming a node that is no
  lemon is a wrong accusation, whatever else was wrong with that node then.
"""

from __future__ import annotations

import importlib
import statistics
from collections import Counter
from dataclasses import dataclass, field

from .failslow import FailSlow, lemon_incidents
from .history import DAY, MINUTE, THERMAL_LEAD_S, History, Interruption
from .routing import Notification
from .run import EPOCH, Replay

FAILSLOW_MIN_COST = 0.05
FAILSLOW_TICKET_S = 15 * MINUTE
# A fault's notifications come from its lead to a quarter hour after its restart's first step;
# an alert naming the node stays justified until an hour after the node is back (replaced).
FAULT_AFTER_S = 15 * MINUTE
ACCUSE_AFTER_S = 3600
# A fail-slow's alerts read 5-minute rates over 10-minute windows: they may still name its
# node this long after it ended, and that is no wrong accusation.
FAILSLOW_AFTER_S = 30 * MINUTE
LEMON_WINDOW_S = 30 * DAY
SHOWN = 25  # misses listed under the tables, at most


@dataclass
class Named:
    """One incident with a faulty node: what its first notification said, and when."""

    what: str  # the cause, or "crash_loop"
    node: str
    gpu: int | None
    onset_s: int
    first: dict[str, str] | None = None  # labels of the first alert delivered about it
    localized_s: int | None = None  # onset to the first alert naming the node

    @property
    def node_named(self) -> bool:
        return self.first is not None and self.first.get("node") == self.node

    @property
    def gpu_named(self) -> bool:
        return self.node_named and (self.gpu is None or self.first.get("gpu") == str(self.gpu))


@dataclass
class FailSlowSeen:
    failslow: FailSlow
    ticketed_s: int | None = None  # onset to the first ticket naming its node


@dataclass
class Culprits:
    days: float
    named: list[Named] = field(default_factory=list)
    failslows: list[FailSlowSeen] = field(default_factory=list)
    wrong: list[tuple[int, dict[str, str]]] = field(default_factory=list)
    lemon_rule: str = ""  # the alert that flags a lemon ("" when the rule files have none)
    lemon_threshold: int = 0
    # Per lemon: its job-killing incidents (run seconds) and when it was first flagged.
    lemons: dict[str, tuple[list[int], int | None]] = field(default_factory=dict)

    @property
    def costly(self) -> list[FailSlowSeen]:
        return [f for f in self.failslows if f.failslow.cost >= FAILSLOW_MIN_COST]

    def culprit_named(self) -> tuple[int, int]:
        return sum(n.node_named for n in self.named), len(self.named)

    def failslow_ticketed(self) -> tuple[int, int]:
        ticketed = [
            f for f in self.costly if f.ticketed_s is not None and f.ticketed_s <= FAILSLOW_TICKET_S
        ]
        return len(ticketed), len(self.costly)

    def wrong_per_week(self) -> float:
        return len(self.wrong) / (self.days / 7)

    def lemons_flagged(self, before: int = 2) -> tuple[int, int] | None:
        """Lemons flagged before their `before`th incident, of those that had that many."""
        if not self.lemon_rule:
            return None
        eligible = [(times, at) for times, at in self.lemons.values() if len(times) >= before]
        return sum(at is not None and at < times[before - 1] for times, at in eligible), len(
            eligible
        )

    def line(self) -> str:
        def share(pair: tuple[int, int] | None) -> str:
            if pair is None:
                return "n/a"
            hit, total = pair
            return f"{hit}/{total}" + (f" ({hit / total:.1%})" if total else "")

        lemons = share(self.lemons_flagged())
        if self.lemon_rule and self.lemon_threshold:
            lemons += f", before the {_nth(self.lemon_threshold + 1)}: " + share(
                self.lemons_flagged(self.lemon_threshold + 1)
            )
        elif not self.lemon_rule:
            lemons += " (no recurring-incidents rule in the replayed rule files)"
        return (
            f"culprit: culprit_named={share(self.culprit_named())} "
            f"failslow_ticketed={share(self.failslow_ticketed())} "
            f"wrong_accusations_per_week={self.wrong_per_week():.2f} "
            f"lemons_flagged={lemons}"
        )


def _nth(n: int) -> str:
    return f"{n}{ {1: 'st', 2: 'nd', 3: 'rd'}.get(n, 'th') }"


def _deliveries(notifications: list[Notification]) -> list[tuple[int, str, dict[str, str]]]:
    """Every alert delivered, first time in its group: (unix time, severity, labels)."""
    return sorted(
        ((at, n.severity, labels) for n in notifications for at, labels in n.alerts),
        key=lambda d: d[0],
    )


def _onset(fault: Interruption) -> int:
    return fault.fault_s - (THERMAL_LEAD_S if fault.cause == "gpu_thermal" else 0)


def ticket_weight() -> int:
    """Tickets that weigh one incident in the node record's score (0: the generator has no
    such setting, and tickets do not count)."""
    try:
        settings = importlib.import_module("trainsignals.generator.spec.monitoring")
    except ImportError:
        return 0
    return int(getattr(settings, "DEFAULT_LEMON_TICKETS_PER_INCIDENT", 0))


def lemon_rule() -> tuple[str, int]:
    """The fleet's recurring-incidents alert and its default threshold, where the generator
    has them (issue 28 item 4: generator/nodes/); ("", 0) where it has not."""
    try:
        names = importlib.import_module("trainsignals.generator.spec.pipeline_alerts")
        settings = importlib.import_module("trainsignals.generator.spec.monitoring")
    except ImportError:
        return "", 0
    name = getattr(names, "NODE_INCIDENTS_ALERT", "")
    return name, int(getattr(settings, "DEFAULT_LEMON_NODE_INCIDENTS", 0))


def judge(replay: Replay) -> Culprits:
    history: History = replay.history
    result = Culprits(days=history.days)
    delivered = _deliveries(replay.notifications)
    rel = [(at - EPOCH, severity, labels) for at, severity, labels in delivered]

    # Incidents with a faulty node: each hardware fault, and the crash loop's bad node.
    faulty: list[Named] = [
        Named(f.cause, f.node, f.gpu, _onset(f)) for f in history.hardware_faults if f.node
    ]
    windows = {
        id(n): f.first_step_s + FAULT_AFTER_S
        for n, f in zip(faulty, history.hardware_faults, strict=True)
    }
    for incident in history.incidents:
        if incident.node:
            named = Named(incident.kind, incident.node, None, incident.start_s)
            faulty.append(named)
            windows[id(named)] = incident.end_s + FAULT_AFTER_S
    lemon_alert, _ = lemon_rule()
    for named in faulty:
        # About it: delivered from its onset on (an SLO ticket of earlier faults is not), and
        # about an incident (a lemon ticket is about a node's 30 days, whatever fires now).
        lo, hi = named.onset_s - MINUTE, windows[id(named)]
        about = [
            (at, labels)
            for at, _, labels in rel
            if lo <= at <= hi and not (lemon_alert and labels.get("alertname") == lemon_alert)
        ]
        if about and named.what == "hang":  # the page names its suspects (annotation)
            nodes = _suspects_at(replay, about[0][0])
            about[0] = (about[0][0], about[0][1] | {"node": ",".join(sorted(nodes))})
            result.wrong += [
                (about[0][0], {**about[0][1], "node": n}) for n in nodes - {named.node}
            ]
        if about:
            named.first = about[0][1]
        naming = [at for at, labels in about if labels.get("node") == named.node]
        if naming:
            named.localized_s = max(0, naming[0] - named.onset_s)
    result.named = sorted(faulty, key=lambda n: n.onset_s)

    for failslow in history.failslows:
        seen = FailSlowSeen(failslow)
        tickets = [
            at
            for at, severity, labels in rel
            if severity == "ticket"
            and labels.get("node") == failslow.node
            and failslow.start_s - MINUTE <= at <= failslow.end_s + FAILSLOW_AFTER_S
        ]
        if tickets:
            seen.ticketed_s = tickets[0] - failslow.start_s
        result.failslows.append(seen)

    # Wrong accusations: a node named while nothing was wrong with it.
    guilty: dict[str, list[tuple[int, int]]] = {}
    for f in history.hardware_faults:
        guilty.setdefault(f.node, []).append((_onset(f) - 10 * MINUTE, f.up_s + ACCUSE_AFTER_S))
    for incident in history.incidents:
        if incident.node:
            guilty.setdefault(incident.node, []).append(
                (incident.start_s, incident.end_s + ACCUSE_AFTER_S)
            )
    for f in history.failslows:
        guilty.setdefault(f.node, []).append((f.start_s - MINUTE, f.end_s + FAILSLOW_AFTER_S))
    rule, threshold = lemon_rule()
    result.lemon_rule, result.lemon_threshold = rule, threshold
    for at, _, labels in rel:
        node = labels.get("node")
        if not node:
            continue
        if rule and labels.get("alertname") == rule:  # a lemon ticket: right if a lemon
            if node not in history.lemons:
                result.wrong.append((at, labels))
            continue
        if not any(lo <= at <= hi for lo, hi in guilty.get(node, [])):
            result.wrong.append((at, labels))

    for lemon, times in lemon_incidents(history).items():
        flagged = [
            at
            for at, _, labels in rel
            if labels.get("alertname") == rule and labels.get("node") == lemon
        ]
        result.lemons[lemon] = (times, flagged[0] if flagged and rule else None)
    return result


def _suspects_at(replay: Replay, at: int) -> set[str]:
    """Nodes of the hang suspects at the evaluation that fired a notification delivered at
    `at` (group_wait after it)."""
    before = [ts for ts, _ in replay.suspects if at - 3 * MINUTE <= ts <= at]
    if not before:
        return set()
    last = max(before)
    return {labels.get("node", "") for ts, labels in replay.suspects if ts == last}


def _when(at_s: int) -> str:
    return f"d{at_s // DAY} {at_s % DAY // 3600:02d}:{at_s % 3600 // 60:02d}"


def _minutes(seconds: list[int]) -> str:
    if not seconds:
        return "-"
    if len(seconds) == 1:
        return f"{seconds[0] / 60:.0f} min"
    return f"median {statistics.median(seconds) / 60:.0f} min, max {max(seconds) / 60:.0f} min"


def lemon_reach(history: History, n: int) -> int:
    """Lemons with n job-killing incidents inside some 30 days: what a rule of n can flag."""
    reach = 0
    for times in lemon_incidents(history).values():
        reach += any(
            times[k + n - 1] - times[k] <= LEMON_WINDOW_S for k in range(len(times) - n + 1)
        )
    return reach


def score_reach(history: History, threshold: int, per_incident: int) -> tuple[int, int]:
    """What the node record's arithmetic can do with the history's truth: (lemons whose 30-day
    incidents + tickets / per_incident reach `threshold` before their second job-killing
    incident, other nodes that ever reach it). Ignores merging and tickets absorbed by an
    incident: an upper bound on both, to tell the model from the rules."""
    if not threshold or not per_incident:
        return 0, 0
    events: dict[str, list[tuple[int, float]]] = {}
    for fault in history.hardware_faults:
        events.setdefault(fault.node, []).append((fault.fault_s, 1.0))
    for ticket in history.tickets:
        events.setdefault(ticket.node, []).append((ticket.start_s, 1 / per_incident))
    lemon_hits = others = 0
    for node, seen in events.items():
        seen.sort()
        first = next(
            (
                at
                for at, _ in seen
                if sum(w for t, w in seen if at - LEMON_WINDOW_S < t <= at) >= threshold - 1e-9
            ),
            None,
        )
        if node in history.lemons:
            faults = sorted(t for t, w in seen if w == 1.0)
            lemon_hits += first is not None and (len(faults) < 2 or first < faults[1])
        else:
            others += first is not None
    return lemon_hits, others


def report_lines(replay: Replay, result: Culprits) -> list[str]:
    """The culprit tables: per cause, per fail-slow kind, the wrong accusations, the lemons."""
    lines = [
        "",
        "| faulty node (incident) | incidents | first notification names the node | "
        "... and the GPU | time to localize |",
        "|---|---|---|---|---|",
    ]
    causes = sorted({n.what for n in result.named})
    for cause in causes:
        rows = [n for n in result.named if n.what == cause]
        times = [n.localized_s for n in rows if n.localized_s is not None]
        gpu = sum(n.gpu_named for n in rows) if rows[0].gpu is not None else "-"
        lines.append(
            f"| {cause} | {len(rows)} | {sum(n.node_named for n in rows)} | {gpu} | "
            f"{_minutes(times)} |"
        )
    lines += [
        "",
        "| fail-slow | count | costing >= 5% | ticketed naming the node <= 15 min | "
        "ticketed at all | time to ticket | mean length |",
        "|---|---|---|---|---|---|---|",
    ]
    for kind in ("gpu", "link", "host"):
        rows = [f for f in result.failslows if f.failslow.kind == kind]
        if not rows:
            continue
        costly = [f for f in rows if f.failslow.cost >= FAILSLOW_MIN_COST]
        quick = [
            f for f in costly if f.ticketed_s is not None and f.ticketed_s <= FAILSLOW_TICKET_S
        ]
        times = [f.ticketed_s for f in costly if f.ticketed_s is not None]
        length = statistics.mean(f.failslow.end_s - f.failslow.start_s for f in rows) / 60
        lines.append(
            f"| {kind} | {len(rows)} | {len(costly)} | {len(quick)} | {len(times)} | "
            f"{_minutes(times)} | {length:.0f} min |"
        )
    slow_h = replay.truth.slow_s / 3600
    lines.append(f"fail-slows' throughput cost (truth): {slow_h:.1f} h of training time")
    shown = SHOWN
    for n in result.named:
        if not n.node_named and shown:
            said = (n.first or {}).get("alertname", "nothing")
            lines.append(
                f"- {n.what} on {n.node} at {_when(n.onset_s)}: first notification {said}, "
                f"naming {(n.first or {}).get('node') or 'no node'}"
            )
            shown -= 1
    for f in result.costly:
        if (f.ticketed_s is None or f.ticketed_s > FAILSLOW_TICKET_S) and shown:
            slow = f.failslow
            when = "never" if f.ticketed_s is None else f"after {f.ticketed_s / 60:.0f} min"
            lines.append(
                f"- fail-slow {slow.kind} on {slow.node} at {_when(slow.start_s)} for "
                f"{(slow.end_s - slow.start_s) / 60:.0f} min, cost {slow.cost:.0%}: "
                f"ticketed {when}"
            )
            shown -= 1
    for at, labels in result.wrong[:SHOWN]:
        lines.append(
            f"- wrong accusation {labels.get('alertname')} naming {labels.get('node')} "
            f"at {_when(at)}"
        )
    history = replay.history
    counts = ", ".join(f"{lemon} {len(times)}" for lemon, (times, _) in result.lemons.items())
    lines.append(
        f"lemon nodes ({len(history.lemons)}, ~10x a node's fault rate), job-killing incidents: "
        f"{counts}; lemons with 2 / 3 of them inside 30 days: {lemon_reach(history, 2)} / "
        f"{lemon_reach(history, 3)}"
    )
    per = ticket_weight()
    tickets = Counter(t.node for t in history.tickets)
    on_lemons = sum(tickets[lemon] for lemon in history.lemons)
    hits, others = score_reach(history, result.lemon_threshold, per)
    lines.append(
        f"non-fatal tickets (model): {len(history.tickets) - on_lemons} on other nodes, "
        f"{on_lemons} on the lemons ({', '.join(f'{n} {tickets[n]}' for n in history.lemons)}); "
        f"the score's arithmetic on the truth ({per} tickets weigh one incident, a lemon at "
        f"{result.lemon_threshold}): {hits} lemons reach it before their 2nd incident, "
        f"{others} other nodes ever"
    )
    return lines
