"""The dashboard's hardware rows: the job's GPUs (with their activity, MIG instances, NVLink and
the InfiniBand fabric) and its nodes (checkpoint disk, network). Split from
generator/dashboards/job.py, which lays out the whole dashboard."""

from __future__ import annotations

from grafanalib import core as g

from trainsignals.generator.alerts.definitions.loss_checkpoint import CHECKPOINT_DISK_FILLING_UP
from trainsignals.generator.dashboards.gpu_mig import mig_panels, nvlink_panel
from trainsignals.generator.dashboards.kit import PanelBuilder, red_above, red_below
from trainsignals.generator.signals.fabric import LINK_DOWNED, PORT_ERRORS, PORT_UP, fabric_enabled
from trainsignals.generator.signals.gpu import gpu_source
from trainsignals.generator.signals.promql import regex


def gpu_activity_panels(builder: PanelBuilder, r: str, legend: str) -> list[g.Panel]:
    """The activity panel; only the series this job's GPU source records."""
    recorded = gpu_source(builder.ctx).recordings()
    wanted = (
        ("gpu:trainsignals_gpu_busy:ratio", "busy"),
        ("gpu:trainsignals_gpu_tensor_active:ratio", "tensor"),
        ("gpu:trainsignals_gpu_dram_active:ratio", "DRAM"),
    )
    targets = [(f"{name}{r}", f"{legend} {what}") for name, what in wanted if name in recorded]
    return [
        builder.series(
            "gpu_activity",
            "GPU activity (real busy)",
            "Busy: share of SMs with work (GPM / DCGM profiling; utilization where neither "
            "exists). Tensor and DRAM: share of cycles those units were active. A hang or a "
            "starved input pipeline keeps utilization high while these drop.",
            builder.targets(*targets),
            "percentunit",
            valueMin=0,
            valueMax=1,
        )
    ]


def fabric_panels(builder: PanelBuilder, r: str) -> list:
    """Per node: ports down, link-downs in the last hour, error counters per second."""
    if not fabric_enabled(builder.ctx):
        return []
    return [
        builder.series(
            "fabric",
            "InfiniBand fabric",
            "Per node: ports not ACTIVE, link-downs in the last hour, and symbol, receive "
            "and link-recovery errors per second (node_exporter's infiniband collector).",
            builder.targets(
                (f"sum by (node) (1 - {PORT_UP}{r})", "{{node}} ports down"),
                (f"sum by (node) ({LINK_DOWNED}{r})", "{{node}} link-downs in 1h"),
                (f"sum by (node) ({PORT_ERRORS}{r})", "{{node}} errors/s"),
            ),
            "short",
        )
    ]


def gpu_panels(b: PanelBuilder) -> list[g.Panel]:
    """The GPUs row: utilization and activity, memory, temperature, power, clocks, errors."""
    o, r, spec = b.o, b.r_gpu, b.spec
    legend = "{{node}}/{{gpu}}"
    w15 = b.ctx.range(900)
    errors = [
        (f"gpu:trainsignals_gpu_ecc_uncorrected:increase10m{r}", f"{legend} ECC uncorrected"),
        (f"gpu:trainsignals_gpu_xid_critical:seen10m{r}", f"{legend} XID {{{{xid}}}} critical"),
        (f"gpu:trainsignals_gpu_xid_other:seen10m{r}", f"{legend} XID {{{{xid}}}}"),
        (f"gpu:trainsignals_gpu_remapped_rows:pending{r}", f"{legend} remapped rows pending"),
    ]
    if gpu_source(b.ctx).reports_nvml_errors:
        errors.append((f"gpu:trainsignals_gpu_nvml_errors:rate15m{r}", f"{legend} NVML errors/s"))
    return [
        b.layout.row("GPUs (per node and GPU)"),
        b.series(
            "gpu_utilization",
            "GPU utilization",
            "Share of time a kernel was running.",
            b.targets((f"gpu:trainsignals_gpu_utilization:ratio{r}", legend)),
            "percentunit",
            valueMin=0,
            valueMax=1,
        ),
        *gpu_activity_panels(b, r, legend),
        b.series(
            "gpu_memory",
            "GPU memory used",
            "Device memory used as a share of the total.",
            b.targets((f"gpu:trainsignals_gpu_memory_used:ratio{r}", legend)),
            "percentunit",
            red_above(o.gpu_memory_max_ratio),
        ),
        b.series(
            None,
            "GPU memory used (bytes)",
            "Device memory used.",
            b.targets((f"gpu:trainsignals_gpu_memory_used:bytes{r}", legend)),
            "bytes",
        ),
        b.series(
            "gpu_power",
            "GPU power",
            "Power draw.",
            b.targets((f"gpu:trainsignals_gpu_power:watts{r}", legend)),
            "watt",
        ),
        b.series(
            "gpu_temperature",
            "GPU temperature",
            "GPU core temperature.",
            b.targets((f"gpu:trainsignals_gpu_temperature:celsius{r}", legend)),
            "celsius",
            red_above(o.gpu_temperature_max_celsius),
        ),
        b.series(
            "gpu_throttle",
            "GPU throttling",
            f"Share of the last {w15} with thermal or power throttling active.",
            b.targets(
                (
                    f"avg_over_time(gpu:trainsignals_gpu_thermal_throttle:active{r}[{w15}])",
                    f"{legend} thermal",
                ),
                (
                    f"avg_over_time(gpu:trainsignals_gpu_power_throttle:active{r}[{w15}])",
                    f"{legend} power",
                ),
            ),
            "percentunit",
            red_above(o.throttle_max_ratio),
        ),
        b.series(
            None,
            "SM clock",
            "Streaming-multiprocessor clock; drops when throttled.",
            b.targets((f"gpu:trainsignals_gpu_sm_clock:hertz{r}", legend)),
            "hertz",
        ),
        b.series(
            "gpu_errors",
            "GPU errors",
            "Uncorrectable ECC errors and XID events in 10m, pending row remaps"
            + (", NVML errors." if len(errors) > 4 else "."),
            b.targets(*errors),
            "short",
            showPoints="always",
        ),
        *nvlink_panel(b, r, legend),
        b.series(
            "gpu_count",
            "GPUs per node",
            f"GPUs reporting per node (the spec expects {spec.shape.gpus_per_node}) and "
            "whether the node's GPU exporter answers scrapes.",
            b.targets(
                (f"node:trainsignals_gpus:count{b.r_node}", "{{node}} GPUs"),
                (
                    f"up{b.ctx.raw(job=spec.scrape_jobs.gpu, node=regex('$node'))}",
                    "{{node}} exporter up",
                ),
            ),
            "short",
            red_below(spec.shape.gpus_per_node),
        ),
        *mig_panels(b, r),
    ]


def node_panels(b: PanelBuilder) -> list[g.Panel]:
    """The nodes row: checkpoint disk and network."""
    o, r = b.o, b.r_node
    return [
        b.layout.row("Nodes: checkpoint disk and network"),
        b.series(
            "disk",
            "Checkpoint disk free",
            "Free share of the file system holding the checkpoint directory.",
            b.targets((f"node:trainsignals_checkpoint_disk_free:ratio{r}", "{{node}} {{path}}")),
            "percentunit",
            red_below(o.disk_free_min_ratio),
        ),
        b.series(
            None,
            "Checkpoint disk free (bytes)",
            f"Free bytes; {CHECKPOINT_DISK_FILLING_UP} extrapolates this trend.",
            b.targets((f"node:trainsignals_checkpoint_disk_free:bytes{r}", "{{node}} {{path}}")),
            "bytes",
        ),
        b.series(
            "network",
            "Network",
            "Bytes per second over all devices but lo.",
            b.targets(
                (f"node:trainsignals_network_receive_bytes:rate5m{r}", "{{node}} receive"),
                (f"node:trainsignals_network_transmit_bytes:rate5m{r}", "{{node}} transmit"),
            ),
            "Bps",
        ),
        *fabric_panels(b, r),
    ]
