"""The dashboard's "Where is it slow" row: the job's hardware against its peers.

On-call's question after a throughput page is *where*: the slowest nodes, each GPU's SM clock
against the job's median, each InfiniBand rail against the same rail of the other nodes, and
NCCL's bus bandwidth per rank where NCCL Inspector runs (generator/signals/peers.py). Every
threshold line is the constant the tickets compare with (GpuFailSlow, NodeLinkDegraded).
Other helpers' panels (stragglers, hang suspects) come in through `extra`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from grafanalib import core as g

from trainsignals.generator.alerts.definitions.failslow import GPU_FAIL_SLOW, NODE_LINK_DEGRADED
from trainsignals.generator.dashboards.kit import PanelBuilder, red_below
from trainsignals.generator.signals.fabric import fabric_enabled
from trainsignals.generator.signals.peers import (
    CLOCK_RATIO,
    CLOCK_RATIO_SERIES,
    LINK_RATE_HELD,
    LINK_RATE_PEER_RATIO,
    LINK_RATE_RATIO,
    LINK_RATIO,
    LINK_RATIO_SERIES,
    NCCL_BUSBW_RATIO,
    PERSIST_FOR,
    PERSIST_WINDOW,
    peer_ratio,
    peers_enabled,
)

TOP_K = 10  # series per panel: at 16k GPUs only the slowest few are readable


def where_slow_panels(
    b: PanelBuilder, extra: Sequence[Callable[[PanelBuilder], list[g.Panel]]] = ()
) -> list[g.Panel]:
    """The row, its panels, then the panels of `extra`: other modules' builders, each enabled
    for this job (the caller decides), called after the row's own panels so the layout places
    theirs below them."""
    if not peers_enabled(b.ctx) and not extra:
        return []
    panels: list[g.Panel] = [b.layout.row("Where is it slow")]
    if peers_enabled(b.ctx):
        panels += _gpu_panels(b)
    if fabric_enabled(b.ctx):
        panels += _fabric_panels(b)
    for build in extra:
        panels += build(b)
    return panels


def _gpu_panels(b: PanelBuilder) -> list[g.Panel]:
    r, clock = b.r, f"{CLOCK_RATIO_SERIES}{b.r}"
    line = red_below(CLOCK_RATIO)
    return [
        b.series(
            "where_slow_nodes",
            "Slowest nodes (GPU clock vs job median)",
            f"The {TOP_K} nodes whose slowest busy GPU clocks lowest against the job's median "
            f"busy GPU. Below {CLOCK_RATIO:g} for most of {PERSIST_WINDOW // 60} minutes, then "
            f"{PERSIST_FOR // 60} more: "
            f"{GPU_FAIL_SLOW}. Empty while the job pauses: idle together is no deviation.",
            b.targets((f"bottomk({TOP_K}, min by (node) ({clock}))", "{{node}}")),
            "percentunit",
            line,
        ),
        b.series(
            "where_slow_gpus",
            "GPU SM clock vs job median",
            f"The {TOP_K} busy GPUs with the lowest SM clock, power and SM activity against "
            f"the job's median busy GPU (1 = the median). The line is {GPU_FAIL_SLOW}'s "
            f"threshold, {CLOCK_RATIO:g}.",
            b.targets(
                (f"bottomk({TOP_K}, {clock})", "{{node}} GPU {{gpu}} clock"),
                (f"bottomk(3, {peer_ratio('power')}{r})", "{{node}} GPU {{gpu}} power"),
                (f"bottomk(3, {peer_ratio('busy')}{r})", "{{node}} GPU {{gpu}} SM active"),
            ),
            "percentunit",
            line,
        ),
    ]


def _fabric_panels(b: PanelBuilder) -> list[g.Panel]:
    r = b.r
    return [
        b.series(
            "where_slow_links",
            "InfiniBand throughput vs peers' median",
            f"The {TOP_K} ports moving the least against the same port of the job's other "
            f"nodes (1 = their median), while those move data. Below {LINK_RATIO:g} for most "
            f"of {PERSIST_WINDOW // 60} minutes, then {PERSIST_FOR // 60} more (or transmit "
            f"wait far above theirs, or a link rate below its peers': the next panel): "
            f"{NODE_LINK_DEGRADED}.",
            b.targets(
                (f"bottomk({TOP_K}, {LINK_RATIO_SERIES}{r})", "{{node}} {{device}}/{{port}}")
            ),
            "percentunit",
            red_below(LINK_RATIO),
        ),
        b.series(
            "where_slow_link_rate",
            "InfiniBand link rate vs peers' median",
            f"The {TOP_K} ports with the lowest link rate (the lanes and speed they trained at, "
            "node_infiniband_rate_bytes_per_second) against the same port of the job's other "
            f"nodes (1 = their median). Below {LINK_RATE_RATIO:g} for {LINK_RATE_HELD // 60} "
            f"minutes, then {PERSIST_FOR // 60} more: {NODE_LINK_DEGRADED} (a link trained "
            "down carries at most its lanes' share, whatever the throughput panel shows).",
            b.targets(
                (f"bottomk({TOP_K}, {LINK_RATE_PEER_RATIO}{r})", "{{node}} {{device}}/{{port}}")
            ),
            "percentunit",
            red_below(LINK_RATE_RATIO),
        ),
        b.series(
            "where_slow_nccl",
            "NCCL bus bandwidth vs communicator median",
            f"Where NCCL Inspector writes Prometheus output (NCCL_INSPECTOR_PROM_DUMP=1, read "
            f"by node_exporter's textfile collector): the {TOP_K} ranks with the lowest bus "
            "bandwidth against their communicator's median. Empty without the plugin.",
            b.targets(
                (
                    f"bottomk({TOP_K}, {NCCL_BUSBW_RATIO}{r})",
                    "{{node}} rank {{rank}} comm {{comm_id}}",
                )
            ),
            "percentunit",
        ),
    ]
