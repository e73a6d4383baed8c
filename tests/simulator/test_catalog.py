"""The scenario table: known alerts with their severities, the spec's overrides, and the
simulator README's copy of it."""

from __future__ import annotations

import re

import pytest

from tests.simulator.helpers import (
    HOUR,
    MIN,
    ROOT,
    make,
    scrape_all,
)
from trainsignals.generator.alerts.catalog import BY_NAME
from trainsignals.generator.spec.job import JobSpec
from trainsignals.simulator import SCENARIOS


def test_table_names_known_alerts_with_default_severities(spec: JobSpec) -> None:
    required = {
        "healthy", "data_loader_starvation", "nan_loss", "loss_divergence", "loss_plateau",
        "hang", "crash", "gpu_lost", "thermal_throttling", "mfu_leak", "dropped_batches",
        "disk_filling", "stale_checkpoint", "ecc_uncorrectable", "xid_error", "node_down",
    }  # fmt: skip
    assert required <= set(SCENARIOS)
    for s in SCENARIOS.values():
        assert s.timeline and s.duration > s.fault_at
        mode = s.spec_for(spec).recovery.mode
        # Only healthy jobs, restarts that heal themselves and completed jobs raise nothing.
        assert (
            s.expected_alerts
            or s.name == "healthy"
            or (mode == "auto_restart" and s.fault.restart_after)
            or s.fault.complete
        )
        for alert, severity in {**s.expected_alerts, **s.later_alerts}.items():
            assert BY_NAME[alert].severity_for(mode) == severity, (s.name, alert)
        assert not set(s.expected_alerts) & set(s.later_alerts)
    assert SCENARIOS["healthy"].alerts_for(spec) == {}


def test_alerts_for_applies_spec_overrides_and_step_bound(spec: JobSpec) -> None:
    starving = SCENARIOS["data_loader_starvation"]
    bounded = spec.model_copy(
        update={"objectives": spec.objectives.model_copy(update={"step_time_max_seconds": 1.0})}
    )
    assert "StepTimeAboveBound" not in starving.alerts_for(spec)
    assert starving.alerts_for(bounded)["StepTimeAboveBound"] == "ticket"
    assert "StepTimeAboveBound" not in SCENARIOS["nan_loss"].alerts_for(bounded)
    quiet = spec.model_copy(update={"alerts": {"DataLoaderStarved": "off"}})
    assert starving.alerts_for(quiet) == {"ThroughputBelowFloor": "page"}


def test_readme_table_lists_the_expected_alerts_of_every_scenario() -> None:
    """simulator/README.md repeats the scenario table for readers; it must not drift."""
    readme = (ROOT / "simulator/README.md").read_text()
    rows = {}
    for line in readme.splitlines():
        match = re.match(r"\| `(\w+)` \| [^|]* \| [^|]* \| ([^|]*) \|", line)
        if match:
            rows[match.group(1)] = match.group(2).strip()
    assert set(rows) == set(SCENARIOS)
    for name, scenario in SCENARIOS.items():
        listed = dict(re.findall(r"(\w+) \((page|ticket)\)", rows[name]))
        assert listed == scenario.expected_alerts, name


def test_same_seed_same_series_regardless_of_stepping(spec: JobSpec) -> None:
    with make(spec, "dropped_batches") as a, make(spec, "dropped_batches") as b:
        a.advance_to(2 * HOUR)
        for t in range(0, 2 * HOUR + 1, 7 * MIN):  # different call pattern, same ticks
            b.advance_to(t)
        b.advance_to(2 * HOUR)
        assert scrape_all(a) == scrape_all(b)
    with make(spec, "healthy", seed=8) as c, make(spec, "healthy") as d:
        c.advance_to(HOUR)
        d.advance_to(HOUR)
        assert scrape_all(c) != scrape_all(d)


def test_time_scale_that_would_fake_a_stall_is_refused(spec: JobSpec) -> None:
    with pytest.raises(ValueError, match="too large"):
        make(spec, "healthy", time_scale=1000)
    with pytest.raises(ValueError, match="unknown scenario"):
        make(spec, "meteor")
