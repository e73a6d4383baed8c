"""The straggler row: which ranks are slowest by their own work, and what they cost the job.

Panel ids 60-64 (signals/panels.py). Not placed by dashboards/job.py yet: the caller adds
`straggler_panels(b)` where the row belongs. The cost threshold drawn is the ticket's own
(`objectives.straggler_cost_min_ratio`, generator/signals/straggler.py).
"""

from __future__ import annotations

from grafanalib import core as g

from trainsignals.generator.alerts.definitions.straggler import TRAINING_STRAGGLER
from trainsignals.generator.dashboards.kit import GREEN, RED, PanelBuilder
from trainsignals.generator.signals.straggler import (
    COST,
    COST_JOB,
    FOR_SECONDS,
    RATIO,
    SMOOTHING,
    straggler_enabled,
)

TOP_K = 10  # ranks shown: the slowest few name the culprit, 16k lines would hide it


def straggler_panels(b: PanelBuilder) -> list[g.Panel]:
    """The stragglers' panels (the "Where is it slow" row places them) for a job of several
    ranks; none for a single rank (no peers)."""
    if not straggler_enabled(b.ctx):
        return []
    r, cost = b.r, b.o.straggler_cost_min_ratio
    slowest = b.series(
        "straggler",
        "Slowest ranks: throughput cost",
        f"The {TOP_K} ranks costing the job the most throughput beyond their usual: own work "
        "(step time less data and collective waits) above the median rank's and above the "
        f"rank's own 6h baseline, as a share of the job's stepping time. {TRAINING_STRAGGLER} "
        f"tickets at {cost:.0%} ({SMOOTHING // 60}m average, for {FOR_SECONDS // 60}m). The "
        "dashed line is that threshold; "
        "'job' is what the slowest rank costs, its usual excess included.",
        [
            b.target(f"topk({TOP_K}, {COST}{r})", "rank {{rank}} {{node}} GPU {{local_rank}}", "A"),
            b.target(f"{COST_JOB}{r}", "job", "B"),
        ],
        "percentunit",
        [(GREEN, None), (RED, cost)],
        w=12,
    )
    spread = b.series(
        "straggler_heatmap",
        "Own work per rank vs the median",
        f"Each rank's own work over the median rank's (1 = typical), the {TOP_K} highest and "
        "lowest: a rank that leaves the band is the suspect; one that is always above it (the "
        "last pipeline stage) is its own normal.",
        [
            b.target(f"topk({TOP_K}, {RATIO}{r})", "rank {{rank}} {{node}}", "A"),
            b.target(f"bottomk({TOP_K}, {RATIO}{r})", "rank {{rank}} {{node}}", "B"),
        ],
        "none",
        w=12,
    )
    return [slowest, spread]
