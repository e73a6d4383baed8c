"""The culprit rules' cost at 131,072 GPUs (issue 28, bench/bench_sharded.py): what each
per-GPU and per-rank read over a window costs is paid once per evaluation, in the group whose
interval it needs, and the hang suspects cost nothing much while the job steps."""

from __future__ import annotations

import pytest
import yaml
from trainsignals.generator.alerts.definitions.failslow import GPU_FAIL_SLOW
from trainsignals.generator.loader import load_specs, spec_files
from trainsignals.generator.pipeline import Options, generate_job
from trainsignals.generator.signals.hang_suspects import SUSPECT
from trainsignals.generator.signals.peers import (
    CLOCK_RATIO,
    CLOCK_RATIO_LOW,
    CLOCK_RATIO_SERIES,
    PERSIST_WINDOW,
    dashboard_peer_ratios,
)
from trainsignals.generator.spec.durations import format_duration

from tests.conftest import JOBS

SPECS = [s for s in load_specs(spec_files(JOBS)) if s.shape.gpus >= 4]


def _groups(spec) -> dict[str, list[dict]]:
    options = Options(with_tests=False, with_dashboards=False)
    text = generate_job(spec, "test", options)[f"alerts/{spec.name}.rules.yaml"]
    return {
        g["name"].removeprefix(f"trainsignals-{spec.name}-"): g["rules"]
        for g in yaml.safe_load(text)["groups"]
    }


@pytest.mark.parametrize("spec", SPECS, ids=[s.name for s in SPECS])
def test_gpu_fail_slow_reads_its_window_once(spec) -> None:
    """Its UUID join has two arms (with and without the UUID): each read the 10m window of
    every GPU's clock ratio. The window is recorded once, in the fast group, only where it is
    below the ticket's ratio, and both arms read that."""
    groups = _groups(spec)
    (alert,) = [r for r in groups["alerts"] if r.get("alert") == GPU_FAIL_SLOW]
    assert "_over_time" not in alert["expr"] and CLOCK_RATIO_SERIES + "{" not in alert["expr"]
    assert alert["expr"].count(CLOCK_RATIO_LOW) == 2
    (rule,) = [r for r in groups["recording"] if r.get("record") == CLOCK_RATIO_LOW]
    assert rule["expr"].startswith("quantile_over_time(0.75, " + CLOCK_RATIO_SERIES)
    assert rule["expr"].endswith(f"[{format_duration(PERSIST_WINDOW)}]) < {CLOCK_RATIO:g}")


@pytest.mark.parametrize("spec", SPECS, ids=[s.name for s in SPECS])
def test_peer_ratios_no_alert_reads_run_in_the_slow_group(spec) -> None:
    """The busy, tensor and power ratios feed only the "Where is it slow" panels: every 3m,
    not every minute, where each reads every GPU. The SM clock's (GpuFailSlow) stays fast."""
    groups = _groups(spec)
    slow = {r["record"] for r in groups["recording-slow"]}
    fast = {r["record"] for r in groups["recording"]}
    assert dashboard_peer_ratios() <= slow and not dashboard_peer_ratios() & fast
    assert CLOCK_RATIO_SERIES in fast


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
