"""promtool fault cases for the fabric alerts: node_exporter InfiniBand series of node-0."""

from __future__ import annotations

from typing import TYPE_CHECKING

from trainsignals.generator.signals.promql import RuleContext
from trainsignals.generator.testkit.input_series import RawSeries

if TYPE_CHECKING:
    from trainsignals.generator.testkit.faults import FaultCase

FABRIC_PORT = {"device": "mlx5_0", "port": "1"}  # the port the fault cases break
SPARE = {"device": "mlx5_1", "port": "1"}  # a healthy port next to it
LINK_RATE = 5e10  # bytes/s: 4 lanes of NDR (400 Gb/s)
COUNTERS = ("symbol_error", "port_errors_received", "link_error_recovery")
# A healthy rail per minute: 5 GB/s each way, little transmit wait (ticks).
TRAFFIC = (
    ("data_transmitted_bytes", 60 * 5e9),
    ("data_received_bytes", 60 * 5e9),
    ("transmit_wait", 60 * 5e5),
)


def ib_series(
    ctx: RuleContext, minutes: int, down: set[int], downed_at: list[int]
) -> list[RawSeries]:
    """Both ports of node-0: state per minute (down in `down`), link-downs at `downed_at`."""
    series = []
    minutes_ = range(minutes + 1)
    for port in (FABRIC_PORT, SPARE):
        labels = {**ctx.spec.selector_labels, "node": "node-0", **port}
        broken = port is FABRIC_PORT
        state = [1 if broken and m in down else 4 for m in range(minutes + 1)]
        downed = [sum(1 for t in downed_at if t <= m) if broken else 0 for m in range(minutes + 1)]
        series += [
            RawSeries("node_infiniband_state_id", labels, state),
            RawSeries(
                "node_infiniband_physical_state_id", labels, [5 if s == 4 else 2 for s in state]
            ),
            RawSeries("node_infiniband_link_downed_total", labels, downed),
        ]
        series += [
            RawSeries(f"node_infiniband_{c}_total", labels, [0] * (minutes + 1)) for c in COUNTERS
        ]
        # Traffic and congestion (generator/signals/peers.py), the same on every healthy port.
        series += [
            RawSeries(f"node_infiniband_port_{c}_total", labels, [per_minute * m for m in minutes_])
            for c, per_minute in TRAFFIC
        ]
        # The rate the link trained at: a port going down keeps reporting it (sysfs does).
        rate = [LINK_RATE] * (minutes + 1)
        series.append(RawSeries("node_infiniband_rate_bytes_per_second", labels, rate))
    return series


def port_down_fault() -> FaultCase:
    """mlx5_0/1 of node-0 goes down at onset and stays down."""
    from trainsignals.generator.testkit.faults import FAULT_ONSET, FaultCase

    onset = FAULT_ONSET
    return FaultCase(
        "",
        4,
        labels=("node", "device", "port"),
        raw_series=lambda ctx, minutes: ib_series(
            ctx, minutes, set(range(onset, minutes + 1)), [onset]
        ),
    )


def port_flapping_fault() -> FaultCase:
    """Down for a minute at onset and 10 minutes later: never long enough for PortDown."""
    from trainsignals.generator.testkit.faults import FAULT_ONSET, FaultCase

    onset = FAULT_ONSET
    return FaultCase(
        "",
        12,
        labels=("node", "device", "port"),
        raw_series=lambda ctx, minutes: ib_series(
            ctx, minutes, {onset, onset + 10}, [onset, onset + 10]
        ),
    )
