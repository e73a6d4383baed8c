"""Promtool tests of the on-call rules, fed with `ALERTS` episodes directly."""

from __future__ import annotations

import math

from trainsignals.generator.alerts.catalog import ALERTS as JOB_ALERTS
from trainsignals.generator.alerts.catalog import BY_NAME, explained
from trainsignals.generator.alerts.definitions.gpu_faults import GPU_XID_CRITICAL
from trainsignals.generator.alerts.definitions.reachability import NODE_DOWN
from trainsignals.generator.alerts.definitions.training import MFU_BELOW_FLOOR, TRAINING_STALLED
from trainsignals.generator.alerts.model import MODES
from trainsignals.generator.oncall.delivered import NOTIFIED
from trainsignals.generator.oncall.policy import (
    ALERT,
    ALERTS_GROUP,
    NAME,
    RECORDING_GROUP,
    OncallPolicy,
)
from trainsignals.generator.signals.promql import matchers
from trainsignals.generator.testkit.series_notation import encode

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
            _alert_series(PAGED_TEAM, TRAINING_STALLED, "page", "job-0"),
            episodes(minutes, spans[::2]),
        ),
        (_alert_series(PAGED_TEAM, NODE_DOWN, "page", "job-1"), episodes(minutes, spans[1::2])),
    ]
    series.append(
        (_alert_series(QUIET_TEAM, NODE_DOWN, "page", "other-job"), episodes(minutes, spans[:1]))
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
                PAGED_TEAM, GPU_XID_CRITICAL, "page", "job-0", node="node-0", gpu=str(gpu)
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
            _alert_series(PAGED_TEAM, MFU_BELOW_FLOOR, "ticket", "job-0"),
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
            _alert_series(PAGED_TEAM, TRAINING_STALLED, "page", "job-0"),
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


def _muted_pairs() -> list[tuple[str, str, str, str, dict[str, str], tuple[str, ...]]]:
    """(cause, severity, explained, severity, the explained alert's labels, equal labels) for
    every relation the job alerts declare (`explains=`), in each recovery mode where the
    cause may mute it: a page mutes anything, a ticket only tickets."""
    pairs = []
    for cause in JOB_ALERTS:
        for explains in cause.explains:
            for target in explained(explains, (cause.name,)):
                for mode in MODES:
                    src = cause.severity_for(mode)
                    dst = BY_NAME[target].severity_for(mode)
                    mutes = src == "page" or (src == dst == "ticket" and not explains.page_only)
                    if "off" in (src, dst) or not mutes:
                        continue
                    pair = (
                        cause.name,
                        src,
                        target,
                        dst,
                        {k: v.split("|")[0] for k, v in explains.target_labels},
                    )
                    if pair[:4] not in [p[:4] for p in pairs]:
                        pairs.append((*pair, explains.equal))
    return pairs


def declared_relations_test() -> dict:
    """Each declared relation, one job each: the cause and what it explains fire together and
    one alert is notified (generator/oncall/delivered.py applies the inhibit rules)."""
    minutes = 10
    series, expected = [], []
    for i, (cause, src, target, dst, extra, equal) in enumerate(_muted_pairs()):
        job = f"relation-{i}"
        same = {k: "0" for k in equal if k != "training_job"}
        series.append((_alert_series(PAGED_TEAM, cause, src, job, **same), f"1x{minutes}"))
        series.append(
            (_alert_series(PAGED_TEAM, target, dst, job, **same, **extra), f"1x{minutes}")
        )
        expected.append({"labels": matchers({"training_job": job}), "value": 1})
    return _test(
        "a cause and the alert it explains (explains=) fire together: one notification",
        series,
        [
            {
                "expr": f"count by (training_job) ({NOTIFIED})",
                "eval_time": f"{minutes}m",
                "exp_samples": expected,
            }
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
            declared_relations_test(),
        ],
    }
