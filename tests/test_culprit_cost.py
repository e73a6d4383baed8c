"""The culprit rules' cost at 131,072 GPUs (issue 28, bench/bench_sharded.py): what each
per-GPU and per-rank read over a window costs is paid once per evaluation, in the group whose
interval it needs, and the hang suspects cost nothing much while the job steps."""

from __future__ import annotations

import re

import pytest
import yaml

from tests.conftest import JOBS
from trainsignals.fleet.spec import fleet_spec, generated_files
from trainsignals.generator.alerts.definitions.failslow import GPU_FAIL_SLOW
from trainsignals.generator.deploy.sharding import (
    PER_RANK_GROUP,
    PER_UNIT_GROUP,
    SUSPECTS_GROUP,
    reads_per_unit,
    split_document,
)
from trainsignals.generator.loader import load_specs, spec_files
from trainsignals.generator.pipeline import Options, generate_job
from trainsignals.generator.signals.hang_suspects import SUSPECT
from trainsignals.generator.signals.peers import (
    BUSY_CLOCK,
    CLOCK_MEDIAN,
    CLOCK_RATIO,
    CLOCK_RATIO_BELOW,
    CLOCK_RATIO_LOW,
    CLOCK_RATIO_SERIES,
    PERSIST_WINDOW,
    dashboard_peer_ratios,
)
from trainsignals.generator.signals.promql import RuleContext
from trainsignals.generator.signals.straggler import COST, RATIO, dashboard_straggler_series
from trainsignals.generator.spec.durations import format_duration

SPECS = [s for s in load_specs(spec_files(JOBS)) if s.shape.gpus >= 4]


def _groups(spec) -> dict[str, list[dict]]:
    options = Options(with_tests=False, with_dashboards=False)
    text = generate_job(spec, "test", options)[f"alerts/{spec.name}.rules.yaml"]
    return {
        g["name"].removeprefix(f"trainsignals-{spec.name}-"): g["rules"]
        for g in yaml.safe_load(text)["groups"]
    }


@pytest.mark.parametrize("spec", SPECS, ids=[s.name for s in SPECS])
def test_gpu_fail_slow_reads_only_the_slow_gpus_each_minute(spec) -> None:
    """Its UUID join has two arms (with and without the UUID): both read one recorded window.
    That window reads only the clock ratios recorded below the ticket's ratio (none on a
    healthy job), against the job's count of evaluations: no fast rule reads every GPU's ratio
    over a window, and every GPU's ratio (the panels') is recorded every 3m, not every minute."""
    groups = _groups(spec)
    (alert,) = [r for r in groups["alerts"] if r.get("alert") == GPU_FAIL_SLOW]
    assert "_over_time" not in alert["expr"] and CLOCK_RATIO_SERIES + "{" not in alert["expr"]
    assert alert["expr"].count(CLOCK_RATIO_LOW) == 2
    fast = {r["record"]: r["expr"] for r in groups["recording"] if "record" in r}
    assert fast[CLOCK_RATIO_BELOW].endswith(f"< {CLOCK_RATIO:g}")
    window = f"[{format_duration(PERSIST_WINDOW)}]"
    ranged = re.findall(r"([a-z_:]+)\{[^}]*\}" + re.escape(window), fast[CLOCK_RATIO_LOW])
    assert sorted(set(ranged)) == sorted({CLOCK_RATIO_BELOW, CLOCK_MEDIAN})
    assert not [name for name, expr in fast.items() if CLOCK_RATIO_SERIES + "{" in expr]
    assert CLOCK_RATIO_SERIES not in fast


@pytest.mark.parametrize("spec", SPECS, ids=[s.name for s in SPECS])
def test_peer_ratios_no_alert_reads_run_in_the_slow_group(spec) -> None:
    """Every GPU's ratios (clock, busy, tensor, power) and every rank's straggler ratio feed
    only panels and the baseline group (which computes the ratio itself): every 3m, not every
    minute, where each reads every GPU or rank."""
    groups = _groups(spec)
    slow = {r["record"] for r in groups["recording-slow"]}
    fast = {r["record"] for r in groups["recording"]}
    only_panels = dashboard_peer_ratios() | dashboard_straggler_series()
    assert only_panels <= slow and not only_panels & fast
    assert CLOCK_RATIO_SERIES in slow and RATIO in slow
    assert not [r for g in groups.values() for r in g if RATIO + "{" in r["expr"]]


def test_per_gpu_and_per_rank_gates_run_on_the_shards() -> None:
    """In the sharded topology the busy gate of the SM clock and the hang suspects' "behind"
    test (a rank's last step older than the margin) are node-local: the shards evaluate them,
    so the global ruler reads the busy GPUs' clocks and only the ranks that stopped stepping."""
    spec = fleet_spec(16)[0]
    doc = yaml.safe_load(generated_files(spec)[0])
    edge, central = split_document(RuleContext(spec), doc)
    edge_records = {
        r["record"]: r["expr"] for g in edge["groups"] for r in g["rules"] if "record" in r
    }
    assert BUSY_CLOCK in edge_records
    stale = [e for n, e in edge_records.items() if n.startswith("edge:trainsignals_last_step")]
    assert any("< ((time()) - (60))" in e for e in stale), stale
    central_text = yaml.safe_dump(central)
    assert "gpu:trainsignals_gpu_sm_clock:hertz{" not in "".join(
        r["expr"] for r in central["groups"][0]["rules"]
    )
    assert BUSY_CLOCK in central_text


@pytest.mark.parametrize("spec", SPECS, ids=[s.name for s in SPECS])
def test_hang_suspects_read_their_inputs_only_while_the_job_is_stopped(spec) -> None:
    """Each suspect rule ends in `and <the job is stopped>`, but PromQL evaluates both sides:
    every per-rank and per-GPU input is gated too, so a healthy job's comparisons, counts and
    median run over empty vectors. (tests/test_hang_suspects.py: the suspects are the same.)"""
    stopped = "and on () job:trainsignals_last_step:age_seconds"
    for rule in _groups(spec)["recording"]:
        if rule.get("record") == SUSPECT:
            # The final gate, and one per input read (twice each: flagged, and counted).
            assert rule["expr"].count(stopped) >= 3, rule["labels"]["reason"]


def test_global_per_gpu_passes_run_beside_the_job_level_rules() -> None:
    """The sharded global ruler's fast rules that read a series per GPU or port, and those per
    rank, run in groups of their own at the same interval, so the job-level rules (goodput,
    progress, the durable timestamps) keep their schedule; no rule is lost or doubled."""
    spec = fleet_spec(16)[0]
    doc = yaml.safe_load(generated_files(spec)[0])
    _, central = split_document(RuleContext(spec), doc)
    groups = {g["name"].removeprefix(f"trainsignals-{spec.name}-"): g for g in central["groups"]}
    for name in (PER_UNIT_GROUP, PER_RANK_GROUP, SUSPECTS_GROUP, "recording"):
        assert "interval" not in groups[name], name
    per_gpu = {r["record"] for r in groups[PER_UNIT_GROUP]["rules"]}
    per_rank = {r["record"] for r in groups[PER_RANK_GROUP]["rules"]}
    suspects = {r["record"] for r in groups[SUSPECTS_GROUP]["rules"]}
    assert {CLOCK_RATIO_LOW, CLOCK_MEDIAN} <= per_gpu and COST in per_rank
    assert suspects == {SUSPECT} and len(groups[SUSPECTS_GROUP]["rules"]) == 4
    per_unit = per_gpu | per_rank | suspects
    assert not [r["record"] for r in groups["recording"]["rules"] if reads_per_unit(r["expr"])]
    # Every fast record of the unsplit file that the global ruler records is in one of them.
    edge, _ = split_document(RuleContext(spec), doc)
    on_edge = {r.get("record") for g in edge["groups"] for r in g["rules"]}
    fast = {r["record"] for r in doc["groups"][0]["rules"]} - on_edge
    central_fast = per_unit | {r["record"] for r in groups["recording"]["rules"]}
    assert fast <= central_fast
