"""The lemon-node record in the sharded topology: `deploy/sharded/nodes.rules.yaml`.

A node's incidents count across every job, so the record must see every job's hardware alerts.
A shard sees only its partition (and one job), so the record runs on the global ruler: the
shards remote-write their edge alerts' `ALERTS` (GpuLost, NodeDown, XID, ECC: per-node alerts,
evaluated on the shards; topology.WRITTEN) to the global store, where the ruler reads them.
One file per store, not per job: two rulers evaluating it on one store would write the same
series twice.
"""

from __future__ import annotations

from trainsignals.generator.deploy.sharding.topology import WRITTEN
from trainsignals.generator.nodes.policy import NAME
from trainsignals.generator.output.yaml import dump
from trainsignals.generator.spec.job import JobSpec

PATH = f"deploy/sharded/{NAME}.rules.yaml"


def sharded_nodes_files(specs: list[JobSpec], header: str, rules: dict) -> dict[str, str]:
    """{PATH: the rules of alerts/nodes.rules.yaml (`header`, `rules`: its header and
    document) with a note} when a spec is sharded, else nothing."""
    if all(spec.deploy.shards == 1 for spec in specs):
        return {}
    assert "ALERTS" in WRITTEN.split("|")  # the shards' remote write keeps what it reads
    note = (
        "# Sharded topology: load this file on the global ruler only (vmalert -rule=...), once\n"
        "# per global store, beside the sharded jobs' <job>.global.rules.yaml; never on a shard.\n"
    )
    return {PATH: header + note + dump(rules)}
