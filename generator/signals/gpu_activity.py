"""The "real busy" panel: how much of the GPU works, next to NVML's kernel-running utilization.

Utilization only says a kernel was running during the sample: a hung NCCL collective or a GPU
waiting on a starved input pipeline can show 100%. SM activity (NVML GPM on the own exporter,
DCGM_FI_PROF_SM_ACTIVE or GR_ENGINE_ACTIVE on dcgm-exporter) and tensor-pipe activity drop.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from trainsignals.generator.signals.gpu_sources import gpu_source

if TYPE_CHECKING:  # dashboard_kit imports the alerts, which import this module
    import grafanalib.core as g
    from trainsignals.generator.dashboards.kit import PanelBuilder


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


def activity_now(ctx) -> str:
    """Alert-description text with the job's GPU activity at firing time (Prometheus `query`).

    For the hang and starvation alerts: utilization near 100% with low busy or tensor activity
    is a hung collective or a starved GPU, not work.
    """
    r = ctx.recorded()
    parts = []
    for what, name in (
        ("utilization", "utilization"),
        ("busy", "busy"),
        ("tensor", "tensor_active"),
    ):
        expr = f"avg(gpu:trainsignals_gpu_{name}:ratio{r})"
        parts.append(
            f"{what} {{{{ with query `{expr}` }}}}{{{{ . | first | value | humanizePercentage }}}}"
            "{{ else }}n/a{{ end }}"
        )
    return " GPUs at firing time (job average): " + ", ".join(parts) + "."
