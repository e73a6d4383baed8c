"""GPU activity in alert descriptions: how much of the GPU works, next to NVML's utilization.

The dashboard's "real busy" panel of the same series is in generator/dashboards/hardware.py.

Utilization only says a kernel was running during the sample: a hung NCCL collective or a GPU
waiting on a starved input pipeline can show 100%. SM activity (NVML GPM on the own exporter,
DCGM_FI_PROF_SM_ACTIVE or GR_ENGINE_ACTIVE on dcgm-exporter) and tensor-pipe activity drop.
"""

from __future__ import annotations


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
