"""Hardware compared with its peers: each GPU and each InfiniBand port against the job's median.

In synchronous training every GPU does the same work and every node's rail carries the same
traffic, so the job's median is what healthy hardware does right now: a GPU clocked well below
it, or a port moving far less (or waiting far more to transmit) than the same port of the other
nodes, is where the job is slow (Minder, NSDI'25: compare the machines of one job, require
the deviation to persist). A pause, a restart or the end of the job idles every GPU and port
together: there is no deviation then, and the comparison is not even recorded (the gates below).

GPUs: SM clock, SM activity, tensor activity and power, read from the recorded per-GPU series
that either source fills (generator/signals/gpu_sources.py, dcgm_source.py:
DCGM_FI_DEV_SM_CLOCK, PROF_SM_ACTIVE / GR_ENGINE_ACTIVE / GPU_UTIL, PROF_PIPE_TENSOR_ACTIVE,
POWER_USAGE). Only busy GPUs of a job that computes are compared: a GPU idle while the others
compute is a hang (generator/signals/hang_suspects.py), not a slow GPU.

Fabric (multi-node jobs): node_exporter's infiniband collector,
`node_infiniband_port_data_{transmitted,received}_bytes_total` and
`node_infiniband_port_transmit_wait_total` (ticks the port had data but no credits: the
congestion counter), and `node_infiniband_rate_bytes_per_second` (the rate the link trained
at: lanes x speed), per `device` and `port`. A link that trained at a lower width or speed
(2 of 4 lanes after a bad cable or transceiver, HDR instead of NDR) reports a rate that is
half its peers' or less, whatever it carries; throughput alone cannot tell a half-rate link
moving 55% of its peers' bytes from a busy one. A port's peers are the same device and port on
the job's other nodes (rail-optimised fabrics: mlx5_0 of every node is one rail), so a storage
port is never compared with a compute rail.

NCCL Inspector (NCCL >= 2.28, ext-profiler/inspector with NCCL_INSPECTOR_PROM_DUMP=1) writes
`nccl_bus_bandwidth_gbs` per communicator (`comm_id`) and `rank` into node_exporter's textfile
directory, with a new `coll_sn`/`timestamp` label per dump: averaged per rank and
communicator here, compared with the communicator's median, for the dashboard only (an
optional plugin is no input an alert may depend on).
"""

from __future__ import annotations

from trainsignals.generator.signals.fabric import PORT, PORT_UP, fabric_enabled
from trainsignals.generator.signals.promql import RuleContext

# GpuFailSlow: a busy GPU's SM clock below this share of the job's median busy GPU.
CLOCK_RATIO = 0.9
BUSY_GATE = 0.5  # a GPU (and the job's median GPU) at least this busy is computing
# NodeLinkDegraded: a port moving less than this share of its peers' median ...
LINK_RATIO = 0.5
LINK_MIN_BYTES = 1e8  # ... while that median moves at least this (bytes/s): the job talks
# ... or waiting to transmit more than WAIT_FACTOR x the peers' median plus WAIT_FLOOR ticks/s.
WAIT_FACTOR = 4.0
WAIT_FLOOR = 1e6
# ... or trained at less than this share of its peers' link rate (any lower width or speed is
# half or less: a rate is a setting, not a measurement, so no noise to ride out).
LINK_RATE_RATIO = 0.9
LINK_RATE_HELD = 300  # seconds the lower rate must have lasted (a link retraining is not it)
# Persistence: the share of a window's samples that must deviate, the window, and the `for`.
PERSIST_QUANTILE = 0.75
PERSIST_WINDOW = 600
PERSIST_FOR = 120
MIN_GPUS = 4  # fewer GPUs have no median worth comparing with

GPU_BY = "training_job, node, gpu"
# Recorded per GPU: each signal's ratio to the job's median.
GPU_SIGNALS = {
    "sm_clock": "gpu:trainsignals_gpu_sm_clock:hertz",
    "busy": "gpu:trainsignals_gpu_busy:ratio",
    "tensor_active": "gpu:trainsignals_gpu_tensor_active:ratio",
    "power": "gpu:trainsignals_gpu_power:watts",
}
BUSY_GPU = "gpu:trainsignals_gpu_busy:gated"
JOB_BUSY_MEDIAN = "job:trainsignals_gpu_busy:median_all"  # every GPU, busy or not
CLOCK_RATIO_SERIES = "gpu:trainsignals_gpu_sm_clock:peer_ratio"
# GpuFailSlow reads the clock of busy GPUs only, gated where the GPU is scraped (a per-GPU
# rule: the sharded split runs it on the shards), so the global ruler compares every GPU with
# the median without joining each with its busy gate first.
BUSY_CLOCK = "gpu:trainsignals_gpu_sm_clock:busy_hertz"
CLOCK_MEDIAN = "job:trainsignals_gpu_sm_clock:busy_median"  # recorded once, read per GPU
# A busy GPU's clock ratio, recorded only where it is below CLOCK_RATIO: a healthy job records
# nothing here, so the 10m window below reads the few slow GPUs, not every GPU's ten samples.
CLOCK_RATIO_BELOW = "gpu:trainsignals_gpu_sm_clock:peer_ratio_below"
# GpuFailSlow's condition, recorded once: below CLOCK_RATIO in at least PERSIST_QUANTILE of
# the PERSIST_WINDOW's evaluations in which the job computed (its CLOCK_MEDIAN existed; a
# pause leaves gaps, not healthy samples), valued at the PERSIST_QUANTILE of those low
# readings. No series for the other GPUs. The alert joins each GPU's UUID in two arms
# (gpu_labels.named_gpu): both read this.
CLOCK_RATIO_LOW = "gpu:trainsignals_gpu_sm_clock:peer_ratio_low_q75_10m"

LINK_THROUGHPUT = "node:trainsignals_ib_throughput:rate5m"
LINK_THROUGHPUT_MEDIAN = "job:trainsignals_ib_throughput:median"
LINK_RATIO_SERIES = "node:trainsignals_ib_throughput:peer_ratio"
LINK_WAIT = "node:trainsignals_ib_transmit_wait:rate5m"
LINK_WAIT_MEDIAN = "job:trainsignals_ib_transmit_wait:median"
LINK_WAIT_EXCESS = "node:trainsignals_ib_transmit_wait:peer_excess"
LINK_RATE = "node:trainsignals_ib_link_rate:bytes_per_second"
LINK_RATE_PEER_RATIO = "node:trainsignals_ib_link_rate:peer_ratio"
NCCL_BUSBW = "rank:trainsignals_nccl_bus_bandwidth:gbs"
NCCL_BUSBW_RATIO = "rank:trainsignals_nccl_bus_bandwidth:peer_ratio"
NCCL_BY = "node, comm_id, rank"
PORT_PEERS = "training_job, device, port"


def dashboard_peer_ratios() -> frozenset[str]:
    """The per-GPU peer ratios, every GPU's: no alert reads them (GpuFailSlow reads
    CLOCK_RATIO_BELOW, the slow GPUs only), they feed only the "Where is it slow" panels, so
    recording.py puts them in the slow group, every 3m instead of every minute. Each reads
    every GPU of the job twice (the ratio and the median inline): at 131,072 GPUs they were
    much of the global ruler's minute."""
    return frozenset(peer_ratio(s) for s in GPU_SIGNALS)


def peers_enabled(ctx: RuleContext) -> bool:
    return ctx.spec.shape.gpus >= MIN_GPUS


def peer_ratio(signal: str) -> str:
    """The recorded per-GPU ratio of `signal` (a key of GPU_SIGNALS) to the job's median."""
    return f"gpu:trainsignals_gpu_{signal}:peer_ratio"


def gpu_peer_recordings(ctx: RuleContext) -> dict[str, str]:
    """Per busy GPU of a computing job: each signal over the job's median busy GPU's."""
    if not peers_enabled(ctx):
        return {}
    r = ctx.recorded()
    busy = GPU_SIGNALS["busy"]
    rules = {
        # The GPUs that compute: every comparison is restricted to them.
        BUSY_GPU: f"{busy}{r} >= {BUSY_GATE:g}",
        JOB_BUSY_MEDIAN: f"quantile by (training_job) (0.5, {busy}{r})",
    }
    computing = f"{JOB_BUSY_MEDIAN}{r} >= {BUSY_GATE:g}"
    for signal, series in GPU_SIGNALS.items():
        if signal == "sm_clock":
            continue  # below: divided by the median GpuFailSlow records
        gated = f"{series}{r} and on ({GPU_BY}) {BUSY_GPU}{r}"
        # The median inline, not a recorded job: series of its own: a job: rule no alert reads
        # goes to the slow group (recording.py), and fast rules read only the fast group.
        middle = f"quantile by (training_job) (0.5, {gated}) and on (training_job) {computing}"
        rules[peer_ratio(signal)] = f"({gated}) / on (training_job) group_left () ({middle}) > 0"
    # GpuFailSlow's path, every minute: the median once, then only the GPUs below the ratio.
    # The panels' ratio of every GPU (slow group) divides by the same median.
    clock = GPU_SIGNALS["sm_clock"]
    rules[BUSY_CLOCK] = f"{clock}{r} and on ({GPU_BY}) {BUSY_GPU}{r}"
    rules[CLOCK_MEDIAN] = (
        f"quantile by (training_job) (0.5, {BUSY_CLOCK}{r}) and on (training_job) {computing}"
    )
    ratio = f"{BUSY_CLOCK}{r} / on (training_job) group_left () ({CLOCK_MEDIAN}{r} > 0)"
    rules[CLOCK_RATIO_SERIES] = ratio
    rules[CLOCK_RATIO_BELOW] = f"{ratio} < {CLOCK_RATIO:g}"
    rules[CLOCK_RATIO_LOW] = persists_low(CLOCK_RATIO_BELOW, CLOCK_MEDIAN, ctx)
    return rules


def link_peer_recordings(ctx: RuleContext) -> dict[str, str]:
    """Per active port: throughput and transmit wait against the same port of the peers."""
    if not fabric_enabled(ctx):
        return {}
    raw, r, w5 = ctx.raw(), ctx.recorded(), ctx.range(300)

    def rate(counter: str) -> str:
        return f"sum by ({PORT}) (rate(node_infiniband_port_{counter}_total{raw}[{w5}]))"

    active = f"on ({PORT}) {PORT_UP}{r} == 1"
    return {
        LINK_THROUGHPUT: (
            f"({rate('data_transmitted_bytes')} + {rate('data_received_bytes')}) and {active}"
        ),
        LINK_THROUGHPUT_MEDIAN: f"quantile by ({PORT_PEERS}) (0.5, {LINK_THROUGHPUT}{r})",
        # Only where the peers move data: a paused job's ports are all near zero together.
        LINK_RATIO_SERIES: (
            f"{LINK_THROUGHPUT}{r} / on ({PORT_PEERS}) group_left () "
            f"({LINK_THROUGHPUT_MEDIAN}{r} >= {LINK_MIN_BYTES:.0f})"
        ),
        LINK_WAIT: f"{rate('transmit_wait')} and {active}",
        LINK_WAIT_MEDIAN: f"quantile by ({PORT_PEERS}) (0.5, {LINK_WAIT}{r})",
        LINK_WAIT_EXCESS: (
            f"{LINK_WAIT}{r} - on ({PORT_PEERS}) group_left () "
            f"({WAIT_FACTOR:g} * {LINK_WAIT_MEDIAN}{r})"
        ),
        LINK_RATE: f"max by ({PORT}) (node_infiniband_rate_bytes_per_second{raw}) and {active}",
        # The median inline: one per rail, and its only reader is this ratio.
        LINK_RATE_PEER_RATIO: (
            f"{LINK_RATE}{r} / on ({PORT_PEERS}) group_left () "
            f"(quantile by ({PORT_PEERS}) (0.5, {LINK_RATE}{r}) > 0)"
        ),
    }


def nccl_peer_recordings(ctx: RuleContext) -> dict[str, str]:
    """NCCL Inspector's bus bandwidth per rank and communicator, and over its median."""
    if not fabric_enabled(ctx):
        return {}
    raw, r, w5 = ctx.raw(), ctx.recorded(), ctx.range(300)
    return {
        # Each dump is a new series (coll_sn, timestamp labels): averaged away per rank.
        NCCL_BUSBW: f"avg by ({NCCL_BY}) (avg_over_time(nccl_bus_bandwidth_gbs{raw}[{w5}]))",
        NCCL_BUSBW_RATIO: (
            f"{NCCL_BUSBW}{r} / on (training_job, comm_id) group_left () "
            f"(quantile by (training_job, comm_id) (0.5, {NCCL_BUSBW}{r}) > 0)"
        ),
    }


def peer_recordings(ctx: RuleContext) -> dict[str, str]:
    """Every peer comparison of the job, after the per-GPU and per-port series it reads."""
    return gpu_peer_recordings(ctx) | link_peer_recordings(ctx) | nccl_peer_recordings(ctx)


def persists_below(series: str, ratio: float, ctx: RuleContext) -> str:
    """Most of the window's samples below `ratio` (a pause leaves gaps, not healthy samples)."""
    window = ctx.range(PERSIST_WINDOW)
    return f"quantile_over_time({PERSIST_QUANTILE:g}, {series}[{window}]) < {ratio:g}"


def persists_low(below: str, evaluated: str, ctx: RuleContext) -> str:
    """`below` (per GPU, recorded only while low) in at least PERSIST_QUANTILE of the window's
    evaluations of `evaluated` (the job's series that exists whenever the comparison ran),
    valued at the PERSIST_QUANTILE of its low readings. The window reads only low series."""
    r, window = ctx.recorded(), ctx.range(PERSIST_WINDOW)
    share = (
        f"count_over_time({below}{r}[{window}]) >= on (training_job) group_left () "
        f"({PERSIST_QUANTILE:g} * count_over_time({evaluated}{r}[{window}]))"
    )
    return f"quantile_over_time({PERSIST_QUANTILE:g}, {below}{r}[{window}]) and {share}"


def link_rate_below(ctx: RuleContext) -> str:
    """A port trained below its peers' link rate for all of LINK_RATE_HELD."""
    window = ctx.range(LINK_RATE_HELD)
    return f"max_over_time({LINK_RATE_PEER_RATIO}{ctx.recorded()}[{window}]) < {LINK_RATE_RATIO:g}"


def persists_above(series: str, floor: float, ctx: RuleContext) -> str:
    window = ctx.range(PERSIST_WINDOW)
    return f"quantile_over_time({1 - PERSIST_QUANTILE:g}, {series}[{window}]) > {floor:.0f}"
