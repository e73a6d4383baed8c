"""The pipeline's alerts outside the meta group, routed to the monitoring team with it: the
on-call load alert (generator/oncall/) and a silent shard (generator/deploy/sharding.py)."""

from __future__ import annotations

ONCALL_ALERT = "OncallPageLoadHigh"
SHARD_ALERT = "ShardNotReporting"
