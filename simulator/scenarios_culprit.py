"""Culprit scenarios (issue 28): one node or one rank is the cause, and the notification must
name it.

- slow_host: one node's host CPU is slow (a noisy neighbour, a CPU stuck at a low frequency,
  a memory-bandwidth hog). Its ranks' own work (trainsignals_own_work_seconds_total) grows;
  every other rank waits for them in the collectives, so every rank's step time is the same
  and only own work tells them apart. TrainingStraggler is a ticket naming that node's ranks;
  its GPUs are healthy (clocks at their peers'), so no fail-slow GPU ticket.
- hang_data_wait: one rank is stuck in its data loader (a dead worker, a hung read from the
  object store) while the others spin in the next collective, waiting for it: no steps. The
  stall pages, and its `suspects` annotation names the stuck rank (its open data wait, and
  its idle GPU among busy ones; generator/signals/hang_suspects.py).

Plain data (keyword arguments of Scenario, with `fault` those of Conditions): scenarios.py
builds them, so this module does not import it (simulator modules import no cycle). Nodes and
ranks are positions; -1 is the last one, so the culprit is never the node 0 that most other
scenarios break.
"""

from __future__ import annotations

from trainsignals.generator.alerts.definitions.failslow import GPU_FAIL_SLOW
from trainsignals.generator.alerts.definitions.loss_checkpoint import CHECKPOINT_TOO_OLD
from trainsignals.generator.alerts.definitions.straggler import TRAINING_STRAGGLER
from trainsignals.generator.alerts.definitions.training import TRAINING_STALLED

MINUTE = 60

HOST_SLOW = 1.25  # the slow host's ranks do 25% more own work per step (fail-slows of 15-30%)
SLOW_NODE = -1  # the last node
STUCK_RANK = -1  # the last rank

CULPRIT_SCENARIOS: tuple[dict, ...] = (
    dict(
        name="slow_host",
        timeline=f"From fault_at the host CPU of the last node is slow: its ranks do "
        f"{HOST_SLOW - 1:.0%} more own work per step; the other ranks wait for them in the "
        "collectives, so every rank's step time grows alike (the job slows ~24%, MFU still "
        f"above its floor) and only own work differs. {TRAINING_STRAGGLER} is a ticket naming "
        f"the last node and its ranks ~25-30m after onset; its GPUs keep their clocks (no "
        f"{GPU_FAIL_SLOW}).",
        fault=dict(slow_hosts=((SLOW_NODE, HOST_SLOW),)),
        expected_alerts={TRAINING_STRAGGLER: "ticket"},
        duration=30 * MINUTE + 45 * MINUTE,
        step_slowdown=1.24,
    ),
    dict(
        name="hang_data_wait",
        timeline="From fault_at the last rank waits for data that never comes (its data wait "
        "stays open, its GPU idles) while the other ranks spin in the next collective at 100% "
        f"utilization; no rank completes a step. {TRAINING_STALLED} pages ~11m after onset and "
        "its `suspects` annotation names the last rank and its node (phase, gpu_idle).",
        fault=dict(stalled=True, data_stuck=(STUCK_RANK,)),
        expected_alerts={TRAINING_STALLED: "page"},
        duration=30 * MINUTE + 35 * MINUTE,
        later_alerts={CHECKPOINT_TOO_OLD: "page"},
    ),
)
