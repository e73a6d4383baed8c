"""Fabric scenarios: node_exporter's InfiniBand series (simulator/fabric.py) go wrong.

Tickets for the infra team; a fault that stalls the job pages once, as the stall.
Plain data (keyword arguments of Scenario, with `fault` those of Conditions): scenarios.py
builds them, so this module does not import it (simulator modules import no cycle).
"""

from __future__ import annotations

from trainsignals.generator.alerts.definitions.fabric import (
    INFINIBAND_PORT_DOWN,
    INFINIBAND_PORT_FLAPPING,
)
from trainsignals.generator.alerts.definitions.loss_checkpoint import CHECKPOINT_TOO_OLD
from trainsignals.generator.alerts.definitions.training import TRAINING_STALLED

MINUTE = 60

FABRIC_SCENARIOS: tuple[dict, ...] = (
    dict(
        name="ib_port_down",
        timeline="At fault_at InfiniBand port mlx5_0/1 of node 0 goes down for good (state 1, "
        "physical state polling, one link-down) and the job's collectives hang: "
        f"{TRAINING_STALLED} pages ~11m after onset, {INFINIBAND_PORT_DOWN} is a ticket ~2m "
        "after onset.",
        fault=dict(ib_down=(0,), stalled=True),
        expected_alerts={TRAINING_STALLED: "page", INFINIBAND_PORT_DOWN: "ticket"},
        duration=30 * MINUTE + 16 * MINUTE,
        later_alerts={CHECKPOINT_TOO_OLD: "page"},
    ),
    dict(
        name="ib_port_flapping",
        timeline="From fault_at port mlx5_0/1 of node 0 goes down for 30 s every 10m (a "
        "link-down, link recoveries and symbol errors each time); NCCL retries, training "
        f"continues. {INFINIBAND_PORT_FLAPPING} is a ticket right after the second link-down "
        f"(~10m after onset); no port stays down long enough for {INFINIBAND_PORT_DOWN}.",
        fault=dict(ib_flapping=(0,)),
        expected_alerts={INFINIBAND_PORT_FLAPPING: "ticket"},
        duration=30 * MINUTE + 15 * MINUTE,
    ),
)
