"""The InfiniBand fabric of the job's nodes, from node_exporter's infiniband collector.

node_exporter (collector/infiniband_linux.go) exports per `device` and `port`:
`node_infiniband_state_id` (4 = ACTIVE), `node_infiniband_physical_state_id` (5 = LinkUp),
and counters such as `link_downed_total` (the link failed to recover and went down),
`link_error_recovery_total`, `symbol_error_total`, `port_errors_received_total`. The scrape
config attaches the spec's selector labels and `node` to node_exporter's target, as for the
other exporters.

Multi-node jobs only (`shape.nodes` > 1). A port that is down or flapping stalls or slows
every collective of the job, but a human on the job's team cannot fix a cable or a switch
port: both are tickets for the infra team (`recovery.infra_team`, else the job's team). When
the fault stalls the job, the stall (or, for self-healing jobs, the lack of progress) is the
one page.
"""

from __future__ import annotations

from trainsignals.generator.signals.promql import RuleContext

IB_ACTIVE = 4  # node_infiniband_state_id: 1 down, 2 init, 3 armed, 4 active, 5 act defer
PORT_HISTORY = 6 * 3600  # a port counts as the job's if it was active this recently
FLAPS = 1.5  # link-downs in 1h above which a port flaps (increase() of 2 events is ~2)
ERROR_COUNTERS = ("symbol_error", "port_errors_received", "link_error_recovery")
PORT = "node, device, port"

NODE_EXPORTER_JOB = "node"  # the `job` label node_exporter's targets get (deploy/scrape_config.py)
PORT_UP = "node:trainsignals_ib_port_up:value"
LINK_DOWNED = "node:trainsignals_ib_link_downed:increase1h"
PORT_ERRORS = "node:trainsignals_ib_port_errors:rate5m"


def fabric_enabled(ctx: RuleContext) -> bool:
    """Only multi-node jobs: a single node's collectives stay on NVLink, off the fabric."""
    return ctx.spec.shape.nodes > 1


def fabric_recordings(ctx: RuleContext) -> dict[str, str]:
    if not fabric_enabled(ctx):
        return {}
    raw = ctx.raw()
    return {
        PORT_UP: f"max by ({PORT}) (node_infiniband_state_id{raw} == bool {IB_ACTIVE})",
        LINK_DOWNED: (
            f"sum by ({PORT}) (increase(node_infiniband_link_downed_total{raw}[{ctx.range(3600)}]))"
        ),
        # One sum per counter: rate() drops the name, so one rate over all three would give
        # three series with the same labels.
        PORT_ERRORS: " + ".join(
            f"sum by ({PORT}) (rate(node_infiniband_{c}_total{raw}[{ctx.range(300)}]))"
            for c in ERROR_COUNTERS
        ),
    }
