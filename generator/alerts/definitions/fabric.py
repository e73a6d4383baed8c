"""The InfiniBand fabric of multi-node jobs (generator/signals/fabric.py): infra tickets.

A port that is down or flapping stalls or slows the job's collectives; the job's team cannot
fix a cable or a switch port, so both are tickets for the infra team. When the fault stalls
the job, the stall (or TrainingNoProgress for self-healing jobs) is the one page. NodeDown
explains them (node_scoped); a port that is down inhibits its own flap ticket
(generator/routing/alertmanager.py).
"""

from __future__ import annotations

from trainsignals.generator.alerts.model import AlertGroup, Explains, Rule
from trainsignals.generator.signals.fabric import (
    FLAPS,
    LINK_DOWNED,
    PORT,
    PORT_HISTORY,
    PORT_UP,
    fabric_enabled,
)
from trainsignals.generator.signals.fabric_series import port_down_fault, port_flapping_fault
from trainsignals.generator.signals.promql import RuleContext

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
