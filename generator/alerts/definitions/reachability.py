"""Nodes: is every target of a node answering? NodeDown while an outage lasts,
NodeUnreachableRecently for one that ended before NodeDown fired. One outage, one ticket."""

from __future__ import annotations

from collections.abc import Callable

from trainsignals.generator.alerts.definitions.recovery import completed
from trainsignals.generator.alerts.definitions.training import TRAINING_TARGETS_DOWN
from trainsignals.generator.alerts.model import (
    NODE_SCOPED,
    PROGRESS_INCIDENT,
    PROGRESS_SYMPTOM,
    AlertGroup,
    Explains,
    Rule,
)
from trainsignals.generator.signals.promql import RuleContext, matchers
from trainsignals.generator.testkit.faults import FAULT_ONSET, FaultCase
from trainsignals.generator.testkit.input_series import RawSeries
from trainsignals.generator.testkit.job_series import target_series
from trainsignals.generator.testkit.series_notation import STALE

GROUP = AlertGroup()
# Names other modules import (no module outside a definition types an alert's name).
NODE_DOWN = "NodeDown"
NODE_UNREACHABLE_RECENTLY = "NodeUnreachableRecently"
onset = FAULT_ONSET


@GROUP.alert(
    NODE_DOWN,
    signal="infrastructure",
    severity="page",
    auto_restart="ticket",
    owner="infra",
    incident=PROGRESS_INCIDENT,
    hardware_fault=True,
    explains=(
        Explains(
            "A node that is down explains every per-GPU and per-node alert of that node: its "
            "exporter and disk metrics vanish or go stale with it. Page for the node only.",
            roles=(NODE_SCOPED,),
            equal=("training_job", "node"),
        ),
        Explains(
            "A node that is down takes its ranks with it: the job-wide crash and progress "
            "symptoms are consequences, not separate faults.",
            alerts=(TRAINING_TARGETS_DOWN,),
            roles=(PROGRESS_SYMPTOM,),
        ),
    ),
    meaning="Every target of a node (GPU exporter and training ranks) is down.",
)
def node_down(ctx: RuleContext) -> Rule:
    return Rule(
        expr=f"node:trainsignals_targets_up:max{ctx.recorded()} == 0",
        for_seconds=120,
        summary="{{ $labels.training_job }}: node {{ $labels.node }} is down",
        description="Neither the GPU exporter nor any training rank on {{ $labels.node }} "
        "answers scrapes. The node crashed, lost its network, or was preempted.",
        panel="targets_up",
        threshold="every target of a node down",
        window="instant",
        faults=[
            FaultCase(
                "",
                5,
                labels=("node",),
                targets_down=lambda kind, node, m: node == "node-0" and m >= onset,
            )
        ],
    )


# How far back NodeUnreachableRecently looks: one ticket per outage, however it ended.
UNREACHABLE_LOOKBACK_S = 3600


@GROUP.alert(
    NODE_UNREACHABLE_RECENTLY,
    signal="infrastructure",
    severity="ticket",
    owner="infra",
    node_scoped=True,
    meaning="Every target of a node was down for a minute or more in the last hour, and the "
    "outage ended before NodeDown fired: the node came back, or the scheduler drained it.",
)
def node_unreachable_recently(ctx: RuleContext) -> Rule:
    r = ctx.recorded()
    # A node outage NodeDown ticketed (or paged) is its; so is one still going on (NodeDown is
    # pending). What is left is a short one that ended, or one ended by draining the node (its
    # targets vanish, so NodeDown never sees `for` pass): the infra team must still learn that
    # the host dropped off the network, even if the job healed by itself.
    node_down = matchers({"alertname": "NodeDown", "alertstate": "firing", "training_job": ctx.job})
    return Rule(
        expr=f"max_over_time(node:trainsignals_targets_up:dropped1m{r}"
        f"[{ctx.range(UNREACHABLE_LOOKBACK_S)}]) == 1 "
        f"unless on (training_job, node) node:trainsignals_targets_up:max{r} == 0 "
        "unless on (training_job, node) "
        f"max_over_time(ALERTS{node_down}[{ctx.range(UNREACHABLE_LOOKBACK_S + 600)}])"
        # A completed job's nodes leave service discovery: released, not unreachable.
        + completed(ctx),
        for_seconds=0,
        summary="{{ $labels.training_job }}: node {{ $labels.node }} dropped off the network "
        "in the last hour",
        description="Every target of {{ $labels.node }} (GPU exporter and training ranks) "
        "failed its scrapes for a minute or more within the last hour, and the outage ended "
        "before NodeDown fired: the node came back or was drained. Check the host before it "
        "takes a job down again.",
        panel="targets_up",
        threshold="every target of a node down >= 1m, outage over",
        window="1m outage within 1h",
        faults=[
            FaultCase(
                "",
                2,
                labels=("node",),
                raw_series=_node_0(lambda m: 1 if not onset <= m < onset + 2 else 0),
                what="on a node back after a 2-minute outage (one short of NodeDown's `for`)",
            ),
            FaultCase(
                "",
                2,
                labels=("node",),
                # Then it leaves service discovery: a staleness marker, as Prometheus writes
                # for a target that is gone.
                raw_series=_node_0(
                    lambda m: (
                        1
                        if m < onset
                        else 0
                        if m < onset + 2
                        else STALE
                        if m == onset + 2
                        else None
                    )
                ),
                what="on a node drained during a 2-minute outage (its targets vanish)",
            ),
        ],
    )


def _node_0(up: Callable[[int], float | str | None]) -> Callable[..., list[RawSeries]]:
    """`up` of node-0's targets (GPU exporter and ranks) only: the alert is per node, and a
    64-node spec's every target would make its promtool tests slow."""

    def series(ctx: RuleContext, minutes: int) -> list[RawSeries]:
        values = [up(m) for m in range(minutes + 1)]
        return [
            RawSeries(s.name, s.labels, values)
            for s in target_series(ctx, minutes)
            if s.labels["node"] == "node-0"
        ]

    return series
