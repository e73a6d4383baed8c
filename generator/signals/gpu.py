"""The GPU source a spec reads: trainsignals' own exporter or NVIDIA's dcgm-exporter.

generator/signals/gpu_sources.py holds the base class and the own exporter,
generator/signals/dcgm_source.py builds dcgm-exporter's on it; this module picks one.
"""

from __future__ import annotations

from trainsignals.generator.signals.dcgm_source import DcgmExporter
from trainsignals.generator.signals.gpu_sources import GpuSource, OwnExporter
from trainsignals.generator.signals.promql import RuleContext


def gpu_source(ctx: RuleContext) -> GpuSource:
    return {"trainsignals": OwnExporter, "dcgm": DcgmExporter}[ctx.spec.gpu_metrics](ctx)
