"""Raw series of the replay as OpenMetrics with timestamps, turned into TSDB blocks by promtool.

Only series that a generated rule reads are written (`referenced_metrics` of the rule file);
the ones the replay cannot produce are returned, so the report can name them. One file per
two-hour TSDB block: promtool 2.42 rereads its whole input once per block it writes, so one
file per block keeps the import linear. While promtool imports one block, the next is written.
"""

from __future__ import annotations

import re
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

from trainsignals.exporters.training.metrics import STEP_BUCKETS
from trainsignals.exporters.training.timeaccount import ACTIVITIES
from trainsignals.generator.signals.fabric import NODE_EXPORTER_JOB
from trainsignals.metrics.training import PHASES

from .history import GPUS_PER_NODE, MINUTE, gpu_uuid
from .timeline import IB_BYTES_MINUTE, Minute

BLOCK_S = 2 * 3600
TOKENS_PER_STEP = 15_630  # the stored slice of the job (16 GPUs at ~40% MFU of a 405B model)
SAMPLES_PER_STEP = 2
DISK_SIZE = 30e12
SDC = "silent_data_corruption"
THROTTLE_REASONS = ("hw_thermal_slowdown", "sw_power_cap")
OWN_WORK = "trainsignals_own_work_seconds_total"
TRANSMIT_WAIT = "node_infiniband_port_transmit_wait_total"
LINK_RATE = "node_infiniband_rate_bytes_per_second"
IB_RATE = 5e10  # the link rate every port trained at (4 lanes of NDR), but a trained-down one
DATA_WAIT_OPEN = "trainsignals_data_wait_open_seconds"
IDLE_GPU = (
    "trainsignals_gpu_utilization_ratio",
    "trainsignals_gpu_sm_active_ratio",
    "trainsignals_gpu_tensor_active_ratio",
)
CLOCK_HZ = 1.98e9  # an H100 SXM's SM clock under load
# The rail of the job's other 2,046 nodes, which run in lockstep: a few of their InfiniBand
# ports (nothing else of them), so a port's peers' median is a healthy port's, as in the
# real job, and not the mean of the two stored nodes.
PEER_PORT_HOSTS = ("gpu-rail-peer-0", "gpu-rail-peer-1", "gpu-rail-peer-2")
NETWORK_SERIES = ("node_network_receive_bytes_total", "node_network_transmit_bytes_total")

RankFn = Callable[[Minute], str]
GpuFn = Callable[[Minute, object], str]

# What one rank serves, by metric name: value as a function of the job's minute.
RANK_SERIES: dict[str, RankFn] = {
    "trainsignals_steps_total": lambda s: f"{int(s.steps)}",
    "trainsignals_tokens_total": lambda s: f"{int(s.steps) * TOKENS_PER_STEP // 16}",
    "trainsignals_samples_total": lambda s: f"{int(s.steps) * SAMPLES_PER_STEP}",
    "trainsignals_failed_steps_total": lambda s: "0",
    "trainsignals_nonfinite_losses_total": lambda s: "0",
    "trainsignals_batches_dropped_total": lambda s: "0",
    "trainsignals_data_wait_seconds_total": lambda s: f"{s.data_wait:.1f}",
    "trainsignals_loss": lambda s: f"{s.loss:.5f}",
    "trainsignals_global_step": lambda s: f"{s.global_step:.3f}",
    # A healthy rank's own work; the slow rank of a fail-slow adds its own (minute_lines).
    "trainsignals_own_work_seconds_total": lambda s: f"{s.own_work:.1f}",
    # Seconds inside steps (steps run back to back while training; a step's data wait is in
    # it), written at the same minute as the own work, as the instrumentation adds both at once.
    "trainsignals_step_duration_seconds_sum": lambda s: f"{_stepping_seconds(s):.1f}",
    "trainsignals_data_wait_open_seconds": lambda s: "0",  # no wait open at a scrape
}
_TRAIN, _DATA_WAIT = ACTIVITIES.index("train"), ACTIVITIES.index("data_wait")


def _stepping_seconds(s: Minute) -> float:
    return s.activity[_TRAIN] + s.activity[_DATA_WAIT] if s.activity else 0.0


EPOCH_SERIES = {  # timestamps: run seconds + the replay's epoch
    "trainsignals_last_step_timestamp_seconds": "last_step",
    "trainsignals_last_checkpoint_timestamp_seconds": "last_checkpoint",
    "trainsignals_process_start_time_seconds": "process_start",
}
GPU_SERIES = (
    "trainsignals_gpu_up",
    "trainsignals_gpu_utilization_ratio",
    "trainsignals_gpu_memory_used_bytes",
    "trainsignals_gpu_memory_total_bytes",
    "trainsignals_gpu_power_watts",
    "trainsignals_gpu_temperature_celsius",
    "trainsignals_gpu_sm_clock_hertz",
    "trainsignals_gpu_throttle_active",
    "trainsignals_gpu_ecc_errors_total",
    "trainsignals_gpu_remapped_rows_pending",
    "trainsignals_gpu_remapped_rows_failed",
    "trainsignals_gpu_xid_errors_total",
    "trainsignals_gpu_sm_active_ratio",
    "trainsignals_gpu_tensor_active_ratio",
    "trainsignals_gpu_nvlink_errors_all_links_total",
)
# node_exporter's InfiniBand collector, one HCA port per node: ACTIVE (4), no errors. The
# replay's network faults take the whole host off the network (see history.py).
INFINIBAND_SERIES = {
    "node_infiniband_state_id": "4",
    "node_infiniband_link_downed_total": "0",
    "node_infiniband_link_error_recovery_total": "0",
    "node_infiniband_port_errors_received_total": "0",
    "node_infiniband_symbol_error_total": "0",
    "node_infiniband_port_transmit_wait_total": "0",
}
# The port's traffic counters grow as the host's ib0 does (every node's rail alike).
INFINIBAND_TRAFFIC = (
    "node_infiniband_port_data_received_bytes_total",
    "node_infiniband_port_data_transmitted_bytes_total",
)
OTHER_SERIES = (
    "up",
    "trainsignals_time_seconds_total",
    "trainsignals_phase",
    "trainsignals_step_duration_seconds_bucket",
    "trainsignals_checkpoint_disk_free_bytes",
    "trainsignals_checkpoint_disk_size_bytes",
    "node_network_receive_bytes_total",
    "node_network_transmit_bytes_total",
    # Exported only when an NVML call fails; the replay's faults are seen through XIDs.
    "trainsignals_gpu_exporter_nvml_errors_total",
    "ALERTS",  # written by Prometheus itself
    # MIG instances: a pre-training job uses whole GPUs, so none exist (the panels stay empty).
    "trainsignals_gpu_mig_memory_used_bytes",
    "trainsignals_gpu_mig_memory_total_bytes",
    "trainsignals_gpu_mig_sm_active_ratio",
    "trainsignals_gpu_mig_tensor_active_ratio",
)
KNOWN = (
    set(RANK_SERIES)
    | set(EPOCH_SERIES)
    | set(GPU_SERIES)
    | set(OTHER_SERIES)
    | set(INFINIBAND_SERIES)
    | set(INFINIBAND_TRAFFIC)
    | {LINK_RATE}
)

_METRIC = re.compile(r"\b((?:trainsignals|node|DCGM)_[A-Za-z0-9_]+|up|ALERTS)\s*[{\[]")


def referenced_metrics(rules_text: str) -> set[str]:
    """Raw metric names the rule file reads (recorded `level:metric:op` names have colons)."""
    return {m for m in _METRIC.findall(rules_text)}


def unsupported(referenced: set[str]) -> list[str]:
    return sorted(referenced - KNOWN)


class Emitter:
    def __init__(
        self,
        minutes: list[Minute],
        selector: dict[str, str],
        scrape_jobs: tuple[str, str],
        referenced: set[str],
        epoch: int,
        offset: float = 0.0,
    ) -> None:
        self.minutes = minutes
        self.selector = ",".join(f'{k}="{v}"' for k, v in sorted(selector.items()))
        self.training_job, self.gpu_job = scrape_jobs
        self.wanted = referenced
        self.epoch = epoch
        self.offset = offset  # samples sit on the rules' evaluation instants
        self.samples = 0

    def _want(self, name: str) -> bool:
        return name in self.wanted

    def minute_lines(self, m: int) -> Iterator[str]:
        s = self.minutes[m]
        ts = f" {self.epoch + (m + 1) * MINUTE + self.offset:.3f}"
        sel = self.selector
        for slot, node in enumerate(s.nodes):
            node_down = slot in s.down_slots
            # Ranks whose targets left discovery (completed, Pending) write nothing, not up 0.
            for rank_local in range(0 if s.gone else GPUS_PER_NODE):
                rank = slot * GPUS_PER_NODE + rank_local
                target = (
                    f'{sel},job="{self.training_job}",instance="{node}:{9850 + rank_local}",'
                    f'node="{node}"'
                )
                up = s.alive and not node_down
                if self._want("up"):
                    yield f"up{{{target}}} {int(up)}{ts}"
                if not up:
                    continue
                labels = f'{target},rank="{rank}",local_rank="{rank_local}"'
                slow = s.slow_rank == (slot, rank_local)  # a fail-slow's rank: more own work
                for name, fn in RANK_SERIES.items():
                    if self._want(name):
                        value = fn(s)
                        if slow and name == OWN_WORK:
                            value = f"{s.own_work + s.slow_own:.1f}"
                        elif name == DATA_WAIT_OPEN and s.stuck == (slot, rank_local):
                            value = f"{s.stuck_for:.0f}"  # the hang's culprit waits for data
                        yield f"{name}{{{labels}}} {value}{ts}"
                for name, attr in EPOCH_SERIES.items():
                    at = getattr(s, attr)
                    if at is not None and self._want(name):  # None: not reported yet
                        yield f"{name}{{{labels}}} {self.epoch + at}{ts}"
                if self._want("trainsignals_time_seconds_total"):
                    for activity, seconds in zip(ACTIVITIES, s.activity, strict=True):
                        yield (
                            f'trainsignals_time_seconds_total{{{labels},activity="{activity}"}} '
                            f"{seconds:.1f}{ts}"
                        )
                if self._want("trainsignals_phase"):
                    for phase in PHASES:
                        on = int(phase == s.phase)
                        yield f'trainsignals_phase{{{labels},phase="{phase}"}} {on}{ts}'
                if self._want("trainsignals_step_duration_seconds_bucket"):
                    steps = int(s.steps)
                    for le in (*STEP_BUCKETS, "+Inf"):
                        count = steps if le == "+Inf" or s.step_seconds <= le else 0
                        yield (
                            f'trainsignals_step_duration_seconds_bucket{{{labels},le="{le}"}} '
                            f"{count}{ts}"
                        )
                path = f'{labels},path="/checkpoints"'
                if self._want("trainsignals_checkpoint_disk_free_bytes"):
                    free = DISK_SIZE * 0.4
                    yield f"trainsignals_checkpoint_disk_free_bytes{{{path}}} {free:.0f}{ts}"
                if self._want("trainsignals_checkpoint_disk_size_bytes"):
                    yield f"trainsignals_checkpoint_disk_size_bytes{{{path}}} {DISK_SIZE:.0f}{ts}"
            gpu_target = f'{sel},job="{self.gpu_job}",instance="{node}:9842",node="{node}"'
            if self._want("up"):
                yield f"up{{{gpu_target}}} {int(not node_down)}{ts}"
                node_target = (
                    f'{sel},job="{NODE_EXPORTER_JOB}",instance="{node}:9100",node="{node}"'
                )
                yield f"up{{{node_target}}} {int(not node_down)}{ts}"
            if node_down:
                continue
            if self._want("node_network_receive_bytes_total"):
                for name in (
                    "node_network_receive_bytes_total",
                    "node_network_transmit_bytes_total",
                ):
                    yield f'{name}{{{sel},node="{node}",device="ib0"}} {(m + 1) * 2.4e10:.0f}{ts}'
            yield from self._port_lines(m, node, s, slot, ts)
            faults = {(f_slot, gpu): f for f_slot, gpu, f in s.gpu_faults if f_slot == slot}
            clocks = {f.gpu: f.factor for f_slot, f in s.slow if f_slot == slot and f.kind == "gpu"}
            for gpu in range(GPUS_PER_NODE):
                fault = faults.get((slot, gpu))
                clock = CLOCK_HZ * clocks.get(gpu, 1.0)
                idle = s.stuck == (slot, gpu)  # the hang's culprit computes nothing
                yield from self._gpu_lines(s, m, gpu_target, node, gpu, fault, ts, clock, idle)
        for host in PEER_PORT_HOSTS:
            yield from self._port_lines(m, host, None, -1, ts)

    def _port_lines(self, m: int, node: str, s: Minute | None, slot: int, ts: str) -> Iterator[str]:
        """node_exporter's InfiniBand port of `node` (its slot's fail-slow, if any)."""
        port = f'{self.selector},node="{node}",device="mlx5_0",port="1"'
        wait = s.ib_wait[slot] if s is not None and s.ib_wait else 0.0  # congestion
        trained = (
            1.0 if s is None else min((f.link_rate for at, f in s.slow if at == slot), default=1.0)
        )
        if self._want(LINK_RATE):
            yield f"{LINK_RATE}{{{port}}} {IB_RATE * trained:.0f}{ts}"
        for name, value in INFINIBAND_SERIES.items():
            if self._want(name):
                value = f"{wait:.0f}" if name == TRANSMIT_WAIT else value
                yield f"{name}{{{port}}} {value}{ts}"
        behind = s.ib_deficit[slot] if s is not None and s.ib_deficit else 0.0
        for name in INFINIBAND_TRAFFIC:
            if self._want(name):
                yield f"{name}{{{port}}} {(m + 1) * IB_BYTES_MINUTE - behind:.0f}{ts}"

    def _gpu_lines(self, s, m, target, node, gpu, fault, ts, clock, idle) -> Iterator[str]:
        labels = f'{target},gpu="{gpu}",uuid="{gpu_uuid(node, gpu)}",model="H100-SXM"'
        t = m * MINUTE
        struck = fault is not None and t >= fault.fault_s
        cause = fault.cause if fault is not None else ""
        lost = struck and cause in ("faulty_gpu", "gpu_thermal", "gpu_system_processor")
        values = {
            "trainsignals_gpu_up": "0" if lost else "1",
            "trainsignals_gpu_utilization_ratio": f"{s.busy if s.alive else 0.0}",
            "trainsignals_gpu_memory_used_bytes": "7.0e10" if s.alive else "1.0e9",
            "trainsignals_gpu_memory_total_bytes": "8.0e10",
            "trainsignals_gpu_power_watts": "650" if s.alive else "90",
            "trainsignals_gpu_temperature_celsius": "95" if cause == "gpu_thermal" else "66",
            "trainsignals_gpu_sm_clock_hertz": f"{clock:.4g}",  # a fail-slow throttles it
            # GPM: a hung collective spins (utilization 1.0) on few SMs with no tensor work.
            "trainsignals_gpu_sm_active_ratio": _activity(s, 0.8, 0.05),
            "trainsignals_gpu_tensor_active_ratio": _activity(s, 0.45, 0.0),
            "trainsignals_gpu_remapped_rows_pending": str(int(struck and cause == "gpu_hbm3")),
            "trainsignals_gpu_remapped_rows_failed": str(int(struck and cause == SDC)),
            # Every H100 SXM has NVLink; the replay's faults show through XIDs, not link errors.
            "trainsignals_gpu_nvlink_errors_all_links_total": "0",
        }
        if idle:  # waits for its rank, stuck in a data wait: no kernel runs
            values |= dict.fromkeys(IDLE_GPU, "0")
        if lost:  # a GPU off the bus answers nothing but its up flag
            values = {"trainsignals_gpu_up": "0"}
        for name, value in values.items():
            if self._want(name):
                yield f"{name}{{{labels}}} {value}{ts}"
        if lost:
            pass
        elif self._want("trainsignals_gpu_throttle_active"):
            hot = int(cause == "gpu_thermal")
            for reason in THROTTLE_REASONS:
                active = hot if reason == "hw_thermal_slowdown" else 0
                yield f'trainsignals_gpu_throttle_active{{{labels},reason="{reason}"}} {active}{ts}'
        if not lost and self._want("trainsignals_gpu_ecc_errors_total"):
            ecc = int(struck and cause == "gpu_hbm3")
            ecc_labels = f'{labels},error_type="uncorrected"'
            yield f"trainsignals_gpu_ecc_errors_total{{{ecc_labels}}} {ecc}{ts}"
        if struck and fault.xid is not None and self._want("trainsignals_gpu_xid_errors_total"):
            # The exporter's XID counter appears with the first event (the GPU's identity
            # labels stay readable from the driver's event even when the GPU is lost).
            yield f'trainsignals_gpu_xid_errors_total{{{labels},xid="{fault.xid}"}} 1{ts}'

    def write_blocks(self, work: Path, blocks_dir: Path) -> int:
        """Write and import every two-hour block; returns the number of samples written."""
        work.mkdir(parents=True, exist_ok=True)
        per_block = BLOCK_S // MINUTE
        running: subprocess.Popen | None = None
        previous: Path | None = None
        total = len(self.minutes)
        # Minute m is sampled at epoch + 60 (m + 1): block files follow TSDB's two-hour blocks.
        for block_first in range(-1, total, per_block):
            path = work / f"block-{block_first + 1:06d}.om"
            lines = 0
            with path.open("w") as out:
                for m in range(max(0, block_first), min(block_first + per_block, total)):
                    chunk = list(self.minute_lines(m))
                    if not chunk:
                        continue
                    lines += len(chunk)
                    out.write("\n".join(chunk))
                    out.write("\n")
                out.write("# EOF\n")
            self.samples += lines
            if not lines:
                path.unlink()
                continue
            running = _finish(running, previous)
            running = _import(path, blocks_dir)
            previous = path
        _finish(running, previous)
        return self.samples


def _import(path: Path, blocks_dir: Path) -> subprocess.Popen:
    return subprocess.Popen(
        ["promtool", "tsdb", "create-blocks-from", "openmetrics", "-q", str(path), str(blocks_dir)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )


def _finish(running: subprocess.Popen | None, path: Path | None) -> None:
    if running is None or path is None:
        return
    _, err = running.communicate()
    if running.returncode != 0:
        raise RuntimeError(f"promtool could not import {path}: {err.strip()}")
    path.unlink()


def _activity(s: Minute, training: float, stuck: float) -> str:
    if not s.alive:
        return "0"
    if s.busy >= 1.0:
        return f"{stuck}"
    return f"{training * s.busy:.3f}"


def import_openmetrics(paths: list[Path], blocks_dir: Path) -> None:
    """Import OpenMetrics files (one per block) into blocks_dir, two promtools at a time."""
    running: subprocess.Popen | None = None
    previous: Path | None = None
    for path in paths:
        _finish(running, previous)
        running, previous = _import(path, blocks_dir), path
    _finish(running, previous)
