"""GPU faults: a GPU lost, uncorrectable ECC, XIDs, row remapping. Pages with recovery manual,
infra tickets otherwise (the node itself: reachability.py; degraded GPUs: gpu_conditions.py)."""

from __future__ import annotations

from collections.abc import Callable

from trainsignals.generator.alerts.definitions.gpu_conditions import GPU_EXPORTER_NVML_ERRORS
from trainsignals.generator.alerts.definitions.gpu_labels import GPU_ID, named_gpu
from trainsignals.generator.alerts.definitions.training import TRAINING_TARGETS_DOWN
from trainsignals.generator.alerts.model import PROGRESS_SYMPTOM, AlertGroup, Explains, Rule
from trainsignals.generator.signals.gpu import gpu_source
from trainsignals.generator.signals.promql import RuleContext
from trainsignals.generator.spec.durations import format_duration
from trainsignals.generator.testkit.faults import FAULT_ONSET, GPU_HEALTHY, FaultCase, after
from trainsignals.generator.testkit.series_notation import STALE

GROUP = AlertGroup()
# Names other modules import (no module outside a definition types an alert's name).
GPU_UNCORRECTABLE_ECC_ERRORS = "GpuUncorrectableEccErrors"
GPU_XID_ERROR = "GpuXidError"
GPU_REMAPPED_ROWS_PENDING = "GpuRemappedRowsPending"
GPU_LOST = "GpuLost"
GPU_XID_CRITICAL = "GpuXidCritical"
onset = FAULT_ONSET
# Application-fault XIDs, one of which the GpuXidError test injects.
APPLICATION_XIDS = (13, 31, 43, 45)
REMAP_SEEN_WITHIN = 900  # a remap state seen this recently still tickets (see below)
# The XIDs the driver logs for a fault another alert of the same GPU already reports
# (generator/signals/xid_catalog.py): the same fault, one page. An uncorrectable ECC error is
# XID 48 (double bit) before Ampere, 94 (contained) or 95 (uncontained) on A100 / H100.
XID_FELL_OFF_BUS = (79,)
# A GSP (GPU System Processor) RPC timeout leaves the GPU unanswering NVML as well: GpuLost.
XID_GSP_TIMEOUT = (119,)
XID_UNCORRECTABLE_ECC = (48, 94, 95)
SAME_GPU = ("training_job", "node", "gpu")
XID_ALERTS = (GPU_XID_CRITICAL, GPU_XID_ERROR)  # a code is one or the other (xid_page_codes)


def _codes(codes: tuple[int, ...]) -> tuple[tuple[str, str], ...]:
    return (("xid", "|".join(map(str, codes))),)


def _in_words(codes: tuple[int, ...]) -> str:
    return " / ".join(map(str, codes))


CRASHES_RANK = Explains(
    "A lost GPU or a critical XID crashes (or hangs) the rank on that GPU, and with it "
    "every collective of the job: the missing rank, the stall and the slowdown are the "
    "same fault, which already paged once.",
    alerts=(TRAINING_TARGETS_DOWN,),
    roles=(PROGRESS_SYMPTOM,),
)


def _xid_labels(ctx: RuleContext) -> tuple[str, ...]:
    # Both sources carry the code as `xid` and NVIDIA's immediate action as `action`
    # (generator/signals/xid_catalog.py; codes outside its table have none).
    return (*GPU_ID, "xid", "action")


@GROUP.alert(
    GPU_LOST,
    signal="infrastructure",
    severity="page",
    auto_restart="ticket",
    owner="infra",
    node_scoped=True,
    hardware_fault=True,
    explains=(
        CRASHES_RANK,
        Explains(
            "A lost GPU cannot answer NVML queries: the exporter's NVML errors for that GPU are "
            "the symptom, not a second problem.",
            alerts=(GPU_EXPORTER_NVML_ERRORS,),
            equal=SAME_GPU,
        ),
        Explains(
            f"A GPU that fell off the bus logs XID {_in_words(XID_FELL_OFF_BUS)}, one whose GSP "
            f"stopped answering XID {_in_words(XID_GSP_TIMEOUT)}: the XID alert of that GPU is "
            "the same fault, one page.",
            alerts=XID_ALERTS,
            equal=SAME_GPU,
            target_labels=_codes(XID_FELL_OFF_BUS + XID_GSP_TIMEOUT),
        ),
    ),
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
    GPU_UNCORRECTABLE_ECC_ERRORS,
    signal="infrastructure",
    severity="page",
    auto_restart="ticket",
    owner="infra",
    node_scoped=True,
    hardware_fault=True,
    explains=(
        Explains(
            "An uncorrectable ECC error logs XID "
            f"{_in_words(XID_UNCORRECTABLE_ECC)}: the XID alert of that GPU is the same fault, "
            "one page.",
            alerts=XID_ALERTS,
            equal=SAME_GPU,
            target_labels=_codes(XID_UNCORRECTABLE_ECC),
        ),
    ),
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
            FaultCase("", 4, labels=GPU_ID, gpu_overrides={"ecc_uncorrected": after(onset, 2, 0)}),
            # The restart drains the node: every series of the GPU ends. The alert still
            # reads its 10m window, and must keep its labels (the UUID included) while it
            # does: a label change is a resolve and a new alert, a second page.
            FaultCase(
                "",
                3,
                labels=GPU_ID,
                gpu_overrides=_drained(ecc_uncorrected=2),
                holds_for=5,
                what="on a GPU drained 2m after the error (its series vanish)",
            ),
        ],
    )


@GROUP.alert(
    GPU_XID_CRITICAL,
    signal="infrastructure",
    severity="page",
    auto_restart="ticket",
    owner="infra",
    node_scoped=True,
    hardware_fault=True,
    explains=(CRASHES_RANK,),
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
    GPU_XID_ERROR,
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


DRAINED_AFTER = 2  # minutes after onset


def _drained(**faulty: float) -> dict[str, Callable[[int], float | str | None]]:
    """GPU 0's signals: healthy (or `faulty` from onset) until the node is drained, then a
    staleness marker as Prometheus writes for a vanished target, then nothing. The
    throttle reasons stay (DCGM adds them into one bitmask series)."""

    def series(healthy: float, fault: float | None) -> Callable[[int], float | str | None]:
        def value(minute: int) -> float | str | None:
            if minute < onset + DRAINED_AFTER:
                return fault if fault is not None and minute >= onset else healthy
            return STALE if minute == onset + DRAINED_AFTER else None

        return value

    kept = ("thermal_throttle", "power_throttle")
    return {
        signal: series(healthy, faulty.get(signal))
        for signal, healthy in GPU_HEALTHY.items()
        if signal not in kept
    }


def _failed_then_drained(minute: int) -> float | None:
    """A failed remap shown for 2 minutes, then the GPU's series ends (drained)."""
    if minute < onset:
        return 0
    return 1 if minute < onset + 2 else None


@GROUP.alert(
    GPU_REMAPPED_ROWS_PENDING,
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
