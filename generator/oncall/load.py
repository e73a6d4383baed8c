"""On-call load: how often each team is paged and ticketed, recorded, shown and alerted on.

Generated files (shared by all jobs, like the Alertmanager config):
- `alerts/oncall.rules.yaml`: recording rules over Prometheus' own `ALERTS` series and the
  `OncallPageLoadHigh` ticket (a team paged more than `max_pages_per_shift` times per shift);
- `alerts/oncall.test.yaml`: promtool tests feeding `ALERTS` episodes directly;
- `dashboards/oncall.json`: pages and tickets per day, per shift, by team and alert name;
- `runbooks/OncallPageLoadHigh.md`.

What counts as one page. `ALERTS{alertstate="firing"}` has one sample per series and rule
evaluation while an alert fires, so counting samples counts minutes, not pages. A page is one
*episode* of one Alertmanager notification group: Alertmanager routes by team and severity and
groups by (training_job, alertname), so eight GPUs hitting the same XID together are one
notification, one page. An episode starts at the evaluation where the group has a firing
series and had none one step earlier (`unless ... offset <step>`). That onset is recorded once
per evaluation of a group whose interval is pinned to the same step, so every episode yields
exactly one sample of the "started" series; `sum_over_time` over a shift then counts episodes.
Resolved alerts get a staleness marker from Prometheus, so a group that resolves and fires
again more than a step later is a new episode; a group that stays firing is one, however long.

The counts are of what Alertmanager notifies: firing alerts minus those its inhibit rules mute
(generator/oncall_delivered.py applies the same rules to `ALERTS`), so one incident with two
inhibited consequences is one page. Silences still count: a silence is set by a person who was
interrupted.

The shift is a rolling window (default 12h): "more than two pages in any 12 hours" does not
depend on where a team's handovers are, and it never misses a bad shift (it can flag three pages
that straddle a handover, which is still a bad night for somebody).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from grafanalib import core as g
from trainsignals.generator.dashboards.grafana_normalize import grafanalib_json, normalize_dashboard
from trainsignals.generator.dashboards.job import DATASOURCE, multi_value_variable
from trainsignals.generator.meta.names import ONCALL_ALERT
from trainsignals.generator.oncall.delivered import NOTIFIED, notified_expr
from trainsignals.generator.output.files import GENERATED_MARK, Options, dashboard_text
from trainsignals.generator.output.yaml import dump
from trainsignals.generator.signals.promql import matchers, regex
from trainsignals.generator.signals.series_notation import encode
from trainsignals.generator.spec.durations import format_duration
from trainsignals.generator.spec.job import JobSpec, Links

from trainsignals import __version__

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


# --- rules ------------------------------------------------------------------------------------


def _alerts_selector() -> str:
    """Firing alerts Alertmanager notifies: inhibited ones are not pages (oncall_delivered.py)."""
    return NOTIFIED + matchers({"severity": regex("|".join(SEVERITIES))})


def started_expr(policy: OncallPolicy) -> str:
    """Notification groups that fire now and did not one step ago, counted by team and alert."""
    group = ", ".join(NOTIFICATION_GROUP)
    firing = _alerts_selector()
    return (
        "count by (team, alertname, severity) (\n"
        f"  count by ({group}) ({firing})\n"
        "  unless\n"
        f"  count by ({group}) ({firing} offset {policy.step})\n"
        ")"
    )


def recording_rules(policy: OncallPolicy) -> list[dict]:
    return [
        {"record": NOTIFIED, "expr": notified_expr()},
        {
            "record": FIRING,
            "expr": f"count by (team, alertname, severity) ({_alerts_selector()})",
        },
        {"record": STARTED, "expr": started_expr(policy)},
        {
            "record": policy.per_shift_record,
            "expr": f"sum by (team, severity) (sum_over_time({STARTED}[{policy.shift_range}]))",
        },
    ]


def _page_load(policy: OncallPolicy) -> str:
    return policy.per_shift_record + matchers({"severity": "page"})


def alert_rule(policy: OncallPolicy, links: Links) -> dict:
    limit, shift = policy.max_pages_per_shift, policy.shift
    return {
        "alert": ALERT,
        "expr": f"{_page_load(policy)} > {limit}",
        "for": policy.for_,
        "labels": {
            "job": NAME,
            "severity": "ticket",
            # The series carries `team` already; spelled out so routing never depends on it.
            "team": "{{ $labels.team }}",
        },
        "annotations": {
            "dashboard_url": f"{links.grafana_base_url.rstrip('/')}/d/{DASHBOARD_UID}/{NAME}"
            f"?viewPanel={PANEL_IDS['pages_per_shift']}",
            "description": (
                "Team {{ $labels.team }} was paged {{ $value }} times in the last "
                f"{shift} (one page per firing episode of a training job's alert); the "
                f"budget is {limit} per {shift} shift. Find the noisiest alerts on the "
                "on-call dashboard and fix, demote or inhibit them."
            ),
            "runbook_url": f"{links.runbook_base_url.rstrip('/')}/{ALERT}.md",
            "summary": (
                f"Team {{{{ $labels.team }}}} is paged more than {limit} times per {shift} shift"
            ),
        },
    }


def rules_document(policy: OncallPolicy, links: Links) -> dict:
    return {
        "groups": [
            {
                "name": RECORDING_GROUP,
                # Pinned to the onset offset: each episode start is seen by exactly one
                # evaluation, whatever the global evaluation_interval is.
                "interval": policy.step,
                "rules": recording_rules(policy),
            },
            {"name": ALERTS_GROUP, "rules": [alert_rule(policy, links)]},
        ]
    }


# --- promtool tests ---------------------------------------------------------------------------

PAGED_TEAM = "paged-team"
QUIET_TEAM = "quiet-team"
START = 30  # minute of the first episode in every test


def _alert_series(team: str, alertname: str, severity: str, training_job: str, **extra: str) -> str:
    labels = {
        "alertname": alertname,
        "alertstate": "firing",
        "job": training_job,
        "severity": severity,
        "team": team,
        "training_job": training_job,
        **extra,
    }
    return "ALERTS" + matchers(labels)


def episodes(minutes: int, spans: list[tuple[int, int]]) -> str:
    """promtool values for an `ALERTS` series firing during [start, end) minute spans.

    When a span ends, Prometheus writes a staleness marker (the alert resolved); without it
    promtool's `_` would let the 5m lookback keep the series alive.
    """
    present = [any(start <= m < end for start, end in spans) for m in range(minutes + 1)]
    parts: list[str] = []
    m = 0
    while m <= minutes:
        run_end = m
        while run_end + 1 <= minutes and present[run_end + 1] == present[m]:
            run_end += 1
        length = run_end - m + 1
        if present[m]:
            parts.append(encode([1.0] * length))
        elif m == 0:
            parts.append(encode([None] * length))
        else:
            parts.append("stale")
            if length > 1:
                parts.append(encode([None] * (length - 1)))
        m = run_end + 1
    return " ".join(parts)


def _alert_fired(minutes: int) -> dict:
    """Never pending nor firing during the whole test."""
    return {
        "expr": f"count_over_time(ALERTS{matchers({'alertname': ALERT})}[{minutes}m])",
        "eval_time": f"{minutes}m",
        "exp_samples": [],
    }


def _load(policy: OncallPolicy, team: str, severity: str, minute: int, value: int) -> dict:
    return {
        "expr": policy.per_shift_record + matchers({"team": team, "severity": severity}),
        "eval_time": f"{minute}m",
        "exp_samples": [
            {
                "labels": policy.per_shift_record + matchers({"severity": severity, "team": team}),
                "value": value,
            }
        ],
    }


def _test(name: str, series: list[tuple[str, str]], checks: list[dict]) -> dict:
    return {
        "name": name,
        "interval": "1m",
        "input_series": [{"series": s, "values": v} for s, v in series],
        "promql_expr_test": checks,
    }


def over_the_limit_test(policy: OncallPolicy) -> dict:
    """limit + 1 separate pages inside one shift, over two jobs and two alerts: it fires."""
    shift = policy.shift_seconds // 60
    pages = policy.max_pages_per_shift + 1
    gap = shift // (pages + 1)
    onsets = [START + i * gap for i in range(pages)]
    last = onsets[-1]
    fires_at = last + policy.for_seconds // 60 + 2
    minutes = fires_at + 1
    spans = [(onset, onset + gap // 2) for onset in onsets]
    # Two jobs' alerts: the team's load is what counts, not one alert's; the alert of job-0
    # resolves and fires again, which is two pages.
    series = [
        (
            _alert_series(PAGED_TEAM, "TrainingStalled", "page", "job-0"),
            episodes(minutes, spans[::2]),
        ),
        (_alert_series(PAGED_TEAM, "NodeDown", "page", "job-1"), episodes(minutes, spans[1::2])),
    ]
    series.append(
        (_alert_series(QUIET_TEAM, "NodeDown", "page", "other-job"), episodes(minutes, spans[:1]))
    )
    firing = matchers({"alertname": ALERT, "alertstate": "firing"})
    expected = matchers(
        {
            "alertname": ALERT,
            "alertstate": "firing",
            "job": NAME,
            "severity": "ticket",
            "team": PAGED_TEAM,
        }
    )
    return _test(
        f"{ALERT} fires when a team is paged {pages} separate times in one {policy.shift} shift",
        series,
        [
            {
                "expr": f"ALERTS{matchers({'alertname': ALERT})}",
                "eval_time": f"{last - 1}m",
                "exp_samples": [],
            },
            _load(policy, PAGED_TEAM, "page", last, pages),
            _load(policy, QUIET_TEAM, "page", last, 1),
            {
                "expr": f"ALERTS{firing}",
                "eval_time": f"{fires_at}m",
                "exp_samples": [{"labels": f"ALERTS{expected}", "value": 1}],
            },
        ],
    )


def long_episode_test(policy: OncallPolicy) -> dict:
    """One page firing for most of a shift, on eight GPUs at once: one page, no ticket."""
    shift = policy.shift_seconds // 60
    end = START + 3 * shift // 4
    minutes = end + 30
    series = [
        (
            _alert_series(
                PAGED_TEAM, "GpuXidCritical", "page", "job-0", node="node-0", gpu=str(gpu)
            ),
            episodes(minutes, [(START, end)]),
        )
        for gpu in range(8)
    ]
    return _test(
        f"one page episode firing for hours on eight GPUs is one page and no {ALERT}",
        series,
        [_load(policy, PAGED_TEAM, "page", end - 1, 1), _alert_fired(minutes)],
    )


def tickets_test(policy: OncallPolicy) -> dict:
    """More tickets than the page limit inside a shift: counted as tickets, never as pages."""
    shift = policy.shift_seconds // 60
    tickets = policy.max_pages_per_shift + 2
    gap = shift // (tickets + 1)
    onsets = [START + i * gap for i in range(tickets)]
    minutes = onsets[-1] + policy.for_seconds // 60 + 10
    series = [
        (
            _alert_series(PAGED_TEAM, "MfuBelowFloor", "ticket", "job-0"),
            episodes(minutes, [(onset, onset + gap // 2) for onset in onsets]),
        )
    ]
    return _test(
        f"tickets are counted but never count as pages for {ALERT}",
        series,
        [
            _load(policy, PAGED_TEAM, "ticket", onsets[-1], tickets),
            {
                "expr": policy.per_shift_record + matchers({"severity": "page"}),
                "eval_time": f"{onsets[-1]}m",
                "exp_samples": [],
            },
            _alert_fired(minutes),
        ],
    )


def spread_out_test(policy: OncallPolicy) -> dict:
    """limit + 1 pages further apart than a shift can hold: the load peaks at the limit."""
    shift = policy.shift_seconds // 60
    pages = policy.max_pages_per_shift + 1
    # Any window of one shift holds at most `limit` onsets spaced this far apart.
    gap = math.ceil(1.1 * shift / max(policy.max_pages_per_shift, 1))
    onsets = [START + i * gap for i in range(pages)]
    minutes = onsets[-1] + policy.for_seconds // 60 + 10
    series = [
        (
            _alert_series(PAGED_TEAM, "TrainingStalled", "page", "job-0"),
            episodes(minutes, [(onset, onset + 20) for onset in onsets]),
        )
    ]
    peak = min(policy.max_pages_per_shift, pages)
    load = policy.per_shift_record + matchers({"severity": "page", "team": PAGED_TEAM})
    return _test(
        f"{pages} pages spread over more than one {policy.shift} shift stay within the budget",
        series,
        [
            {
                "expr": f"max_over_time({load}[{minutes}m])",
                "eval_time": f"{minutes}m",
                "exp_samples": [
                    {
                        "labels": matchers({"severity": "page", "team": PAGED_TEAM}),
                        "value": peak,
                    }
                ],
            },
            _alert_fired(minutes),
        ],
    )


def rule_tests(policy: OncallPolicy) -> dict:
    return {
        "rule_files": [f"{NAME}.rules.yaml"],
        "evaluation_interval": "1m",
        "group_eval_order": [RECORDING_GROUP, ALERTS_GROUP],
        "tests": [
            over_the_limit_test(policy),
            long_episode_test(policy),
            tickets_test(policy),
            spread_out_test(policy),
        ],
    }


# --- dashboard --------------------------------------------------------------------------------

SCHEMA_VERSION = 39  # as the job dashboards
TEAM = regex("$team")
GREEN, RED, BLUE = "green", "red", "blue"


class _Grid:
    """Left-to-right placement on Grafana's 24-column grid; row ids from 100."""

    def __init__(self) -> None:
        self.x = self.y = self.line = 0
        self.row_id = 100

    def place(self, w: int, h: int) -> g.GridPos:
        if self.x + w > 24:
            self.newline()
        pos = g.GridPos(h=h, w=w, x=self.x, y=self.y)
        self.x += w
        self.line = max(self.line, h)
        return pos

    def newline(self) -> None:
        self.y += self.line
        self.x = self.line = 0

    def row(self, title: str) -> g.RowPanel:
        self.newline()
        self.row_id += 1
        row = g.RowPanel(title=title, id=self.row_id, gridPos=self.place(24, 1))
        self.newline()
        return row


def _target(expr: str, legend: str = "", **kwargs: object) -> g.Target:
    return g.Target(
        expr=expr, legendFormat=legend, refId="A", datasource=DATASOURCE, intervalFactor=1, **kwargs
    )


def _limit_steps(limit: int) -> list[g.Threshold]:
    # Grafana colours a step from its value up (>=); the alert is `> limit`.
    return [g.Threshold(GREEN, 0, 0.0), g.Threshold(RED, 1, math.nextafter(limit, math.inf))]


def _started(severity: str) -> str:
    return STARTED + matchers({"severity": severity, "team": TEAM})


def _per_day(severity: str, by: str) -> str:
    return f"sum by ({by}) (sum_over_time({_started(severity)}[1d]))"


def _top(severity: str) -> str:
    return f"topk(10, sum by (team, alertname) (sum_over_time({_started(severity)}[7d])))"


class _Builder:
    def __init__(self, policy: OncallPolicy, links: Links) -> None:
        self.policy = policy
        self.links = links
        self.grid = _Grid()

    def runbook_link(self) -> g.DashboardLink:
        return g.DashboardLink(
            type="link",
            title=f"Runbook: {ALERT}",
            uri=f"{self.links.runbook_base_url.rstrip('/')}/{ALERT}.md",
            icon="doc",
            tooltip=f"What to do when {ALERT} fires",
            targetBlank=True,
            keepTime=False,
        )

    def stat(
        self,
        key: str,
        title: str,
        description: str,
        expr: str,
        legend: str,
        thresholds: list[g.Threshold],
        links: list[g.DashboardLink] | None = None,
    ) -> g.Stat:
        return g.Stat(
            id=PANEL_IDS[key],
            title=title,
            description=description,
            targets=[_target(expr, legend)],
            dataSource=DATASOURCE,
            gridPos=self.grid.place(8, 5),
            format="short",
            thresholds=thresholds,
            color={"mode": "thresholds"},
            reduceCalc="lastNotNull",
            graphMode="none",
            noValue="0",
            textMode="value_and_name",
            links=links or [],
            maxDataPoints=None,
        )

    def series(
        self,
        key: str,
        title: str,
        description: str,
        target: g.Target,
        *,
        bars: bool = False,
        thresholds: list[g.Threshold] | None = None,
        links: list[g.DashboardLink] | None = None,
    ) -> g.TimeSeries:
        return g.TimeSeries(
            id=PANEL_IDS[key],
            title=title,
            description=description,
            targets=[target],
            dataSource=DATASOURCE,
            gridPos=self.grid.place(12, 8),
            unit="short",
            drawStyle="bars" if bars else "line",
            fillOpacity=80 if bars else 10,
            stacking={"mode": "normal" if bars else "none", "group": "A"},
            thresholds=thresholds or [g.Threshold(BLUE, 0, 0.0)],
            thresholdsStyleMode="dashed" if thresholds else "off",
            legendDisplayMode="list",
            tooltipMode="multi",
            tooltipSort="desc",
            links=links or [],
            maxDataPoints=None,
        )

    def table(
        self, key: str, title: str, description: str, expr: str, sort: str = "Value"
    ) -> g.Table:
        return g.Table(
            id=PANEL_IDS[key],
            title=title,
            description=description,
            targets=[_target(expr, format="table", instant=True)],
            dataSource=DATASOURCE,
            gridPos=self.grid.place(8, 8),
            sortBy=[g.TableSortByField(displayName=sort, desc=True)],
            maxDataPoints=None,
            transformations=[{"id": "organize", "options": {"excludeByName": {"Time": True}}}],
        )

    def per_day(self, key: str, severity: str, by: str) -> g.TimeSeries:
        what = f"{severity}s"
        return self.series(
            key,
            f"{what.capitalize()} per day by {by}",
            f"{what.capitalize()} started per UTC day: one per firing episode of a training "
            "job's alert (Alertmanager's notification group), however long it fires.",
            # One point per day: the step is at least a day, each point sums that day.
            _target(_per_day(severity, by), "{{" + by + "}}", interval="1d"),
            bars=True,
        )

    def panels(self) -> list[g.Panel]:
        p, limit = self.policy, self.policy.max_pages_per_shift
        load = p.per_shift_record
        per_shift = (
            f"rolling {p.shift} window (the shift); one per firing episode of a training "
            "job's alert"
        )
        return [
            self.stat(
                "pages_this_shift",
                f"Pages in the last {p.shift}",
                f"Pages per team in the last {p.shift}; red above the budget of {limit} ({ALERT}).",
                load + matchers({"severity": "page", "team": TEAM}),
                "{{team}}",
                _limit_steps(limit),
                [self.runbook_link()],
            ),
            self.stat(
                "tickets_this_shift",
                f"Tickets in the last {p.shift}",
                f"Tickets per team in the last {p.shift}.",
                load + matchers({"severity": "ticket", "team": TEAM}),
                "{{team}}",
                [g.Threshold(BLUE, 0, 0.0)],
            ),
            self.stat(
                "firing_now",
                "Firing now",
                "Alerts firing now per team and severity (series, before Alertmanager "
                "grouping, silences and inhibition).",
                f"sum by (team, severity) ({FIRING}{matchers({'team': TEAM})})",
                "{{team}} {{severity}}",
                [g.Threshold(GREEN, 0, 0.0)],
            ),
            self.grid.row("Per day"),
            self.per_day("pages_per_day", "page", "team"),
            self.per_day("tickets_per_day", "ticket", "team"),
            self.grid.row("Per shift"),
            self.series(
                "pages_per_shift",
                f"Pages per {p.shift} shift vs. the budget",
                f"Pages per team in a {per_shift}. Dashed line: the budget of {limit} "
                f"per shift; above it {ALERT} opens a ticket.",
                _target(load + matchers({"severity": "page", "team": TEAM}), "{{team}}"),
                thresholds=_limit_steps(limit),
                links=[self.runbook_link()],
            ),
            self.series(
                "tickets_per_shift",
                f"Tickets per {p.shift} shift",
                f"Tickets per team in a {per_shift}.",
                _target(load + matchers({"severity": "ticket", "team": TEAM}), "{{team}}"),
            ),
            self.grid.row("By alert name"),
            self.per_day("pages_per_day_by_alert", "page", "alertname"),
            self.per_day("tickets_per_day_by_alert", "ticket", "alertname"),
            self.table(
                "top_pages",
                "Top alerts by pages (7d)",
                "The ten alert names that paged most in the last 7 days: fix, demote to "
                "ticket or inhibit these first.",
                _top("page"),
            ),
            self.table(
                "top_tickets",
                "Top alerts by tickets (7d)",
                "The ten alert names that opened most tickets in the last 7 days.",
                _top("ticket"),
            ),
            self.table(
                "firing_by_alert",
                "Firing now by team and alert",
                "Alert series firing now, per team, alert name and severity.",
                f"{FIRING}{matchers({'team': TEAM})}",
            ),
        ]


def build_dashboard(policy: OncallPolicy, links: Links, description: str) -> dict:
    """The on-call dashboard as Grafana JSON (schema-valid, deterministic)."""
    return normalize_dashboard(raw_dashboard(policy, links, description))


def raw_dashboard(policy: OncallPolicy, links: Links, description: str) -> dict:
    builder = _Builder(policy, links)
    dashboard = g.Dashboard(
        title="On-call load",
        uid=DASHBOARD_UID,
        description=description,
        tags=["trainsignals", f"generator:{__version__}", NAME],
        editable=False,
        graphTooltip=g.GRAPH_TOOLTIP_MODE_SHARED_CROSSHAIR,
        schemaVersion=SCHEMA_VERSION,
        time=g.Time("now-7d", "now"),
        refresh="5m",
        timezone="utc",
        panels=builder.panels(),
        links=[builder.runbook_link()],
        templating=g.Templating(
            list=[
                g.Template(
                    name="datasource", label="Data source", type="datasource", query="prometheus"
                ),
                multi_value_variable(
                    "team", "Team", f"label_values({policy.per_shift_record}, team)"
                ),
            ]
        ),
        annotations=g.Annotations(
            list=[
                {
                    "name": "Pages",
                    "datasource": DATASOURCE,
                    "enable": True,
                    "hide": False,
                    "iconColor": RED,
                    "expr": "ALERTS"
                    + matchers({"alertstate": "firing", "severity": "page", "team": TEAM}),
                    "titleFormat": "{{alertname}}",
                    "textFormat": "{{team}}: {{alertname}} ({{training_job}})",
                    "tagKeys": "team",
                    "useValueForTime": False,
                }
            ]
        ),
    )
    return grafanalib_json(dashboard)


# --- runbook ----------------------------------------------------------------------------------


def runbook(policy: OncallPolicy, links: Links, specs: list[JobSpec], header: str) -> str:
    limit, shift = policy.max_pages_per_shift, policy.shift
    dashboard = f"{links.grafana_base_url.rstrip('/')}/d/{DASHBOARD_UID}/{NAME}"
    teams: dict[str, list[JobSpec]] = {}
    for spec in sorted(specs, key=lambda s: s.name):
        teams.setdefault(spec.team, []).append(spec)
    rows = [
        f"| {team} | {', '.join(s.name for s in team_specs)} | "
        f"{', '.join(sorted({s.rotation for s in team_specs if s.rotation})) or '(none)'} |"
        for team, team_specs in sorted(teams.items())
    ]
    return "\n".join(
        [
            header,
            "",
            f"# {ALERT}",
            "",
            f"**Severity:** ticket. **Fires when** a team is paged more than {limit} times in "
            f"any {shift} window (the shift) for {policy.for_}.",
            "",
            "## What it means",
            "",
            MEANING,
            "",
            "A page is one firing episode of one training job's alert (Alertmanager's "
            "notification group: team, severity, training_job, alertname). An alert firing for "
            "hours is one page; eight GPUs failing together are one page; the same alert "
            "resolving and firing again is two. Only what Alertmanager notifies counts: "
            f"`{NOTIFIED}` is `ALERTS` minus what the inhibit rules mute (one incident pages "
            "once); silenced alerts still count.",
            "",
            "## Triage",
            "",
            f"1. Open the [on-call dashboard]({dashboard}) and pick the team.",
            "2. *Top alerts by pages (7d)*: one or two alert names usually carry the load.",
            "3. For each of them, decide:",
            "   - a real fault that keeps recurring: fix its cause (a bad node, a flaky "
            "storage mount), and drain or replace the hardware;",
            "   - not urgent (nobody had to act within the hour): demote it to a ticket in the "
            "job's spec, `alerts: {AlertName: ticket}`, and regenerate;",
            "   - a symptom of another alert that also paged: add an inhibition rule "
            "(`generator/alertmanager.py`), so one fault pages once;",
            "   - too sensitive: raise its threshold or window in the spec's `objectives`.",
            "4. If the load is genuine and lasting, share it: a second rotation or fewer jobs "
            "per team.",
            "",
            "## PromQL",
            "",
            "Episode starts (recorded each step, one sample per episode):",
            "",
            "```promql",
            started_expr(policy),
            "```",
            "",
            f'Pages per shift: `{policy.per_shift_record}{{severity="page"}}`, the sum of '
            f"those starts over {shift}. Alert: `{alert_rule(policy, links)['expr']}`.",
            "",
            "## Teams",
            "",
            "| team | jobs | rotation |",
            "|---|---|---|",
            *rows,
            "",
        ]
    )


# --- files ------------------------------------------------------------------------------------


def oncall_files(
    specs: list[tuple[JobSpec, str]],
    options: Options | None = None,
    policy: OncallPolicy | None = None,
) -> dict[str, str]:
    """The on-call rules, tests, dashboard and runbook for all these specs.

    Links (runbook and Grafana base URLs) come from the first spec; `policy` defaults to a
    12h shift with a budget of two pages, scaled by `options.time_scale`.
    """
    if any(spec.name == NAME for spec, _ in specs):
        raise ValueError(
            f"a job may not be named {NAME!r}: the on-call files use that name; rename the job"
        )
    options = options or Options()
    if policy is None:
        policy = OncallPolicy(time_scale=options.time_scale)
    links = specs[0][0].links if specs else Links()
    sources = ", ".join(source for _, source in specs) or "no spec"
    mark = (
        f"{GENERATED_MARK} {__version__} from {sources} (on-call policy: at most "
        f"{policy.max_pages_per_shift} pages per {policy.shift} shift)."
    )
    header = f"# {mark}\n# Do not edit: change the specs or generator/oncall.py and regenerate.\n"
    files = {f"alerts/{NAME}.rules.yaml": dump(rules_document(policy, links), header)}
    if options.with_tests and policy.time_scale == 1:
        files[f"alerts/{NAME}.test.yaml"] = dump(rule_tests(policy), header)
    if options.with_dashboards:
        dashboard = build_dashboard(
            policy, links, f"Pages and tickets per team. {mark} Do not edit."
        )
        files[f"dashboards/{NAME}.json"] = dashboard_text(dashboard)
    files[f"runbooks/{ALERT}.md"] = runbook(
        policy, links, [spec for spec, _ in specs], f"<!-- {mark} Do not edit. -->"
    )
    return files
