"""Meta-monitoring on each shard of the sharded topology (sharding/topology.py).

A shard is a Prometheus of its own: its edge rules can fail, its rule groups can run slow,
it can lose its Alertmanagers, and a configuration reload can fail, and the global ruler
(vmalert) sees none of it; ShardNotReporting only covers a shard that stops remote-writing.
So each shard scrapes itself (job `prometheus_job` of the monitoring settings, labelled with
its `shard`) and evaluates the Prometheus meta alerts of generator/meta/rules.py on itself; they go
to the monitoring team like every meta alert. The Alertmanager and scrape-target meta alerts
stay with the Prometheus that scrapes those (a shard scrapes no Alertmanager, and sees only
its own nodes).
"""

from __future__ import annotations

from trainsignals.generator.meta.rule import Scale
from trainsignals.generator.meta.rules import GROUP, render_rule
from trainsignals.generator.meta.rules import meta_rules as all_meta_rules
from trainsignals.generator.spec.monitoring import MonitoringSettings
from trainsignals.generator.spec.pipeline_alerts import OWN_PROMETHEUS

META_FILE = "shard.meta.rules.yaml"
SELF_TARGET = "localhost:9090"  # a shard's own web address, as it scrapes itself
# The Prometheus meta alerts that read only the evaluating server's own metrics (declared
# `own_prometheus=True`, generator/spec/pipeline_alerts.py).
SHARD_ALERTS = OWN_PROMETHEUS


def shard_meta_rules(settings: MonitoringSettings, scale: Scale) -> dict:
    """The shards' meta rule file: SHARD_ALERTS, as the monitoring settings enable them."""
    rules = [
        render_rule(settings, rule, scale)
        for rule in all_meta_rules(settings, [], scale)
        if rule.alert in SHARD_ALERTS
    ]
    return {"groups": [{"name": f"{GROUP}-shard", "rules": rules}]}


def self_scrape_job(settings: MonitoringSettings, shard: int, target: str = SELF_TARGET) -> dict:
    """The shard scraping itself; `shard` tells its alerts apart (every shard is localhost)."""
    return {
        "job_name": settings.prometheus_job,
        "static_configs": [{"targets": [target], "labels": {"shard": str(shard)}}],
    }
