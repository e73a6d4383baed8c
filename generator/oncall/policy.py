"""The on-call policy (shift, page budget), its defaults and the names the on-call files share."""

from __future__ import annotations

from dataclasses import dataclass

from trainsignals.generator.spec.durations import format_duration
from trainsignals.generator.spec.pipeline_alerts import ONCALL_ALERT

NAME = "oncall"  # file stem, dashboard slug and the `job` label of the on-call alert
ALERT = ONCALL_ALERT
MEANING = (
    "The team's rotation is carrying more pages than a person can handle well. The SRE "
    'book ("Being On-Call") budgets at most two incidents per 12-hour shift: each '
    "needs time to fix, write up and follow up. Above that, pages get rushed, "
    "follow-ups get dropped, and the pager is on its way to being ignored."
)
DASHBOARD_UID = "ts-oncall"
RECORDING_GROUP = "trainsignals-oncall-recording"
ALERTS_GROUP = "trainsignals-oncall-alerts"
SEVERITIES = ("page", "ticket")

DEFAULT_SHIFT_SECONDS = 12 * 3600
# The SRE book (chapter "Being On-Call"): at most two incidents per 12-hour shift.
DEFAULT_MAX_PAGES_PER_SHIFT = 2
# The load stays above the limit until the oldest page of the shift ages out, so this only
# waits out a momentary recount (a Prometheus restart); it is a ticket, nobody waits on it.
DEFAULT_FOR_SECONDS = 15 * 60
ONSET_STEP_SECONDS = 60  # the recording group's interval and the onset `offset`

# Alertmanager's notification group (alertmanager.py: route by team and severity, group by
# training_job and alertname): one firing episode of it is one page or one ticket.
NOTIFICATION_GROUP = ("team", "severity", "training_job", "alertname")

FIRING = "team_alertname_severity:trainsignals_alerts_firing:count"
STARTED = "team_alertname_severity:trainsignals_alerts_started:count"

PANEL_IDS: dict[str, int] = {
    "pages_this_shift": 1,
    "tickets_this_shift": 2,
    "firing_now": 3,
    "pages_per_day": 10,
    "tickets_per_day": 11,
    "pages_per_shift": 20,
    "tickets_per_shift": 21,
    "pages_per_day_by_alert": 30,
    "tickets_per_day_by_alert": 31,
    "top_pages": 32,
    "top_tickets": 33,
    "firing_by_alert": 34,
}


@dataclass(frozen=True)
class OncallPolicy:
    """How long a shift is and how many pages one may hold; the generator's defaults.

    `time_scale` divides the shift, the `for` and the onset step, as `Options.time_scale` does
    for the job rules (end-to-end tests only).
    """

    shift_seconds: int = DEFAULT_SHIFT_SECONDS
    max_pages_per_shift: int = DEFAULT_MAX_PAGES_PER_SHIFT
    for_seconds: int = DEFAULT_FOR_SECONDS
    time_scale: float = 1.0

    def __post_init__(self) -> None:
        if self.shift_seconds < 3600:
            raise ValueError(f"shift_seconds={self.shift_seconds}: a shift is at least 1h")
        if self.max_pages_per_shift < 0:
            raise ValueError("max_pages_per_shift must be 0 or more")

    @property
    def shift(self) -> str:
        """The nominal shift as a duration ("12h"); record names use it."""
        return format_duration(self.shift_seconds)

    @property
    def shift_range(self) -> str:
        return format_duration(self.shift_seconds / self.time_scale)

    @property
    def step(self) -> str:
        return format_duration(ONSET_STEP_SECONDS / self.time_scale)

    @property
    def for_(self) -> str:
        return format_duration(self.for_seconds / self.time_scale)

    @property
    def per_shift_record(self) -> str:
        return f"team_severity:trainsignals_alerts_started:sum{self.shift}"
