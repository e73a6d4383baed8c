"""What a per-GPU alert names: node, GPU index and, joined from the recorded info, its UUID."""

from __future__ import annotations

from trainsignals.generator.signals.promql import RuleContext

GPU_NODE = ("node", "gpu")
GPU_ID = (*GPU_NODE, "uuid")  # what a per-GPU ticket names: node, index and UUID


def named_gpu(ctx: RuleContext, expr: str) -> str:
    """`expr` with each GPU's UUID joined in, so a ticket names the very board to replace.

    The UUID comes from gpu:trainsignals_gpu_uuid:info; a GPU the source no longer reports
    (dcgm-exporter drops a lost GPU) keeps its alert, without a UUID.
    """
    info = f"gpu:trainsignals_gpu_uuid:info{ctx.recorded()}"
    match = "on (training_job, node, gpu)"
    return f"({expr}) * {match} group_left (uuid) {info} or (({expr}) unless {match} {info})"
