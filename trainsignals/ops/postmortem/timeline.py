"""The incident timeline from `ALERTS`: each alert instance's pending, firing and resolved
times, and what detection looked like (earliest sign, first page, what came later)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

# ALERTS labels that describe the sample, not the alert instance.
STATE_LABELS = {"__name__", "alertstate"}


def runs(times: Sequence[float], step: float) -> list[tuple[float, float]]:
    """Consecutive sample times grouped into (first, last) runs; a missing step is a gap."""
    out: list[tuple[float, float]] = []
    for t in sorted(times):
        if out and t - out[-1][1] <= 1.5 * step:
            out[-1] = (out[-1][0], t)
        else:
            out.append((t, t))
    return out


@dataclass
class AlertEvent:
    """One alert instance (alert name + labels) within the window."""

    alertname: str
    labels: dict[str, str]  # without alertname, alertstate
    severity: str
    first_pending: float | None
    first_firing: float | None
    resolved: float | None  # None: still pending/firing at the end of the window
    episodes: int  # firing runs; more than one means it resolved and fired again
    active_at_start: bool  # already pending/firing at the window's first sample
    # Start of the pending-and-firing run that led to the first firing: this incident's first
    # sign. An earlier pending that resolved without firing (a start-up blip) is not.
    first_sign: float | None = None
    firing_times: tuple[float, ...] = ()  # query times at which it was firing
    # Set by delivery.mark_delivery: None when Alertmanager's inhibition rules and
    # silences were not available; else the first firing time no rule or silence suppressed.
    first_delivered: float | None = None
    delivery_known: bool = False
    suppressed_by: str = ""  # what suppressed it (while it did), for the timeline's notes

    @property
    def notified(self) -> float | None:
        """When its notification could go out: its first unsuppressed firing time, or (with no
        Alertmanager data) its first firing."""
        return self.first_delivered if self.delivery_known else self.first_firing

    @property
    def paged(self) -> bool:
        """A page that reached a pager: severity page, and not suppressed throughout."""
        return self.severity == "page" and self.notified is not None

    @property
    def sort_key(self) -> tuple[float, str]:
        first = self.first_pending if self.first_pending is not None else self.first_firing
        return (first or 0.0, self.alertname)

    @property
    def label_text(self) -> str:
        skip = {"severity", "team", "training_job", "job"}
        shown = {k: v for k, v in sorted(self.labels.items()) if k not in skip}
        return ", ".join(f"{k}={v}" for k, v in shown.items())


def build_timeline(result: list[dict], start: float, end: float, step: float) -> list[AlertEvent]:
    """Alert events from a query_range result of ALERTS (both alertstates), sorted by onset.

    A sample at query time t means the alert was in that state at some evaluation in
    (t - step, t]; Prometheus writes a stale marker when an alert resolves, so a run of samples
    ends within a step of the resolution. `resolved` is the first query time without it.
    """
    grouped: dict[tuple, dict[str, list[float]]] = {}
    labels_of: dict[tuple, dict[str, str]] = {}
    for series in result:
        metric = series["metric"]
        labels = {k: v for k, v in metric.items() if k not in STATE_LABELS}
        key = tuple(sorted(labels.items()))
        labels_of[key] = labels
        state = metric.get("alertstate", "firing")
        times = [float(t) for t, _ in series["values"]]
        grouped.setdefault(key, {"pending": [], "firing": []})[state].extend(times)
    events = []
    for key, states in grouped.items():
        labels = dict(labels_of[key])
        alertname = labels.pop("alertname", "?")
        all_runs = runs(states["pending"] + states["firing"], step)
        last = all_runs[-1][1]
        first_firing = min(states["firing"], default=None)
        first_sign = next(
            (a for a, b in all_runs if first_firing is not None and a <= first_firing <= b), None
        )
        resolved = None if last >= end - 0.5 * step else min(last + step, end)
        events.append(
            AlertEvent(
                alertname=alertname,
                labels=labels,
                severity=labels.get("severity", "?"),
                first_pending=min(states["pending"], default=None),
                first_firing=first_firing,
                resolved=resolved,
                episodes=len(runs(states["firing"], step)),
                active_at_start=all_runs[0][0] <= start + 0.5 * step,
                first_sign=first_sign,
                firing_times=tuple(sorted(states["firing"])),
            )
        )
    return sorted(events, key=lambda e: e.sort_key)


@dataclass(frozen=True)
class Detection:
    # The first sign of the alerts that fired (the start of the pending run that led to each
    # first firing), or the window's start when none fired.
    earliest_sign: float
    first_page: AlertEvent | None  # the first page that reached a pager
    time_to_page: float | None
    late: list[tuple[AlertEvent, float]]  # fired after the first page: (event, seconds later)
    tickets: list[AlertEvent]  # fired as tickets only
    suppressed: list[AlertEvent]  # pages Alertmanager inhibited or silenced throughout


def detection(events: list[AlertEvent], start: float) -> Detection:
    signs = [e.first_sign for e in events if e.first_sign is not None]
    earliest = min(signs, default=start)
    pages = [e for e in events if e.paged]
    first_page = min(pages, key=lambda e: e.notified or 0.0, default=None)
    fired = [e for e in events if e.first_firing is not None]
    late = []
    if first_page is not None and first_page.notified is not None:
        late = [
            (e, e.first_firing - first_page.notified)
            for e in fired
            if e is not first_page and e.first_firing is not None
        ]
    return Detection(
        earliest_sign=earliest,
        first_page=first_page,
        time_to_page=(
            first_page.notified - earliest
            if first_page is not None and first_page.notified is not None
            else None
        ),
        late=late,
        tickets=[e for e in fired if e.severity == "ticket"],
        suppressed=[e for e in fired if e.severity == "page" and not e.paged],
    )


def _reads_other_alerts(name: str) -> bool:
    """A meta or input alert (AlertInputMissing, the pipeline's own): it goes pending with the
    fault it did not cause, as the inputs of a dead rank vanish."""
    from trainsignals.generator.alerts.catalog import BY_NAME
    from trainsignals.generator.spec.monitoring import META_ALERT_NAMES

    found = BY_NAME.get(name)
    return name in META_ALERT_NAMES or (found is not None and found.reads_other_alerts)


def onset_name(events: list[AlertEvent], earliest: float, step: float) -> str | None:
    """The alert the onset line names: of those whose first sign came within a query step of
    the earliest, the one that explains the incident: a page before a ticket, a fault's own
    alert before a meta or input alert (AlertInputMissing went pending with GpuLost)."""
    near = [e for e in events if e.first_sign is not None and e.first_sign - earliest <= step]
    if not near:
        return None
    best = min(
        near,
        key=lambda e: (
            e.severity != "page",
            _reads_other_alerts(e.alertname),
            e.first_sign,
            e.alertname,
        ),
    )
    return best.alertname
