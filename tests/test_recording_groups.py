"""Recording rules in two groups (generator/signals/recording.py): a fast one that the alerts
read, at the global evaluation interval, and a slow one at its own longer interval with what only
dashboards and postmortems read (step-time quantiles; goodput and badput over 1h and 1d), so
the costliest rules of a 16k-GPU job run a third as often; and the straggler's 6h baseline
in a group of its own. bench/bench_fleet_cost.py measures each group's evaluation time against
its interval."""

from __future__ import annotations

import re

import pytest
import yaml

from tests.conftest import JOBS, ROOT
from trainsignals.generator.loader import load_specs, spec_files
from trainsignals.generator.pipeline import Options, generate_job
from trainsignals.generator.signals.goodput import badput_name, goodput_name
from trainsignals.generator.signals.promql import RuleContext, le_label
from trainsignals.generator.signals.recording import SLOW_INTERVAL, STEP_BUCKET_RATE
from trainsignals.generator.signals.straggler import (
    BASELINE,
    BASELINE_INPUT,
    BASELINE_INTERVAL,
    BASELINE_WINDOW,
    COST,
    RATIO,
    ratio_expr,
    straggler_enabled,
)
from trainsignals.generator.spec.durations import format_duration, parse_duration

SPECS = load_specs(spec_files(JOBS))
IDS = [s.name for s in SPECS]


def _groups(spec, time_scale: float = 1.0) -> dict[str, dict]:
    """{short name (recording, alerts, recording-slow): group} in file order."""
    options = Options(time_scale=time_scale, with_tests=False, with_dashboards=False)
    text = generate_job(spec, "test", options)[f"alerts/{spec.name}.rules.yaml"]
    return {
        g["name"].removeprefix(f"trainsignals-{spec.name}-"): g
        for g in yaml.safe_load(text)["groups"]
    }


def straggler_enabled_for(spec) -> bool:
    return straggler_enabled(RuleContext(spec))


def _reads(expr: str, name: str) -> bool:
    return re.search(rf"(?<![\w:]){re.escape(name)}(?![\w:])", expr) is not None


@pytest.mark.parametrize("spec", SPECS, ids=IDS)
def test_fast_group_alerts_then_the_slow_group_with_its_own_interval(spec) -> None:
    groups = _groups(spec)
    baseline = ["baseline"] if straggler_enabled_for(spec) else []
    assert list(groups) == ["recording", "alerts", "recording-slow", *baseline]
    # Without an interval a group runs at the global evaluation_interval, as before.
    assert "interval" not in groups["recording"] and "interval" not in groups["alerts"]
    slow = parse_duration(groups["recording-slow"]["interval"])
    # Under Prometheus' 5m lookback, so an instant query between two evaluations finds one.
    assert slow == SLOW_INTERVAL and 60 < slow < 300
    records = {name: {r.get("record") for r in groups[name]["rules"]} for name in groups}
    for window in ("1h", "1d"):
        assert {goodput_name(window), badput_name(window)} <= records["recording-slow"]
    assert not records["recording"] & records["recording-slow"]


@pytest.mark.parametrize("spec", SPECS, ids=IDS)
def test_nothing_that_pages_reads_the_slow_group(spec) -> None:
    """Alerts and fast rules read only raw series and the fast group: a 3m-old value would
    delay a page, and the fast group would read the slow one's previous evaluation."""
    groups = _groups(spec)
    slow = [r["record"] for r in groups["recording-slow"]["rules"]]
    for rule in groups["recording"]["rules"] + groups["alerts"]["rules"]:
        name = rule.get("record") or rule["alert"]
        assert not [s for s in slow if _reads(rule["expr"], s)], name
    # The slow group reads the fast group or its own earlier rules (it runs in file order),
    # or itself: a carried state no alert of this mode reads (durable.py) is slow too.
    fast = {r["record"] for r in groups["recording"]["rules"]}
    done: set[str] = set()
    for rule in groups["recording-slow"]["rules"]:
        recorded = set(re.findall(r"\b[a-z]+:[A-Za-z0-9_]+:[A-Za-z0-9_]+", rule["expr"]))
        assert recorded - {rule["record"]} <= fast | done, rule["record"]
        done.add(rule["record"])


@pytest.mark.parametrize("spec", SPECS, ids=IDS)
def test_every_fast_job_rule_is_read_by_an_alert(spec) -> None:
    """The other direction: a job-level rule in the fast group is there because an alert
    reads it, directly or through other fast rules (the rest runs every 3m)."""
    groups = _groups(spec)
    fast = groups["recording"]["rules"]
    pending = [a["expr"] for a in groups["alerts"]["rules"]]
    needed: set[str] = set()
    while pending:
        expr = pending.pop()
        for rule in fast:
            if rule["record"] not in needed and _reads(expr, rule["record"]):
                needed.add(rule["record"])
                pending += [r["expr"] for r in fast if r["record"] == rule["record"]]
    unread = {r["record"] for r in fast if r["record"].startswith("job:")} - needed
    assert unread == set()
    moved = {r["record"] for r in groups["recording-slow"]["rules"]}
    assert "job:trainsignals_samples:rate5m" in moved  # a dashboard rate


@pytest.mark.parametrize(
    "spec", [s for s in SPECS if straggler_enabled_for(s)], ids=lambda s: s.name
)
def test_the_straggler_baseline_runs_alone_from_sampled_ratios(spec) -> None:
    """The 6h baseline reads RATIO sampled every BASELINE_INTERVAL (90 samples per rank, not
    360), every BASELINE_INTERVAL, in its own group; only COST reads it, and the interval is
    under Prometheus' 5m lookback, so COST always finds one. The group computes the sampled
    ratio itself, as RATIO is computed: RATIO is recorded every 3m for the panels only."""
    groups = _groups(spec)
    baseline = groups["baseline"]
    interval = parse_duration(baseline["interval"])
    assert interval == BASELINE_INTERVAL and 60 < interval < 300
    exprs = {r["record"]: r["expr"] for r in baseline["rules"]}
    assert list(exprs) == [BASELINE_INPUT, BASELINE]
    assert exprs[BASELINE_INPUT] == ratio_expr(RuleContext(spec))
    assert RATIO in {r["record"] for r in groups["recording-slow"]["rules"]}
    assert _reads(exprs[BASELINE], BASELINE_INPUT) and not _reads(exprs[BASELINE], RATIO)
    assert f"[{format_duration(BASELINE_WINDOW)}]" in exprs[BASELINE]
    assert BASELINE_WINDOW / interval == 90
    readers = {
        r.get("record") or r["alert"]
        for g in ("recording", "alerts", "recording-slow")
        for r in groups[g]["rules"]
        if any(_reads(r["expr"], name) for name in exprs)
    }
    assert readers == {COST}


def test_slow_interval_shrinks_with_compressed_time() -> None:
    """End-to-end tests compress time: the slow groups keep their ratio to the windows."""
    spec = SPECS[0]
    assert _groups(spec, 60)["recording-slow"]["interval"] == format_duration(SLOW_INTERVAL / 60)
    assert _groups(spec, 1000)["recording-slow"]["interval"] == "1s"
    assert _groups(spec, 60)["baseline"]["interval"] == format_duration(BASELINE_INTERVAL / 60)


@pytest.mark.parametrize("spec", SPECS, ids=IDS)
def test_every_rank_bucket_is_read_once_every_slow_interval(spec) -> None:
    """Ranks x buckets is the largest set a rule reads: one slow rule rates it into one series
    per bucket (two levels), the quantiles read that; what pages reads the bound's bucket."""
    groups = _groups(spec)
    bucket = "trainsignals_step_duration_seconds_bucket{"
    every = [r for r in groups["recording-slow"]["rules"] if bucket in r["expr"]]
    assert [r["record"] for r in every] == [STEP_BUCKET_RATE]
    assert "sum by (le) (rate(" in every[0]["expr"]
    readers = {
        r["record"]
        for r in groups["recording-slow"]["rules"]
        if _reads(r["expr"], STEP_BUCKET_RATE)
    }
    assert readers == {
        "job:trainsignals_step_duration_seconds:p50_5m",
        "job:trainsignals_step_duration_seconds:p95_5m",
    }
    fast = [r for r in groups["recording"]["rules"] if bucket in r["expr"]]
    bound = spec.objectives.step_time_max_seconds
    assert [r["record"] for r in fast] == (
        [] if bound is None else ["job:trainsignals_step_duration_seconds:above_bound_ratio_rate5m"]
    )
    for rule in fast:
        assert f'{bucket}le="{le_label(bound)}"' in rule["expr"]


@pytest.mark.parametrize("spec", SPECS, ids=IDS)
def test_promtool_tests_order_every_group(spec) -> None:
    """promtool evaluates every group at each step; a group missing from group_eval_order
    would run first and read the others' previous values."""
    test = yaml.safe_load((ROOT / "alerts" / f"{spec.name}.test.yaml").read_text())
    baseline = ("baseline",) if straggler_enabled_for(spec) else ()
    order = ("recording", "recording-slow", *baseline, "alerts")
    names = [f"trainsignals-{spec.name}-{g}" for g in order]
    assert test["group_eval_order"] == names


@pytest.mark.parametrize("spec", [s for s in SPECS if s.deploy.kubernetes], ids=lambda s: s.name)
def test_prometheus_rule_carries_every_group_with_its_interval(spec) -> None:
    path = ROOT / "deploy" / "kubernetes" / f"{spec.name}.yaml"
    (rule,) = [o for o in yaml.safe_load_all(path.read_text()) if o["kind"] == "PrometheusRule"]
    intervals = {g["name"]: g.get("interval") for g in rule["spec"]["groups"]}
    baseline = (
        {f"trainsignals-{spec.name}-baseline": format_duration(BASELINE_INTERVAL)}
        if straggler_enabled_for(spec)
        else {}
    )
    assert intervals == {
        f"trainsignals-{spec.name}-recording": None,
        f"trainsignals-{spec.name}-alerts": None,
        f"trainsignals-{spec.name}-recording-slow": format_duration(SLOW_INTERVAL),
        **baseline,
    }
