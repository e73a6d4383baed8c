"""What a fault does once, at its onset: processes die, nodes go down, a GPU falls off the
bus, an InfiniBand port goes down, ECC errors are counted. Effects that last (a hang, a hot
GPU, a slower step) are the simulation's, tick by tick."""

from __future__ import annotations

from .cluster import Node, Rank
from .culprit import open_data_waits
from .scenarios import Conditions
from .serving import Endpoints


def fault_onset(c: Conditions, nodes: list[Node], ranks: list[Rank], endpoints: Endpoints) -> None:
    if c.crash_job:
        for r in ranks:
            r.take_down()
    for r in c.crashed_ranks:
        ranks[r].take_down()
    for n in c.down_nodes:
        node = nodes[n]
        node.up = False
        endpoints.close_node(node)
        for r in node.ranks:
            r.take_down()
    open_data_waits(c, ranks)
    for n in c.ib_down:
        nodes[n].fabric.port_down()
    for n, g in c.lost_gpus:
        nodes[n].gpus[g].lost = True
    for n, g in c.ecc_gpus:
        gpu = nodes[n].gpus[g]
        with nodes[n].backend.lock:
            gpu.ecc_uncorrected_total += 2
            gpu.ecc_corrected_total += 16
            gpu.remapped_rows_pending = True
