"""GPUs running degraded (throttled, hot, memory near full) and the GPU exporter going blind:
tickets, to infra but for memory (the job's batch size)."""

from __future__ import annotations

from trainsignals.generator.alerts.definitions.gpu_labels import GPU_ID, named_gpu
from trainsignals.generator.alerts.model import AlertGroup, Rule
from trainsignals.generator.signals.gpu import gpu_source
from trainsignals.generator.signals.promql import RuleContext
from trainsignals.generator.testkit.faults import FAULT_ONSET, FaultCase, after

GROUP = AlertGroup()
GPU_EXPORTER_NVML_ERRORS = "GpuExporterNvmlErrors"  # explained by a lost GPU
# Names other modules import (no module outside a definition types an alert's name).
GPU_THERMAL_THROTTLING = "GpuThermalThrottling"
GPU_POWER_THROTTLING = "GpuPowerThrottling"
GPU_TEMPERATURE_HIGH = "GpuTemperatureHigh"
GPU_EXPORTER_DOWN = "GpuExporterDown"
GPU_MEMORY_NEAR_FULL = "GpuMemoryNearFull"
onset = FAULT_ONSET


def _throttling(ctx: RuleContext, signal: str, how: str, cause: str, consequence: str = "") -> Rule:
    o = ctx.spec.objectives
    return Rule(
        expr=named_gpu(
            ctx,
            f"avg_over_time(gpu:trainsignals_gpu_{signal}:active{ctx.recorded()}"
            f"[{ctx.range(900)}]) > {o.throttle_max_ratio:g}",
        ),
        for_seconds=900,
        summary="{{ $labels.training_job }}: {{ $labels.node }} GPU {{ $labels.gpu }} "
        f"{how} throttled {{{{ $value | humanizePercentage }}}} of the time",
        description=f"{cause} held GPU {{{{ $labels.gpu }}}} on {{{{ $labels.node }}}} down for "
        "{{ $value | humanizePercentage }} of the last 15 minutes (tolerated "
        f"{o.throttle_max_ratio:.0%}).{consequence}",
        panel="gpu_throttle",
        threshold=f"> {o.throttle_max_ratio:.0%} of time",
        window="15m",
        faults=[FaultCase("", 22, labels=GPU_ID, gpu_overrides={signal: after(onset, 1, 0)})],
    )


@GROUP.alert(
    GPU_THERMAL_THROTTLING,
    signal="infrastructure",
    severity="ticket",
    owner="infra",
    node_scoped=True,
    meaning="A GPU's clocks are held down by thermal slowdown for a sustained share of time.",
)
def gpu_thermal_throttling(ctx: RuleContext) -> Rule:
    return _throttling(
        ctx,
        "thermal_throttle",
        "thermally",
        "Thermal slowdown",
        " The whole job runs at the slowest GPU's pace.",
    )


@GROUP.alert(
    GPU_POWER_THROTTLING,
    signal="infrastructure",
    severity="ticket",
    owner="infra",
    node_scoped=True,
    meaning="A GPU's clocks are held down by power capping or power brake for a sustained "
    "share of time.",
)
def gpu_power_throttling(ctx: RuleContext) -> Rule:
    return _throttling(ctx, "power_throttle", "power", "Power capping or power brake")


@GROUP.alert(
    GPU_TEMPERATURE_HIGH,
    signal="infrastructure",
    severity="ticket",
    owner="infra",
    node_scoped=True,
    meaning="A GPU runs hotter than gpu_temperature_max_celsius.",
)
def gpu_temperature_high(ctx: RuleContext) -> Rule:
    o = ctx.spec.objectives
    limit = o.gpu_temperature_max_celsius
    return Rule(
        expr=named_gpu(
            ctx,
            f"gpu:trainsignals_gpu_temperature:celsius{ctx.recorded()} > {limit:g}",
        ),
        for_seconds=600,
        summary="{{ $labels.training_job }}: {{ $labels.node }} GPU {{ $labels.gpu }} at "
        "{{ $value }} C",
        description="GPU {{ $labels.gpu }} on {{ $labels.node }} runs at {{ $value }} C, above "
        f"{limit:g} C, for 10 minutes.",
        panel="gpu_temperature",
        threshold=f"> {limit:g} C",
        window="instant",
        faults=[
            FaultCase(
                "",
                12,
                labels=GPU_ID,
                gpu_overrides={"temperature": after(onset, limit + 5, 65.0)},
            )
        ],
    )


@GROUP.alert(
    GPU_MEMORY_NEAR_FULL,
    signal="saturation",
    severity="ticket",
    node_scoped=True,
    meaning="A GPU's memory use is above gpu_memory_max_ratio: the next larger batch or "
    "fragmentation will OOM.",
)
def gpu_memory_near_full(ctx: RuleContext) -> Rule:
    o = ctx.spec.objectives
    memory_fault = (1 + o.gpu_memory_max_ratio) / 2
    return Rule(
        expr=named_gpu(
            ctx,
            f"gpu:trainsignals_gpu_memory_used:ratio{ctx.recorded()} > {o.gpu_memory_max_ratio:g}",
        ),
        for_seconds=1800,
        summary="{{ $labels.training_job }}: {{ $labels.node }} GPU {{ $labels.gpu }} memory "
        "{{ $value | humanizePercentage }} used",
        description="GPU {{ $labels.gpu }} on {{ $labels.node }} uses "
        "{{ $value | humanizePercentage }} of its memory (limit "
        f"{o.gpu_memory_max_ratio:.0%}) for 30 minutes.",
        panel="gpu_memory",
        threshold=f"> {o.gpu_memory_max_ratio:.0%}",
        window="instant",
        faults=[
            FaultCase(
                "",
                32,
                labels=GPU_ID,
                gpu_overrides={"memory_used_ratio": after(onset, memory_fault, 0.75)},
            )
        ],
    )


@GROUP.alert(
    GPU_EXPORTER_DOWN,
    signal="infrastructure",
    severity="ticket",
    owner="infra",
    node_scoped=True,
    meaning="A node's GPU exporter is not scraped while its training ranks are: GPU signals of "
    "that node are blind.",
)
def gpu_exporter_down(ctx: RuleContext) -> Rule:
    return Rule(
        expr=f"up{ctx.gpu_targets()} == 0 and on (node) "
        f"max by (node) (up{ctx.training_targets()}) > 0",
        for_seconds=600,
        summary="{{ $labels.training_job }}: GPU exporter on {{ $labels.node }} is down",
        description="The GPU exporter on {{ $labels.node }} does not answer scrapes while the "
        "node's training ranks do: GPU faults on that node go unseen.",
        panel="gpu_count",
        threshold="exporter down, node up",
        window="instant",
        faults=[
            FaultCase(
                "",
                12,
                labels=("node",),
                targets_down=lambda kind, node, m: (
                    kind == "gpu" and node == "node-0" and m >= onset
                ),
                # Reads raw `up`, so the selector labels come along.
                extra_labels={k: v for k, v in ctx.spec.selector_labels.items() if k != "job"},
            )
        ],
    )


@GROUP.alert(
    GPU_EXPORTER_NVML_ERRORS,
    signal="infrastructure",
    severity="ticket",
    owner="infra",
    node_scoped=True,
    meaning="The GPU exporter keeps getting NVML errors for a GPU.",
)
def gpu_exporter_nvml_errors(ctx: RuleContext) -> Rule | None:
    if not gpu_source(ctx).reports_nvml_errors:
        return None
    return Rule(
        expr=named_gpu(
            ctx,
            f"gpu:trainsignals_gpu_nvml_errors:rate15m{ctx.recorded()} > 0",
        ),
        for_seconds=900,
        summary="{{ $labels.training_job }}: NVML errors on {{ $labels.node }} GPU "
        "{{ $labels.gpu }}",
        description="The GPU exporter gets {{ $value | humanize }} NVML errors per second for "
        "GPU {{ $labels.gpu }} on {{ $labels.node }}; some of its metrics are missing.",
        panel="gpu_errors",
        threshold="> 0/s",
        window="15m",
        faults=[
            FaultCase(
                "",
                17,
                labels=GPU_ID,
                gpu_overrides={"nvml_errors": lambda m: float(max(0, m - onset))},
            )
        ],
    )
