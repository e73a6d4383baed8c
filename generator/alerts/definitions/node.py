"""GPUs: the hardware causes. Pages with recovery manual, infra tickets otherwise (the node
itself: reachability.py)."""

from __future__ import annotations

from trainsignals.generator.alerts.model import AlertGroup, Rule
from trainsignals.generator.signals.faults import FAULT_ONSET, GPU_HEALTHY, FaultCase, after
from trainsignals.generator.signals.gpu import gpu_source
from trainsignals.generator.signals.promql import RuleContext
from trainsignals.generator.spec.durations import format_duration

GROUP = AlertGroup()
onset = FAULT_ONSET
GPU_NODE = ("node", "gpu")
GPU_ID = (*GPU_NODE, "uuid")  # what a per-GPU ticket names: node, index and UUID
# Application-fault XIDs, one of which the GpuXidError test injects.
APPLICATION_XIDS = (13, 31, 43, 45)
REMAP_SEEN_WITHIN = 900  # a remap state seen this recently still tickets (see below)


def named_gpu(ctx: RuleContext, expr: str) -> str:
    """`expr` with each GPU's UUID joined in, so a ticket names the very board to replace.

    The UUID comes from gpu:trainsignals_gpu_uuid:info; a GPU the source no longer reports
    (dcgm-exporter drops a lost GPU) keeps its alert, without a UUID.
    """
    info = f"gpu:trainsignals_gpu_uuid:info{ctx.recorded()}"
    match = "on (training_job, node, gpu)"
    return f"({expr}) * {match} group_left (uuid) {info} or (({expr}) unless {match} {info})"


def _xid_labels(ctx: RuleContext) -> tuple[str, ...]:
    # Both sources carry the code as `xid` and NVIDIA's immediate action as `action`
    # (generator/xid_catalog.py; codes outside its table have none).
    return (*GPU_ID, "xid", "action")


@GROUP.alert(
    "GpuLost",
    signal="infrastructure",
    severity="page",
    auto_restart="ticket",
    owner="infra",
    node_scoped=True,
    meaning="A GPU stopped answering NVML (fell off the bus) or is missing from its node.",
)
def gpu_lost(ctx: RuleContext) -> Rule:
    r, gpus, source = ctx.recorded(), ctx.spec.shape.gpus_per_node, gpu_source(ctx)
    presence = source.presence_signal
    return Rule(
        expr=named_gpu(
            ctx,
            f"gpu:trainsignals_gpu_up:value{r} == 0 or on (training_job, node) "
            f"node:trainsignals_gpus:count{r} < {gpus}",
        ),
        for_seconds=60,
        summary="{{ $labels.training_job }}: GPU lost on {{ $labels.node }} {{ $labels.gpu }}",
        description="A GPU on {{ $labels.node }} stopped answering NVML (fell off the bus, XID "
        f"79) or the node reports fewer than {gpus} GPUs (value: {{{{ $value }}}}).",
        panel="gpu_count",
        threshold=f"GPU unreachable or < {gpus} per node",
        window="instant",
        faults=[
            FaultCase(
                "",
                8,
                labels=GPU_ID if source.reports_gpu_up else ("node",),
                gpu_overrides={
                    presence: after(
                        onset, 0 if source.reports_gpu_up else None, GPU_HEALTHY[presence]
                    )
                },
            )
        ],
    )


@GROUP.alert(
    "GpuUncorrectableEccErrors",
    signal="infrastructure",
    severity="page",
    auto_restart="ticket",
    owner="infra",
    node_scoped=True,
    meaning="A GPU reported uncorrectable (double-bit) ECC errors: results may be corrupt.",
)
def gpu_uncorrectable_ecc(ctx: RuleContext) -> Rule:
    return Rule(
        expr=named_gpu(
            ctx,
            f"gpu:trainsignals_gpu_ecc_uncorrected:increase10m{ctx.recorded()} > 0",
        ),
        for_seconds=60,
        summary="{{ $labels.training_job }}: uncorrectable ECC errors on {{ $labels.node }} "
        "GPU {{ $labels.gpu }}",
        description="GPU {{ $labels.gpu }} on {{ $labels.node }} reported "
        "{{ $value | humanize }} uncorrectable ECC errors in 10 minutes. Results computed "
        "there may be corrupt.",
        panel="gpu_errors",
        threshold="> 0 in 10m",
        window="10m",
        faults=[
            FaultCase("", 4, labels=GPU_ID, gpu_overrides={"ecc_uncorrected": after(onset, 2, 0)})
        ],
    )


@GROUP.alert(
    "GpuXidCritical",
    signal="infrastructure",
    severity="page",
    auto_restart="ticket",
    owner="infra",
    node_scoped=True,
    meaning="A GPU reported an XID error that needs the node drained (see xid_page_codes).",
)
def gpu_xid_critical(ctx: RuleContext) -> Rule:
    o = ctx.spec.objectives
    return Rule(
        expr=named_gpu(
            ctx,
            f"gpu:trainsignals_gpu_xid_critical:seen10m{ctx.recorded()} > 0",
        ),
        for_seconds=60,
        summary="{{ $labels.training_job }}: critical XID on {{ $labels.node }} GPU "
        "{{ $labels.gpu }}",
        description="GPU {{ $labels.gpu }} on {{ $labels.node }} reported XID {{ $labels.xid }} "
        f"(page codes: {', '.join(map(str, o.xid_page_codes))}).",
        panel="gpu_errors",
        threshold=f"XID in {list(o.xid_page_codes)}",
        window="10m",
        faults=[
            FaultCase(
                "",
                4,
                labels=_xid_labels(ctx),
                gpu_overrides={f"xid:{o.xid_page_codes[0]}": after(onset, 1)},
            )
        ],
    )


@GROUP.alert(
    "GpuXidError",
    signal="infrastructure",
    severity="ticket",
    owner="infra",
    node_scoped=True,
    meaning="A GPU reported an XID error that is not in xid_page_codes (mostly application "
    "faults).",
)
def gpu_xid_error(ctx: RuleContext) -> Rule:
    o = ctx.spec.objectives
    other = next(c for c in APPLICATION_XIDS if c not in o.xid_page_codes)
    return Rule(
        expr=named_gpu(
            ctx,
            f"gpu:trainsignals_gpu_xid_other:seen10m{ctx.recorded()} > 0",
        ),
        for_seconds=60,
        summary="{{ $labels.training_job }}: XID {{ $labels.xid }} on {{ $labels.node }} GPU "
        "{{ $labels.gpu }}",
        description="GPU {{ $labels.gpu }} on {{ $labels.node }} reported an XID error outside "
        "the page list, usually an application fault (13, 31, 43, 45).",
        panel="gpu_errors",
        threshold="other XID",
        window="10m",
        faults=[
            FaultCase(
                "", 4, labels=_xid_labels(ctx), gpu_overrides={f"xid:{other}": after(onset, 1)}
            )
        ],
    )


def _failed_then_drained(minute: int) -> float | None:
    """A failed remap shown for 2 minutes, then the GPU's series ends (drained)."""
    if minute < onset:
        return 0
    return 1 if minute < onset + 2 else None


@GROUP.alert(
    "GpuRemappedRowsPending",
    signal="infrastructure",
    severity="ticket",
    owner="infra",
    node_scoped=True,
    meaning="A GPU has a pending or failed row remapping: reset it at the next restart.",
)
def gpu_remapped_rows_pending(ctx: RuleContext) -> Rule:
    return Rule(
        # Seen in the last 15m, not only now: the GPU's state does not flap, but a self-healing
        # job's restart drains the GPU within minutes and its series go with it, and the GPU
        # still needs repair (the fleet replay's silent-data-corruption GPUs, 1-3 min each).
        expr=named_gpu(
            ctx,
            f"max_over_time(gpu:trainsignals_gpu_remapped_rows:pending{ctx.recorded()}"
            f"[{ctx.range(REMAP_SEEN_WITHIN)}]) > 0",
        ),
        for_seconds=60,
        summary="{{ $labels.training_job }}: row remapping pending on {{ $labels.node }} GPU "
        "{{ $labels.gpu }}",
        description="GPU {{ $labels.gpu }} on {{ $labels.node }} has a pending or failed memory "
        "row remapping; it needs a reset at the next restart.",
        panel="gpu_errors",
        threshold="pending",
        window=format_duration(REMAP_SEEN_WITHIN),
        faults=[
            FaultCase(
                "", 12, labels=GPU_ID, gpu_overrides={"remapped_rows_pending": after(onset, 1, 0)}
            ),
            # A failed remap with nothing pending: the exporter serves both series, and an
            # `or` of the two once dropped the failure (the fleet replay's six SDC GPUs).
            FaultCase(
                "",
                12,
                labels=GPU_ID,
                gpu_overrides={"remapped_rows_failed": after(onset, 1, 0)},
                what="on a failed remap",
            ),
            # ...seen for 2 minutes, then the restart drains the GPU and its series ends.
            FaultCase(
                "",
                5,
                labels=GPU_ID,
                gpu_overrides={"remapped_rows_failed": _failed_then_drained},
                what="on a failed remap drained 2m later",
            ),
        ],
    )


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
    "GpuThermalThrottling",
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
    "GpuPowerThrottling",
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
    "GpuTemperatureHigh",
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
    "GpuMemoryNearFull",
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
    "GpuExporterDown",
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
    "GpuExporterNvmlErrors",
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
