"""A straggler: one rank whose own work slows the whole job (generator/signals/straggler.py).

Slow rather than dead: a host CPU, a throttled GPU, a noisy neighbour. The job still makes
progress, so it is a ticket, never a page, to whoever repairs hardware, naming the node, the
rank and the GPU. NodeDown explains it (node_scoped); a restart does not ticket (the rank's
incarnation must be older than MIN_INCARNATION_AGE).
"""

from __future__ import annotations

from trainsignals.generator.alerts.model import AlertGroup, Rule
from trainsignals.generator.signals.promql import RuleContext
from trainsignals.generator.signals.straggler import (
    FOR_SECONDS,
    MIN_INCARNATION_AGE,
    SMOOTHING,
    straggler_enabled,
    straggler_expr,
)
from trainsignals.generator.testkit.faults import FAULT_ONSET, FaultCase, JobTimeline
from trainsignals.generator.testkit.input_series import RawSeries
from trainsignals.generator.testkit.own_work import own_work_series

GROUP = AlertGroup()
# Names other modules import (no module outside a definition types an alert's name).
TRAINING_STRAGGLER = "TrainingStraggler"

# The straggler of the generated fault test: 15% more own work than a healthy rank.
FAULT_EXCESS = 0.15
# The generated test's straggler: an extra rank on node-0, its first GPU (the job series'
# ranks 0 and 1 carry no local_rank).
FAULT_RANK = {"node": "node-0", "rank": "2", "local_rank": "0"}


def _slow_rank(rule_ctx: RuleContext, minutes: int) -> list[RawSeries]:
    factor = [1 + FAULT_EXCESS if m >= FAULT_ONSET else 1.0 for m in range(minutes + 1)]
    return own_work_series(JobTimeline(rule_ctx, minutes).build(), FAULT_RANK, factor)


@GROUP.alert(
    TRAINING_STRAGGLER,
    signal="infrastructure",
    severity="ticket",
    owner="infra",
    node_scoped=True,
    meaning="One rank's own work (step time less data wait and collectives) is above the "
    "job's median by enough to cost the job throughput, beyond what that rank usually costs, "
    f"for {FOR_SECONDS // 60} minutes: a slow host, GPU or neighbour on its node.",
)
def training_straggler(ctx: RuleContext) -> Rule | None:
    if not straggler_enabled(ctx):
        return None
    cost = ctx.spec.objectives.straggler_cost_min_ratio
    cadence = ctx.spec.cadence
    # Held through the job's longest pause (an eval, a save), when nobody steps and no cost is
    # measured: one slow rank is one ticket, not one per pause.
    longest_pause = max(cadence.eval_time, cadence.checkpoint_save_time)
    smoothing = ctx.range(SMOOTHING)
    return Rule(
        expr=straggler_expr(ctx, cost, longest_pause),
        for_seconds=FOR_SECONDS,
        summary="{{ $labels.training_job }}: rank {{ $labels.rank }} on {{ $labels.node }} "
        "(GPU {{ $labels.gpu }}) is a straggler costing {{ $value | humanizePercentage }} "
        "of throughput",
        description="Rank {{ $labels.rank }} on node {{ $labels.node }}, GPU {{ $labels.gpu }} "
        "(its local rank), does more own work per step (step time less data wait and "
        "collectives) than the job's median rank: every other rank waits for it, costing "
        f"{{{{ $value | humanizePercentage }}}} of the job's throughput ({smoothing} average; "
        f"ticket at {cost:.0%}), more than it usually costs (its 6h lower quartile). "
        "Look at that node's host CPU, GPU clocks and neighbours; cordon it if it stays.",
        panel="straggler",
        threshold=f">= {cost:.0%} throughput lost to one rank",
        window=f"{smoothing} average for {FOR_SECONDS // 60}m, incarnation older than "
        f"{MIN_INCARNATION_AGE // 60}m",
        faults=[
            FaultCase(
                "",
                SMOOTHING // 60 + FOR_SECONDS // 60 + 3,
                labels=("node", "gpu"),
                raw_series=_slow_rank,
                extra_labels={"rank": FAULT_RANK["rank"], "local_rank": FAULT_RANK["local_rank"]},
                what="on a rank doing 15% more own work than its peers",
            )
        ],
    )
