"""The sharded topology for very large jobs (`deploy: {shards: N}`, N > 1); README "Sharding".

- `split`: the job's rules split into edge rules (every shard) and global rules (one ruler),
  read from the generated expressions with promql-parser;
- `topology`: the two rule documents with the shards' heartbeat, each shard's prometheus.yml
  and the files under deploy/sharded/<job>/;
- `meta`: the meta alerts each shard evaluates about itself;
- `nodes`: the lemon-node record, on the global ruler;
- `kubernetes`: the same topology as prometheus-operator objects.

The names below are what the rest of trainsignals (pipeline, fleet replay, tests, benches) uses.
"""

from trainsignals.generator.deploy.sharding.kubernetes import sharded_kubernetes_files
from trainsignals.generator.deploy.sharding.meta import META_FILE, SHARD_ALERTS
from trainsignals.generator.deploy.sharding.nodes import sharded_nodes_files
from trainsignals.generator.deploy.sharding.split import ShardingError
from trainsignals.generator.deploy.sharding.topology import (
    HEARTBEAT,
    PER_RANK_GROUP,
    PER_UNIT_GROUP,
    REPORTING,
    SHARD_LABEL,
    SUSPECTS_GROUP,
    WRITTEN,
    reads_per_unit,
    shard_config,
    sharded_files,
    single_store_rules,
    split_document,
)

__all__ = [
    "HEARTBEAT",
    "META_FILE",
    "PER_RANK_GROUP",
    "PER_UNIT_GROUP",
    "REPORTING",
    "SHARD_ALERTS",
    "SHARD_LABEL",
    "SUSPECTS_GROUP",
    "WRITTEN",
    "ShardingError",
    "reads_per_unit",
    "shard_config",
    "sharded_files",
    "sharded_kubernetes_files",
    "sharded_nodes_files",
    "single_store_rules",
    "split_document",
]
