"""Score a replay against its ground truth: what had to page, once, for as long as it lasted.

What must page exactly once depends on the recovery mode the rules were generated for:

- `auto_restart`: the incidents automation does not fix (`history.INCIDENTS`). A restart that
  heals the job is no incident; its cause is a ticket naming the node (and GPU).
- `manual`: those incidents, and every unexpected interruption besides: nothing is trusted to
  heal the job, so each crash, lost GPU or node is an incident whose cause pages the job's team.
  Planned stops are no incident (a human made them), nor are the restarts inside an incident
  (a crash loop is one incident, however many crashes).

Each of those must get one page (one notification group: PagerDuty deduplicates by group key),
and that page must stay open until the incident is healed: a page about it (in its window)
that resolves while it lasts tells PagerDuty "resolved" about a job that is still down, and
is counted as `resolved_early` whether or not it pages again (a second page is an extra page
too).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from .history import MINUTE, THERMAL_LEAD_S, History, Interruption
from .routing import Notification
from .run import EPOCH, Replay

PAGE_GRACE_S = 30 * MINUTE  # a page up to 30 min after an incident ends still belongs to it
# An interruption's page comes within minutes (its cause alerts' `for`); interruptions are
# 40 minutes apart at least, so its window stays clear of the next one.
INTERRUPTION_GRACE_S = 15 * MINUTE


@dataclass(frozen=True)
class Expected:
    """Something that must page exactly once. Times are seconds from the run start."""

    name: str  # incident kind, or the interruption's cause
    lo: int  # its page may come from here ...
    hi: int  # ... to here
    healed_s: int  # its page must not resolve before this
    incident: bool  # an incident automation does not fix (else an interruption, manual mode)


def expected_pages(history: History, mode: str) -> list[Expected]:
    expected = [
        Expected(i.kind, i.start_s, i.end_s + PAGE_GRACE_S, i.healed_s, True)
        for i in history.incidents
    ]
    if mode == "manual":
        for fault in history.interruptions:
            if fault.incident or fault.scope == "planned":
                continue
            lead = THERMAL_LEAD_S if fault.cause == "gpu_thermal" else 0
            expected.append(
                Expected(
                    fault.cause,
                    fault.fault_s - lead,
                    fault.first_step_s + INTERRUPTION_GRACE_S,
                    fault.up_s,  # processes back: the node is drained, the targets are up
                    False,
                )
            )
    return sorted(expected, key=lambda e: (e.lo, e.hi))


@dataclass
class Score:
    mode: str
    pages: int
    nonrecovering: int
    extra_pages: int
    ticketed: int
    hardware: int
    ettr_error_pts: float
    incidents: int = 0
    time_to_page: dict[str, int | None] = field(default_factory=dict)
    pages_per_incident: dict[str, int] = field(default_factory=dict)
    # Interruptions that had to page (manual mode), by cause: [expected, paged exactly once].
    per_cause: dict[str, list[int]] = field(default_factory=dict)
    missed: list[Expected] = field(default_factory=list)  # no page at all
    resolved_early: list[tuple[Expected, Notification]] = field(default_factory=list)
    unticketed: list[Interruption] = field(default_factory=list)
    uuid_named: int = 0
    unclaimed: list[Notification] = field(default_factory=list)  # the extra pages

    @property
    def hardware_key(self) -> str:
        # auto_restart: a ticket to the infra team; manual: the page (or a ticket) names it.
        return "hw_faults_ticketed" if self.mode == "auto_restart" else "hw_faults_named"

    def last_line(self) -> str:
        error = "nan" if math.isnan(self.ettr_error_pts) else f"{self.ettr_error_pts:.2f}"
        if self.mode == "manual":
            what = (
                f"(every unexpected interruption {self.nonrecovering - self.incidents} "
                f"+ incidents {self.incidents}, one page each)"
            )
        else:
            what = "(incidents automation does not fix, one page each)"
        return (
            f"fleet: mode={self.mode} pages={self.pages} nonrecovering={self.nonrecovering} "
            f"{what} extra_pages={self.extra_pages} "
            f"resolved_early={len(self.resolved_early)} "
            f"{self.hardware_key}={self.ticketed}/{self.hardware} ettr_error_pts={error}"
        )


def _names(labels: dict[str, str], fault: Interruption) -> bool:
    if labels.get("node") != fault.node:
        return False
    return fault.gpu is None or labels.get("gpu") == str(fault.gpu)


def score(replay: Replay) -> Score:
    history = replay.history
    mode = replay.mode
    pages = [n for n in replay.notifications if n.severity == "page"]
    claimed: set[int] = set()
    time_to_page: dict[str, int | None] = {}
    per_incident: dict[str, int] = {}
    per_cause: dict[str, list[int]] = {}
    missed: list[Expected] = []
    early: list[tuple[Expected, Notification]] = []
    expected = expected_pages(history, mode)
    for event in expected:  # in time order: each takes the first page in its window left
        lo, hi = EPOCH + event.lo, EPOCH + event.hi
        mine = [i for i, n in enumerate(pages) if lo <= n.at <= hi and i not in claimed]
        if event.incident:
            per_incident[event.name] = len(mine)
            time_to_page[event.name] = pages[mine[0]].at - lo if mine else None
        else:
            row = per_cause.setdefault(event.name, [0, 0])
            row[0] += 1
            row[1] += len(mine) == 1
        if not mine:
            missed.append(event)
            continue
        claimed.add(mine[0])
        # Its page, or a later one about it, told PagerDuty "resolved" while it lasted.
        early += [
            (event, pages[i])
            for i in mine
            if pages[i].resolved is not None and pages[i].resolved < EPOCH + event.healed_s
        ]

    # Hardware must be named: auto_restart, in a ticket; manual, in its page or a ticket.
    kinds = ("ticket",) if mode == "auto_restart" else ("ticket", "page")
    notes = [
        (at, labels) for n in replay.notifications if n.severity in kinds for at, labels in n.alerts
    ]
    unticketed: list[Interruption] = []
    uuid_named = 0
    for fault in history.hardware_faults:
        lo = EPOCH + fault.fault_s - THERMAL_LEAD_S - 600
        hi = EPOCH + fault.up_s + 3600
        named = [labels for at, labels in notes if lo <= at <= hi and _names(labels, fault)]
        if not named:
            unticketed.append(fault)
        elif any(labels.get("uuid") == fault.uuid for labels in named if fault.uuid):
            uuid_named += 1
    error = math.nan
    if replay.ettr_measured is not None:
        error = abs(replay.ettr_measured - replay.truth.ettr) * 100
    hardware = len(history.hardware_faults)
    return Score(
        mode=mode,
        pages=len(pages),
        nonrecovering=len(expected),
        extra_pages=len(pages) - len(claimed),
        ticketed=hardware - len(unticketed),
        hardware=hardware,
        ettr_error_pts=error,
        incidents=len(history.incidents),
        time_to_page=time_to_page,
        pages_per_incident=per_incident,
        per_cause=per_cause,
        missed=missed,
        resolved_early=early,
        unticketed=unticketed,
        uuid_named=uuid_named,
        unclaimed=[n for i, n in enumerate(pages) if i not in claimed],
    )
