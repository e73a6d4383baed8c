"""Fail-slow scenarios (issue 28): hardware slower than its peers, the job still running.

A GPU clocked down (power brake, a failing fan, no reason bit set) and a degraded InfiniBand
rail: nothing breaks, every rank waits for the slow one, and the tickets
(generator/alerts/definitions/failslow.py) must name the node and the GPU or port.
Plain data (keyword arguments of Scenario, with `fault` those of Conditions): scenarios.py
builds them, so this module does not import it (simulator modules import no cycle).
"""

from __future__ import annotations

from trainsignals.generator.alerts.definitions.failslow import GPU_FAIL_SLOW, NODE_LINK_DEGRADED

MINUTE = 60

THROTTLE = 0.7  # the throttled GPU's SM clock (fail-slows of 10-40%)
LINK_LEFT = 0.2  # what the degraded rail still moves

PEER_SCENARIOS: tuple[dict, ...] = (
    dict(
        name="gpu_throttled",
        timeline=f"From fault_at GPU 0 of node 0 clocks at {THROTTLE:.0%} of its peers without a "
        "throttle reason (a silent fail-slow); the synchronous job slows to that GPU's pace "
        f"(MFU still above its floor). {GPU_FAIL_SLOW} is a ticket naming node 0, GPU 0 "
        "~10-15m after onset.",
        fault=dict(slow_gpus=((0, 0, THROTTLE),), speed=0.8),
        expected_alerts={GPU_FAIL_SLOW: "ticket"},
        duration=30 * MINUTE + 35 * MINUTE,
        step_slowdown=1.25,
    ),
    dict(
        name="link_degraded",
        timeline=f"From fault_at port mlx5_0/1 of node 0 moves {LINK_LEFT:.0%} of its peers' "
        "traffic and waits 20x longer to transmit (a link trained down, a congested switch port); "
        f"training continues, slower. {NODE_LINK_DEGRADED} is a ticket naming node 0, "
        "mlx5_0 port 1 ~10-15m after onset.",
        fault=dict(slow_links=((0, LINK_LEFT, 20.0),), speed=0.85),
        expected_alerts={NODE_LINK_DEGRADED: "ticket"},
        duration=30 * MINUTE + 35 * MINUTE,
        step_slowdown=1.2,
    ),
)

# What each scenario's ticket must name beyond node 0 (tests/e2e/test_scenarios.py).
CULPRITS: dict[str, tuple[str, dict[str, str]]] = {
    "gpu_throttled": (GPU_FAIL_SLOW, {"gpu": "0"}),
    "link_degraded": (NODE_LINK_DEGRADED, {"device": "mlx5_0", "port": "1"}),
}
