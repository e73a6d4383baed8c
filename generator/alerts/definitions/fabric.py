"""The InfiniBand fabric of multi-node jobs (generator/signals/fabric.py): infra tickets.

A port that is down or flapping stalls or slows the job's collectives; the job's team cannot
fix a cable or a switch port, so both are tickets for the infra team, as is a node_exporter
that stopped answering on one node (its ports are unwatched there). When the fault stalls
the job, the stall (or TrainingNoProgress for self-healing jobs) is the one page. NodeDown
explains them (node_scoped); a port that is down inhibits its own flap ticket
(generator/routing/alertmanager.py).
"""

from __future__ import annotations

from trainsignals.generator.alerts.model import AlertGroup, Explains, Rule
from trainsignals.generator.signals.fabric import (
    FLAPS,
    LINK_DOWNED,
    NODE_EXPORTER_JOB,
    PORT,
    PORT_HISTORY,
    PORT_UP,
    fabric_enabled,
)
from trainsignals.generator.signals.promql import RuleContext
from trainsignals.generator.testkit.fabric_series import port_down_fault, port_flapping_fault
from trainsignals.generator.testkit.faults import FAULT_ONSET, FaultCase
from trainsignals.generator.testkit.input_series import RawSeries

GROUP = AlertGroup()
# Names other modules import (no module outside a definition types an alert's name).
INFINIBAND_PORT_DOWN = "InfinibandPortDown"
INFINIBAND_PORT_FLAPPING = "InfinibandPortFlapping"  # explained by a port down


@GROUP.alert(
    INFINIBAND_PORT_DOWN,
    signal="infrastructure",
    severity="ticket",
    owner="infra",
    node_scoped=True,
    explains=(
        Explains(
            "A port that is down also counts a link-down: the flap ticket for that port is the "
            "same fault.",
            alerts=(INFINIBAND_PORT_FLAPPING,),
            equal=("training_job", "node", "device", "port"),
        ),
    ),
    meaning="An InfiniBand port of one of the job's nodes that was active is down.",
)
def infiniband_port_down(ctx: RuleContext) -> Rule | None:
    if not fabric_enabled(ctx):
        return None
    r, history = ctx.recorded(), ctx.range(PORT_HISTORY)
    return Rule(
        # Only ports that were active lately: an uncabled spare port is not a fault.
        expr=f"{PORT_UP}{r} == 0 and on (training_job, {PORT}) "
        f"max_over_time({PORT_UP}{r}[{history}]) == 1",
        for_seconds=120,
        summary="{{ $labels.training_job }}: InfiniBand {{ $labels.device }} port "
        "{{ $labels.port }} down on {{ $labels.node }}",
        description="InfiniBand port {{ $labels.device }}/{{ $labels.port }} on "
        "{{ $labels.node }} is not ACTIVE (node_infiniband_state_id != 4) after being active "
        f"within {history}. Collectives crossing this node stall or fall back to slower "
        "paths. Cable, transceiver, HCA or switch port: for the infra team.",
        panel="fabric",
        threshold="port not ACTIVE",
        window="instant",
        faults=[port_down_fault()],
    )


@GROUP.alert(
    INFINIBAND_PORT_FLAPPING,
    signal="infrastructure",
    severity="ticket",
    owner="infra",
    node_scoped=True,
    meaning="An InfiniBand port of one of the job's nodes went down twice or more in an hour.",
)
def infiniband_port_flapping(ctx: RuleContext) -> Rule | None:
    if not fabric_enabled(ctx):
        return None
    return Rule(
        expr=f"{LINK_DOWNED}{ctx.recorded()} > {FLAPS:g}",
        for_seconds=0,
        summary="{{ $labels.training_job }}: InfiniBand {{ $labels.device }} port "
        "{{ $labels.port }} flapping on {{ $labels.node }}",
        description="InfiniBand port {{ $labels.device }}/{{ $labels.port }} on "
        "{{ $labels.node }} went down {{ $value | humanize }} times in the last hour "
        "(node_infiniband_link_downed_total). Each time, NCCL retries or the job hangs until "
        "its timeout. Usually a marginal cable or transceiver: for the infra team.",
        panel="fabric",
        threshold="2 or more link-downs in 1h",
        window="1h",
        faults=[port_flapping_fault()],
    )


@GROUP.alert(
    "NodeExporterDown",
    signal="infrastructure",
    severity="ticket",
    owner="infra",
    node_scoped=True,
    meaning="A node's node_exporter does not answer scrapes while the node's training ranks "
    "do: the InfiniBand alerts are blind on that node.",
)
def node_exporter_down(ctx: RuleContext) -> Rule | None:
    if not fabric_enabled(ctx):
        return None
    node_exporter = ctx.raw(job=NODE_EXPORTER_JOB)
    return Rule(
        # A stopped exporter keeps its target (up 0); one gone from service discovery on every
        # node is ScrapeTargetsVanished{vanished="node"} (generator/meta/targets.py).
        expr=f"up{node_exporter} == 0 and on (node) max by (node) (up{ctx.training_targets()}) > 0",
        for_seconds=600,
        summary="{{ $labels.training_job }}: node_exporter on {{ $labels.node }} is down",
        description="node_exporter on {{ $labels.node }} does not answer scrapes while the "
        "node's training ranks do: InfiniBand port faults on that node (InfinibandPortDown, "
        "InfinibandPortFlapping) go unseen.",
        panel="fabric",
        threshold="node_exporter down, node up",
        window="instant",
        faults=[
            FaultCase(
                "",
                12,
                labels=("node",),
                # Every target up (the ranks' `up` comes with it); node-0's node_exporter not.
                targets_down=lambda kind, node, m: False,
                raw_series=lambda rule_ctx, minutes: [
                    RawSeries(
                        "up",
                        {
                            **rule_ctx.spec.selector_labels,
                            "job": NODE_EXPORTER_JOB,
                            "node": "node-0",
                        },
                        [1 if m < FAULT_ONSET else 0 for m in range(minutes + 1)],
                    )
                ],
                # Reads raw `up`, so the selector labels come along.
                extra_labels={k: v for k, v in ctx.spec.selector_labels.items() if k != "job"},
            )
        ],
    )
