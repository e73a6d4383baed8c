"""promtool cases for the peer alerts (generator/signals/peers.py): GPUs and ports with peers.

The generated tests break GPU 0 of node-0 and port mlx5_0/1 of node-0 (what fault_test
expects an alert to name); every other GPU and port is a peer that differs from the median by
a little all the time (a deterministic wobble: uneven data, pipeline stages, silicon lottery).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from functools import lru_cache

from trainsignals.generator.signals.gpu import gpu_source
from trainsignals.generator.signals.promql import RuleContext
from trainsignals.generator.testkit.fabric_series import FABRIC_PORT, LINK_RATE
from trainsignals.generator.testkit.faults import FAULT_ONSET, FaultCase
from trainsignals.generator.testkit.gpu_series import gpu_test_series
from trainsignals.generator.testkit.input_series import RawSeries

BOOST_HZ = 1.98e9  # a busy healthy GPU's SM clock
IDLE_HZ = 0.345e9  # an idle one's
WOBBLE = 0.03  # healthy peers differ from each other by up to this, all the time
PEER_NODES = 4  # nodes in the fabric cases (2 in the GPU cases)
LINK_BYTES = 5e9  # a healthy rail's throughput, each direction (bytes/s)
LINK_WAIT = 5e5  # a healthy port's transmit wait (ticks/s)
Idle = Callable[[int], bool]


def wobble(peer: int, minute: int) -> float:
    """1 +- WOBBLE, different per peer and minute: healthy hardware is never equal."""
    return 1 + WOBBLE * math.sin(1.7 * minute + 2.3 * peer)


def _never(minute: int) -> bool:
    return False


def pause_and_restart(minute: int) -> bool:
    """A 6-minute checkpoint pause, then a restart 20 minutes down (longer than the
    persistence window and its `for`), both after onset."""
    return (
        FAULT_ONSET + 5 <= minute < FAULT_ONSET + 11
        or FAULT_ONSET + 25 <= minute < FAULT_ONSET + 45
    )


# The same for every spec (only the labels differ): each GPU's samples worked out once. The
# lists are shared: a case's series are encoded, never bent, after it builds them.
@lru_cache(maxsize=1024)
def _gpu_samples(
    ratio: float, idle: Idle, idle_ratio: float | None, n: int, gpu: int, minutes: int
) -> tuple[list, list]:
    """GPU `gpu` of node-`n`: utilization and SM clock per minute (gpu_case)."""
    peer = n * 8 + gpu
    broken = n == 0 and gpu == 0
    util, clock = [], []
    for m in range(minutes + 1):
        if idle(m):
            util.append(0.0)
            clock.append(IDLE_HZ * (idle_ratio if broken and idle_ratio else 1))
            continue
        util.append(0.95)
        slow = ratio if broken and m >= FAULT_ONSET else 1.0
        clock.append(round(BOOST_HZ * slow * wobble(peer, m)))
    return util, clock


def gpu_case(
    what: str,
    ratio: float,
    fires_after: int,
    idle: Idle = _never,
    fires: bool = True,
    idle_ratio: float | None = None,
) -> FaultCase:
    """GPU 0 of node-0 at `ratio` of the clock from onset; every GPU idle where `idle` says
    (there GPU 0 idles at `idle_ratio` of the others' idle clock, when given)."""

    def series(ctx: RuleContext, minutes: int) -> list[RawSeries]:
        source = gpu_source(ctx)
        out: list[RawSeries] = []
        for n in range(2):
            for gpu in range(ctx.spec.shape.gpus_per_node):
                util, clock = _gpu_samples(ratio, idle, idle_ratio, n, gpu, minutes)
                signals: dict[str, list] = {"utilization": util, "sm_clock": clock}
                if source.reports_gpu_up:
                    signals["up"] = [1] * (minutes + 1)
                out += gpu_test_series(source, f"node-{n}", gpu, signals)
        return out

    return FaultCase(
        "", fires_after, labels=("node", "gpu", "uuid"), raw_series=series, what=what, fires=fires
    )


def link_case(
    what: str,
    throughput: float,
    wait: float,
    fires_after: int,
    idle: Idle = _never,
    fires: bool = True,
    rate: float = 1.0,
) -> FaultCase:
    """mlx5_0/1 of node-0 at `throughput` x its peers' bytes, `wait` x their transmit wait
    and `rate` x their link rate from onset; every port near silent where `idle` says
    (node-0's fully silent; a link keeps its rate through a pause)."""

    def series(ctx: RuleContext, minutes: int) -> list[RawSeries]:
        out: list[RawSeries] = []
        for n in range(PEER_NODES):
            for d, port in enumerate((FABRIC_PORT, {"device": "mlx5_1", "port": "1"})):
                labels = {**ctx.spec.selector_labels, "node": f"node-{n}", **port}
                broken = n == 0 and port is FABRIC_PORT
                sent, waited, rates, bytes_total, wait_total = [], [], [], 0.0, 0.0
                for m in range(minutes + 1):
                    sent.append(round(bytes_total))
                    waited.append(round(wait_total))
                    faulty = broken and m >= FAULT_ONSET
                    rates.append(LINK_RATE * (rate if faulty else 1))
                    scale = 0.0 if idle(m) and n == 0 else 1e-3 if idle(m) else 1.0
                    factor = wobble(n * 2 + d, m) * scale
                    bytes_total += 60 * LINK_BYTES * factor * (throughput if faulty else 1)
                    wait_total += 60 * LINK_WAIT * factor * (wait if faulty else 1)
                out += [
                    RawSeries("node_infiniband_state_id", labels, [4] * (minutes + 1)),
                    RawSeries("node_infiniband_port_data_transmitted_bytes_total", labels, sent),
                    RawSeries("node_infiniband_port_data_received_bytes_total", labels, sent),
                    RawSeries("node_infiniband_port_transmit_wait_total", labels, waited),
                    RawSeries("node_infiniband_rate_bytes_per_second", labels, rates),
                ]
        return out

    return FaultCase(
        "",
        fires_after,
        labels=("node", "device", "port"),
        raw_series=series,
        what=what,
        fires=fires,
    )
