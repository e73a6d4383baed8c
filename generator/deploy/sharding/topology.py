"""Sharded topology for very large jobs (`deploy: {shards: N}`, N > 1).

N Prometheus shards each scrape a hashmod partition of the job's nodes and evaluate the edge
rules (per-node and per-GPU recording rules, plus the per-node partials of every job-level
aggregation: split.py); only recorded series leave a shard (remote write).
One global store (VictoriaMetrics, or anything speaking remote write and PromQL) receives them,
and one ruler (vmalert) evaluates the global rules (job-level recording rules and every alert)
and notifies the Alertmanagers. Same spec, same alerts: names, labels and severities do not
depend on the topology.

Each shard stamps a heartbeat (`edge:trainsignals_heartbeat:timestamp`, its `shard` label set by
the shard's remote-write relabeling). The global ruler counts the shards reporting; rules that
combine partials yield nothing while one is missing, and `ShardNotReporting` tickets the
job's team naming the shard.
"""

from __future__ import annotations

from trainsignals import __version__
from trainsignals.generator.alerts.definitions.gpu_faults import GPU_LOST
from trainsignals.generator.alerts.definitions.reachability import NODE_DOWN
from trainsignals.generator.deploy.prometheus_config import alertmanager_discovery
from trainsignals.generator.deploy.scrape_config import scrape_configs
from trainsignals.generator.deploy.sharding.meta import (
    META_FILE,
    SELF_TARGET,
    self_scrape_job,
    shard_meta_rules,
)
from trainsignals.generator.deploy.sharding.split import (
    SplitState,
    edge_names,
    is_node_local,
    rewrite_global,
)
from trainsignals.generator.meta.rule import Scale
from trainsignals.generator.signals.hang_suspects import SUSPECT
from trainsignals.generator.signals.promql import RuleContext
from trainsignals.generator.signals.recording import SLOW_INTERVAL
from trainsignals.generator.spec.durations import format_duration
from trainsignals.generator.spec.job import JobSpec
from trainsignals.generator.spec.monitoring import DEFAULT_SETTINGS, MonitoringSettings
from trainsignals.generator.spec.pipeline_alerts import SHARD_ALERT, declared_severity
from trainsignals.metrics.promql_reads import names, parse

HEARTBEAT = "edge:trainsignals_heartbeat:timestamp"
REPORTING = "job:trainsignals_shards_reporting:count"
SHARD_LABEL = "shard"
# A shard's heartbeat older than this is a missing shard: its evaluation interval plus the
# remote-write batch delay fit several times, and it stays under the store's 5m lookback, so
# partials of a dead shard are never read as missing (their last values still answer).
STALE_SECONDS = 150
README_ANCHOR = "#sharding-131072-gpus"
WRITTEN = ".+:.+|ALERTS"  # what a shard remote-writes (__name__)
# The global ruler's groups of the fast rules that read one series per rank (the straggler,
# the hang suspects), or per GPU, MIG slice or node/port (the hardware peers): _per_unit_groups.
PER_RANK_GROUP = "per-rank"
# The hang suspects apart from the straggler: they read every rank only while a job is stopped,
# and then their evaluation must not hold back the straggler's (nor the reverse).
SUSPECTS_GROUP = "hang-suspects"
PER_UNIT_GROUP = "per-gpu"
PER_UNIT_LEVELS = frozenset({"gpu", "rank", "mig", "node"})


def stale_seconds(ctx: RuleContext) -> float:
    return max(ctx.seconds(STALE_SECONDS), 1.5 * ctx.min_range_seconds)


def split_document(
    ctx: RuleContext, doc: dict, monitoring: MonitoringSettings | None = None
) -> tuple[dict, dict]:
    """(edge rules for every shard, global rules for the ruler) from the job's rule file."""
    shards = ctx.spec.deploy.shards
    job = ctx.job
    rules = [rule for group in doc["groups"] for rule in group["rules"]]
    recorded = {rule["record"] for rule in rules if "record" in rule}
    state = SplitState(recorded, edge_names(rules, recorded))
    guard = f"{REPORTING}{ctx.recorded()} < {shards}"
    guarded: set[str] = set()

    fast_edge: list[dict] = [{"record": HEARTBEAT, "expr": "time()", "labels": ctx.job_label}]
    edge_alerts: list[dict] = []
    slow_edge: list[dict] = []
    global_groups: list[dict] = []
    for group in doc["groups"]:
        slow = "interval" in group
        kept: list[dict] = []
        for rule in group["rules"]:
            if rule.get("record") in state.edge:
                (slow_edge if slow else fast_edge).append(rule)
                continue
            if "alert" in rule and is_node_local(rule["expr"], state):
                # Per-node and per-GPU alerts (GpuLost, NodeDown...) fire on their shard, which
                # notifies the Alertmanagers itself: the global ruler's cost stays job-level.
                edge_alerts.append(rule)
                continue
            rewritten = rewrite_global(rule["expr"], state, job, slow)
            expr = rewritten.text if rewritten.text != _canonical(rule["expr"]) else rule["expr"]
            if rewritten.partial or not guarded.isdisjoint(names(expr)):
                expr = f"({expr}) unless on () ({guard})"
                if "record" in rule:
                    guarded.add(rule["record"])
            kept.append({**rule, "expr": expr})
        global_groups.append({**group, "rules": kept})

    for pushdown in state.pushdowns.values():
        rule = {"record": pushdown.record, "expr": pushdown.expr, "labels": ctx.job_label}
        (slow_edge if pushdown.slow_only else fast_edge).append(rule)
    stale = format_duration(stale_seconds(ctx))
    reporting = {
        "record": REPORTING,
        "expr": f"count(time() - {HEARTBEAT}{ctx.recorded()} < {stale_seconds(ctx):g}) "
        "or vector(0)",
        "labels": ctx.job_label,
    }
    global_groups[0]["rules"].insert(0, reporting)
    global_groups[1:1] = _per_unit_groups(global_groups[0], job)
    alerts = next(g for g in global_groups if g["name"].endswith("-alerts"))
    alerts["rules"].append(_shard_alert(ctx, stale, monitoring or DEFAULT_SETTINGS))
    edge_groups = [{"name": f"trainsignals-{job}-edge", "rules": fast_edge}]
    if edge_alerts:
        edge_groups.append({"name": f"trainsignals-{job}-edge-alerts", "rules": edge_alerts})
    if slow_edge:
        edge_groups.append(
            {
                "name": f"trainsignals-{job}-edge-slow",
                "interval": ctx.duration(SLOW_INTERVAL),
                "rules": slow_edge,
            }
        )
    return {"groups": edge_groups}, {"groups": global_groups}


def _reads_level(expr: str, levels: frozenset[str]) -> bool:
    """Whether `expr` reads a recorded series of one of `levels`, or a node-local part the
    shards record whole (per node, or per rank as the hang suspects' inputs)."""
    return any(
        name.split(":")[0] in levels or (name.startswith("edge:") and ":local_" in name)
        for name in names(expr)
        if name.count(":") == 2
    )


def reads_per_unit(expr: str) -> bool:
    """Whether `expr` reads a series per GPU, rank, MIG slice or node (port)."""
    return _reads_level(expr, PER_UNIT_LEVELS)


def _per_unit_group(rule: dict) -> str | None:
    """The group of its own a fast global rule goes to, or None where it stays (job-level)."""
    if not reads_per_unit(rule["expr"]):
        return None
    if rule.get("record") == SUSPECT:
        return SUSPECTS_GROUP
    return PER_RANK_GROUP if _reads_level(rule["expr"], frozenset({"rank"})) else PER_UNIT_GROUP


def _per_unit_groups(fast: dict, job: str) -> list[dict]:
    """The fast global rules that read a series per rank, GPU or port (the medians, ratios
    and costs of the culprit signals, the hang suspects), moved out of `fast` into groups of
    their own at the same interval: per rank, the hang suspects, and per GPU or port. At
    131,072 GPUs these passes over every rank and GPU were most of the fast group's minute
    (bench/culprit_cost.md). A ruler evaluates its groups side by side (Prometheus and vmalert
    both), so the job-level rules (goodput, progress, the durable timestamps) keep their
    schedule and no group's evaluation nears its interval. Across groups a rule reads the
    other's latest evaluation (at most one interval old): each reads 5m rates or longer
    windows, and the alerts read them all."""
    moved: dict[str | None, list[dict]] = {}
    for rule in fast["rules"]:
        moved.setdefault(_per_unit_group(rule), []).append(rule)
    fast["rules"] = moved.pop(None, [])
    return [
        {"name": f"trainsignals-{job}-{name}", "rules": moved[name]}
        for name in (PER_RANK_GROUP, SUSPECTS_GROUP, PER_UNIT_GROUP)
        if name in moved
    ]


def _canonical(expr: str) -> str:
    return str(parse(expr))


def _shard_alert(ctx: RuleContext, stale: str, monitoring: MonitoringSettings) -> dict:
    selector = ctx.recorded()
    window = ctx.range(3600)
    late = (
        f"time() - max by ({SHARD_LABEL}, training_job) "
        f"(max_over_time({HEARTBEAT}{selector}[{window}])) > {stale_seconds(ctx):g}"
    )
    never = [
        f"absent_over_time({HEARTBEAT}{ctx.recorded(shard=str(i))}[{window}])"
        for i in range(ctx.spec.deploy.shards)
    ]
    spec = ctx.spec
    return {
        "alert": SHARD_ALERT,
        "expr": " or ".join([f"({late})", *never]),
        "for": ctx.duration(120),
        "labels": {
            "job": spec.name,
            "severity": declared_severity(SHARD_ALERT),
            # The monitoring team's: a shard's Prometheus is theirs to restart, not the job
            # team's (the meta route takes this alert by name, generator/routing/meta.py).
            "team": monitoring.team,
            "training_job": spec.name,
        },
        "annotations": {
            "summary": "{{ $labels.training_job }}: shard {{ $labels.shard }} sends nothing",
            "description": (
                f"Shard {{{{ $labels.shard }}}} of {spec.deploy.shards} has not remote-written "
                f"its heartbeat for more than {stale}. Its nodes' alerts ({NODE_DOWN}, "
                f"{GPU_LOST}...) cannot fire and the job-level rules that combine every shard "
                "yield nothing until it is back: restart the shard's Prometheus, check its remote "
                "write (prometheus_remote_storage_* on the shard) and the global store."
            ),
            "runbook_url": f"https://github.com/example/trainsignals/blob/main/README.md"
            f"{README_ANCHOR}",
        },
    }


def shard_config(
    spec: JobSpec,
    shard: int,
    rule_file: str,
    *,
    directory: str | None = None,
    refresh_interval: str = "30s",
    scrape_interval: str = "15s",
    evaluation_interval: str = "1m",
    batch_send_deadline: str = "5s",
    alertmanagers: dict | None = None,
    meta_rule_file: str | None = None,
    monitoring: MonitoringSettings | None = None,
    self_target: str = SELF_TARGET,
) -> dict:
    """prometheus.yml of shard `shard`: the job's scrape configs kept to the nodes whose hash
    falls on it, the edge rules, and remote write of recorded series only. With
    `meta_rule_file`, the shard also scrapes itself and runs its meta alerts on itself
    (sharding/meta.py)."""
    shards = spec.deploy.shards
    partition = [
        {
            "source_labels": ["node"],
            "modulus": shards,
            "target_label": "__tmp_trainsignals_shard",
            "action": "hashmod",
        },
        {"source_labels": ["__tmp_trainsignals_shard"], "regex": str(shard), "action": "keep"},
    ]
    jobs = []
    for job in scrape_configs(spec, directory, refresh_interval):
        # After the relabeling that sets `node` (from the target group or the address).
        jobs.append({**job, "relabel_configs": job["relabel_configs"] + partition})
    rule_files = [rule_file]
    if meta_rule_file is not None:
        rule_files.append(meta_rule_file)
        jobs.append(self_scrape_job(monitoring or DEFAULT_SETTINGS, shard, self_target))
    return {
        "global": {
            "scrape_interval": scrape_interval,
            "evaluation_interval": evaluation_interval,
        },
        "rule_files": rule_files,
        # The edge alerts (per node and GPU) go to the Alertmanagers from the shard.
        "alerting": {"alertmanagers": [alertmanagers or _default_alertmanagers()]},
        "scrape_configs": jobs,
        "remote_write": [
            {
                "url": spec.deploy.global_write_url,
                "queue_config": {"batch_send_deadline": batch_send_deadline},
                "write_relabel_configs": [
                    # Only recorded series (level:metric:operations) and the edge alerts'
                    # ALERTS (NodeUnreachableRecently reads NodeDown's) leave the shard.
                    {"source_labels": ["__name__"], "regex": WRITTEN, "action": "keep"},
                    {
                        "source_labels": ["__name__"],
                        "regex": HEARTBEAT,
                        "target_label": SHARD_LABEL,
                        "replacement": str(shard),
                    },
                ],
            }
        ],
    }


def _default_alertmanagers() -> dict:
    return {"dns_sd_configs": [alertmanager_discovery(DEFAULT_SETTINGS)]}


def sharded_files(
    spec: JobSpec,
    source: str,
    rules_doc: dict,
    ctx: RuleContext,
    top: str,
    monitoring: MonitoringSettings | None = None,
) -> dict[str, str]:
    """deploy/sharded/<job>/: each shard's prometheus.yml, the edge and global rule files."""
    from trainsignals.generator.output.yaml import dump

    edge, global_rules = split_document(ctx, rules_doc, monitoring)
    folder = f"deploy/sharded/{spec.name}"
    edge_file = f"{spec.name}.edge.rules.yaml"
    note = (
        f"# Sharded topology ({spec.deploy.shards} shards, trainsignals {__version__}): "
        "see README, Sharding.\n"
    )
    settings = monitoring or DEFAULT_SETTINGS
    meta = shard_meta_rules(settings, Scale(ctx.time_scale, ctx.min_range_seconds))
    files = {
        f"{folder}/{edge_file}": dump(edge, top + note),
        f"{folder}/{spec.name}.global.rules.yaml": dump(global_rules, top + note),
        f"{folder}/{META_FILE}": dump(meta, top + note),
    }
    for shard in range(spec.deploy.shards):
        config = shard_config(
            spec,
            shard,
            f"/etc/prometheus/rules/{edge_file}",
            meta_rule_file=f"/etc/prometheus/rules/{META_FILE}",
            monitoring=settings,
        )
        files[f"{folder}/shard-{shard}.prometheus.yml"] = dump(config, top + note)
    return files


def single_store_rules(spec: JobSpec, doc: dict, shards: int) -> dict:
    """Edge and global groups in one file, as one Prometheus evaluates them over a shared store
    (the fleet replay): the heartbeat once per shard, labelled as each shard's remote write
    labels it, so the shards count as reporting."""
    spec = spec.model_copy(update={"deploy": spec.deploy.model_copy(update={"shards": shards})})
    ctx = RuleContext(spec)
    edge, global_rules = split_document(ctx, doc)
    for group in edge["groups"]:
        rules = []
        for rule in group["rules"]:
            if rule.get("record") == HEARTBEAT:
                rules += [
                    {**rule, "labels": {**rule["labels"], SHARD_LABEL: str(shard)}}
                    for shard in range(shards)
                ]
            else:
                rules.append(rule)
        group["rules"] = rules
    return {"groups": edge["groups"] + global_rules["groups"]}
