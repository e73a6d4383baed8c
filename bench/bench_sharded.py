"""Sharded topology at 131,072 GPUs (16,384 nodes x 8), 15 s scrape: cost per shard and globally.

Method (projected from measured points, as bench_fleet_cost.py): the fleet spec's rule file is
split as `deploy: {shards: N}` splits it (generator/deploy/sharding/). One real Prometheus
2.42 plays one shard holding `nodes` nodes: 70 minutes of healthy raw series at 15 s resolution
(the fleet replay's one-sample-a-minute series written four times, 15 s apart), the edge groups
and the global groups loaded (every group evaluated every 15 s so each runs several times), and
remote write of the recorded series to a real VictoriaMetrics 1.79.5. Measured at two shard
sizes:

- each group's cost per evaluation (rule_timing.py): every rule replayed as an instant query
  at its group's last real evaluation, ROUNDS times, once Prometheus merged the overlapping
  blocks written (a minute or more after it starts), Go's collector off; Prometheus's CPU
  while it runs (its engine's own time, `stats=all`, is wall time: a `machine:` line); the
  group's median and p25-p75 over the rounds; the edge
  cost is fitted (proportional to GPUs, least squares) to the GPUs one shard holds at
  131,072 GPUs / N, the global cost to all 131,072 GPUs (it reads every node's partials and
  every GPU's series); the global ruler is measured on Prometheus, as a stand-in for vmalert
  on the store; `--all-rules` ranks every global rule by its projected cost;
- series and samples/s per shard: raw series per GPU and rank (the exporters' own counts,
  bench_gpu_exporter.py) over 15 s;
- remote-written series per GPU (the edge rules' output series) and bytes per sample
  (prometheus_remote_storage_bytes_total / samples_total): bytes/s per shard at production
  intervals (edge group 1m, edge-slow 3m);
- the remote-write delay (highest appended minus highest sent timestamp) sampled meanwhile;
- the culprit signals of issue 28 (bench_culprit.py): each group's culprit rules measured apart
  from its other rules, the costliest of them, and the series they add per GPU.

The one Prometheus records every shard's heartbeat (as the fleet replay's single store does),
so the global rules' guard (every shard reporting) passes and they record. A first run records
the per-rank, per-GPU and per-node series once; their history (up to the 6h the straggler's
baseline reads) is written, and Prometheus starts again: the windows over recorded series read
what they read in production, not the minutes a fresh Prometheus holds.

Added time to page: the global ruler reads the partials up to one edge evaluation (1m) plus the
remote-write delay (batch_send_deadline 5s by default) late.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import sys
import tempfile
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))
# The VictoriaMetrics stack is test infrastructure (tests/stacks/vm.py, not in the package):
# `python bench/bench_sharded.py` finds it through the repository root.
sys.path.insert(1, str(Path(__file__).resolve().parents[1]))

from bench_culprit import (
    count,
    culprit,
    instant,
    record_history,
    report,
    wait_evaluated,
)
from bench_fleet_cost import (
    EVAL_S,
    GPUS_PER_NODE,
    MINUTES,
    NO_COLLECTION,
    healthy_minutes,
    rank_series,
    short_name,
    spawn_prometheus,
)
from bench_gpu_exporter import CollectOptions, own_series_per_gpu
from rule_timing import (
    ROUNDS,
    Spread,
    blocks_loaded,
    fit,
    fit_spread,
    group_spread,
    last_evaluations,
    percent,
    print_ranked,
    replay,
    rule_name,
    unload_rules,
    wait_compacted,
)

from tests.stacks.vm import VICTORIA_METRICS, binary
from trainsignals.fleet.emit import Emitter, referenced_metrics
from trainsignals.fleet.spec import fleet_spec, generated_files
from trainsignals.generator.deploy.sharding import single_store_rules, split_document
from trainsignals.generator.signals.promql import RuleContext
from trainsignals.generator.signals.straggler import OWN_WORK
from trainsignals.generator.spec.durations import parse_duration
from trainsignals.generator.spec.job import JobSpec
from trainsignals.stacks import reaper
from trainsignals.stacks.ports import free_port
from trainsignals.stacks.stack import HOST, PROMETHEUS

GPUS = 131_072
# Nodes on the measured shard: 512 and 1,024 GPUs, where every group but the baseline takes
# tens to thousands of ms (far above the timer's noise). 2,048 GPUs would take 7 more minutes
# writing series; `--nodes 32 64 128` fits a line through three sizes (about 3 min more).
SHARD_NODES = (64, 128)
SHARD_CHOICES = (4, 8, 16, 32, 64)
SCRAPE_S = 15
WRITE_S_PER_GPU = 0.3  # writing the series: 0.37 s per GPU at load 12 here, 0.2 at load 6
LEAD_MARGIN = 1.3  # on the writing time expected (see main)
FRESH_S = 240  # the raw series' age at the replayed evaluation, at most: inside the 5m windows
SHARDS = 8  # the split's shard count (the rules do not depend on it but for the shard guard)
INTERVAL_S = 60  # production interval of groups that set none
GOAL = 0.10
SERIES_BUDGET = 2_000_000  # head series one Prometheus shard comfortably holds (~4-8 GiB RSS)


@dataclass
class Shard:
    gpus: int
    seconds: dict[str, Spread]  # group -> Prometheus CPU seconds per evaluation (replayed)
    engine: dict[str, Spread]  # group -> the engine's own time per evaluation (replayed)
    real: dict[str, float]  # group -> its last real evaluation, seconds (groups concurrent)
    edge_series: dict[str, int]  # edge group -> series it writes
    bytes_per_sample: float
    delay_s: float  # remote-write delay, most seen
    write_s: float  # seconds writing the series took
    culprit_seconds: dict[str, Spread]  # group -> seconds per evaluation of its culprit rules
    culprit_series: dict[str, int]  # culprit record or raw metric -> its series on the shard
    culprit_rules: dict[str, dict[str, float]]  # group -> culprit rule -> median seconds
    rules: dict[str, dict[str, Spread]]  # group -> rule -> seconds per evaluation
    history: int  # samples of recorded history backfilled for the rules' range reads
    age_s: float  # how old the raw series were at the evaluation measured (5m windows)
    blocks: int  # persistent blocks the replay read (merged: none overlap)


def _metrics(port: int) -> str:
    with urllib.request.urlopen(f"http://{HOST}:{port}/metrics", timeout=10) as answer:
        return answer.read().decode()


def _value(text: str, name: str) -> float:
    total = 0.0
    for match in re.finditer(rf"^{name}(?:{{[^}}]*}})? (\S+)$", text, re.M):
        total += float(match.group(1))
    return total


def write_data(spec: JobSpec, rules_text: str, nodes: int, work: Path, lead: float) -> float:
    """Write and import the raw series (15 s resolution), ending `lead` seconds from now, and
    wait until they end; returns the seconds writing took."""
    started = time.monotonic()
    epoch = int(time.time() + lead) // 60 * 60 - MINUTES * 60
    for quarter in range(60 // SCRAPE_S):  # a 15 s scrape: each minute's values 4 times
        Emitter(
            healthy_minutes(nodes),
            spec.selector_labels,
            (spec.scrape_jobs.training, spec.scrape_jobs.gpu),
            referenced_metrics(rules_text),
            epoch,
            offset=-quarter * SCRAPE_S,
        ).write_blocks(work / f"om-{quarter}", work / "data")
    written = time.monotonic() - started
    # Never start Prometheus before the series end: it would refuse the rules' output (older
    # than its newest block) as out of bounds.
    time.sleep(max(0.0, epoch + MINUTES * 60 - time.time()))
    return written


def measure(nodes: int, work: Path, lead: float, rounds: int) -> Shard:
    spec, _ = fleet_spec(nodes)
    spec = spec.model_copy(update={"deploy": spec.deploy.model_copy(update={"shards": SHARDS})})
    rules_text, _, _ = generated_files(spec)
    edge, _ = split_document(RuleContext(spec), yaml.safe_load(rules_text))
    # One Prometheus plays one shard and the global ruler: the other shards' heartbeats are
    # recorded beside its own, so the global rules' guard (every shard reporting) lets them
    # record; without it they compute and then drop everything, and the rules reading their
    # output (the medians, the ratios, the baseline) read nothing.
    groups = single_store_rules(spec, yaml.safe_load(rules_text), SHARDS)["groups"]
    owner = culprit(RuleContext(spec), yaml.safe_load(rules_text))
    production = {g["name"]: parse_duration(g.get("interval", f"{INTERVAL_S}s")) for g in groups}
    for group in groups:
        group["interval"] = f"{EVAL_S}s"
    rules = work / "rules.yaml"
    rules.write_text(yaml.safe_dump({"groups": groups}, sort_keys=False))
    # Writing 4 x 70 minutes of series takes minutes: the data must end about when Prometheus
    # starts, or the rules (evaluated at "now") read stale series (raw series gone after 5
    # minutes). The series are shifted by the writing time expected (`lead`).
    data = work / "data"
    write_s = write_data(spec, rules_text, nodes, work, lead)
    vm_port, port = free_port(), free_port()
    config = work / "prometheus.yml"
    config.write_text(
        yaml.safe_dump(
            {
                "global": {"evaluation_interval": f"{EVAL_S}s"},
                "rule_files": [str(rules)],
                "remote_write": [
                    {
                        "url": f"http://{HOST}:{vm_port}/api/v1/write",
                        "write_relabel_configs": [
                            {"source_labels": ["__name__"], "regex": ".+:.+", "action": "keep"}
                        ],
                    }
                ],
            }
        )
    )
    log = (work / "run.log").open("wb")
    store = reaper.spawn(
        [
            binary(VICTORIA_METRICS),
            f"-httpListenAddr={HOST}:{vm_port}",
            f"-storageDataPath={work / 'vm'}",
            "-search.latencyOffset=0s",
            "-loggerLevel=WARN",
        ],
        stdout=log,
        stderr=log,
    )
    try:
        history = record_history(
            lambda: spawn_prometheus(config, data, port, log),
            port,
            data,
            groups,
            production,
            spec.name,
        )
        process = spawn_prometheus(config, data, port, log, env=NO_COLLECTION)
    except BaseException:
        reaper.stop([store], timeout=30)
        raise
    try:
        # Two evaluations of each group suffice (the replay reads each group's last one):
        # the raw series end before Prometheus starts, and the 5m windows empty as time goes.
        evaluated = wait_evaluated(port, len(groups), 2)
        stamps = {short_name(g.split(";")[-1]): t for g, t in evaluated.items()}
        real = last_evaluations(port, short_name)
        text = _metrics(port)
        delay = _value(text, "prometheus_remote_storage_highest_timestamp_in_seconds") - _value(
            text, "prometheus_remote_storage_queue_highest_sent_timestamp_seconds"
        )
        sent = _value(text, "prometheus_remote_storage_samples_total")
        sent_bytes = _value(text, "prometheus_remote_storage_bytes_total")
        # What each edge group writes: its rules' output series (all pass the write filter;
        # the edge alerts write ALERTS only while firing: none on healthy series).
        edge_series = {
            short_name(group["name"]): sum(
                count(port, f'{rule["record"]}{{training_job="{spec.name}"}}')
                for rule in group["rules"]
                if "record" in rule
            )
            for group in edge["groups"]
        }
        # At the latest evaluation measured.
        at = max(stamps.values())
        last = instant(port, f"max(timestamp({OWN_WORK}))", at)
        age = at - float(last[0]["value"][1]) if last else float("inf")
        culprit_series = {
            name: count(port, f'{name}{{training_job="{spec.name}"}}', at)
            for name in sorted(owner.records | owner.raw)
        }
        unload_rules(port, config)
        wait_compacted(port, data)
        timings, engine = replay(port, process.pid, groups, stamps, short_name, rounds)
        blocks = blocks_loaded(port)
    finally:
        reaper.stop([process, store], timeout=30)
    mine = {
        short_name(g["name"]): {rule_name(r) for r in g["rules"] if owner.owns(r)} for g in groups
    }
    rules = {g: {r: Spread.of(runs) for r, runs in rs.items()} for g, rs in timings.items()}
    return Shard(
        nodes * GPUS_PER_NODE,
        {g: group_spread(rs) for g, rs in timings.items()},
        {g: group_spread(rs) for g, rs in engine.items()},
        real,
        edge_series,
        sent_bytes / max(sent, 1),
        max(0.0, delay),
        write_s,
        {g: group_spread(rs, mine[g].__contains__) for g, rs in timings.items() if mine[g]},
        culprit_series,
        {g: {r: rules[g][r].median for r in mine[g]} for g in timings if mine[g]},
        rules,
        history,
        age,
        blocks,
    )


def arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument(
        "--nodes",
        type=int,
        nargs="+",
        default=SHARD_NODES,
        help=f"nodes on the measured shard, one run each (default {SHARD_NODES})",
    )
    parser.add_argument(
        "--rounds", type=int, default=ROUNDS, help=f"replays of every rule (default {ROUNDS})"
    )
    parser.add_argument(
        "--all-rules",
        action="store_true",
        help="also rank every global rule by its cost at 131,072 GPUs (median, p25-p75)",
    )
    return parser.parse_args()


def main() -> None:
    args = arguments()
    for tool in ("promtool", PROMETHEUS, VICTORIA_METRICS):
        if shutil.which(tool) is None:
            sys.exit(f"{tool} not found: run `make setup`")
    load = os.getloadavg()
    began = time.monotonic()
    own_mean, _, own_node = own_series_per_gpu(CollectOptions())
    per_rank = rank_series()
    spec, _ = fleet_spec(2)
    spec = spec.model_copy(update={"deploy": spec.deploy.model_copy(update={"shards": SHARDS})})
    edge, glob = split_document(RuleContext(spec), yaml.safe_load(generated_files(spec)[0]))
    intervals = {
        short_name(g["name"]): parse_duration(g.get("interval", f"{INTERVAL_S}s"))
        for g in edge["groups"] + glob["groups"]
    }
    edge_groups = [short_name(g["name"]) for g in edge["groups"]]
    shards: list[Shard] = []
    for nodes in sorted(args.nodes):
        # The writing time the previous (smaller) run took, scaled to this one, or a guess,
        # with a margin: write_data waits out a lead too long, but a lead too short leaves
        # the raw series stale when Prometheus starts (a busy machine wrote 1,024 GPUs' series
        # in 333 s where 512 GPUs' took 67), and the rules then measure empty windows.
        per_gpu = shards[-1].write_s / shards[-1].gpus if shards else WRITE_S_PER_GPU
        lead = LEAD_MARGIN * per_gpu * nodes * GPUS_PER_NODE
        for _attempt in range(2):
            with tempfile.TemporaryDirectory(prefix="bench-sharded-") as tmp:
                shard = measure(nodes, Path(tmp), lead, args.rounds)
            if shard.age_s <= FRESH_S:
                break
            print(
                f"machine: {shard.gpus} GPUs measured again: the raw series were "
                f"{shard.age_s:.0f} s old when replayed (writing took {shard.write_s:.0f} s, "
                f"{lead:.0f} s expected)",
                file=sys.stderr,
            )
            lead = LEAD_MARGIN * shard.write_s
        else:
            sys.exit(
                f"bench_sharded: the raw series at {shard.gpus} GPUs were {shard.age_s:.0f} s "
                f"old when replayed, twice (over {FRESH_S} s: the 5m windows read nothing): the "
                "machine is too busy to write them in time; run it when it is quieter"
            )
        shards.append(shard)
    print(
        f"\nsharded: one job of {GPUS:,} GPUs, {SCRAPE_S} s scrape; measured on one shard of "
        + ", ".join(f"{s.gpus} GPUs" for s in shards)
        + " (Prometheus 2.42 -> VictoriaMetrics 1.79.5), fitted proportional to GPUs"
    )
    print(
        f"  cost per evaluation: Prometheus CPU while every rule is replayed ({args.rounds} "
        "rounds) at its group's last evaluation, summed per group; median (p25-p75) over rounds"
    )
    for shard in shards:
        print(
            f"  measured {shard.gpus} GPUs: CPU "
            + ", ".join(
                f"{g} {t.median * 1000:.0f} ms ({t.low * 1000:.0f}-{t.high * 1000:.0f})"
                for g, t in sorted(shard.seconds.items())
            )
            + f"; remote-written series {shard.edge_series}; "
            f"{shard.bytes_per_sample:.2f} B/sample"
        )
        # Wall times of this machine now: how it fared, not what the rules cost. The engine's
        # own time is wall time too (a busy minute tripled it at 512 GPUs between two runs
        # whose CPU agreed within 10%).
        print(
            f"  machine: at {shard.gpus} GPUs the engine's time (evalTotalTime, wall) "
            + ", ".join(
                f"{g} {t.median * 1000:.0f} ms ({t.low * 1000:.0f}-{t.high * 1000:.0f})"
                for g, t in sorted(shard.engine.items())
            )
            + "; the last real evaluation (groups concurrent) "
            + ", ".join(f"{g} {t * 1000:.0f} ms" for g, t in sorted(shard.real.items()))
            + f"; remote-write delay {shard.delay_s:.1f} s; raw series {shard.age_s:.0f} s old"
            f" at the evaluation replayed, {shard.blocks} blocks (merged); writing the series "
            f"took {shard.write_s:.0f} s"
        )
    raw_per_gpu = own_mean + per_rank + own_node / GPUS_PER_NODE
    global_cost = {
        g: fit_spread([(s.gpus, s.seconds[g]) for s in shards], GPUS)
        for g in shards[-1].seconds
        if g not in edge_groups
    }
    global_share = {g: cost.median / intervals[g] for g, cost in global_cost.items()}
    print(
        "global ruler at 131,072 GPUs (CPU per evaluation / interval, median (p25-p75)): "
        + ", ".join(f"{g} {percent(c, intervals[g])}" for g, c in sorted(global_cost.items()))
    )
    print("per shard (edge groups: CPU per evaluation / interval, median):")
    print(
        f"{'shards':>6} {'GPUs/shard':>11} {'series/shard':>13} {'samples/s':>10} "
        + "".join(f"{g:>12}" for g in edge_groups)
        + f" {'written/s':>11}"
    )
    recommended = None
    for n in SHARD_CHOICES:
        gpus = GPUS / n
        series = raw_per_gpu * gpus
        share = {
            g: fit([(s.gpus, s.seconds[g].median) for s in shards], gpus) / intervals[g]
            for g in edge_groups
        }
        per_gpu_written = {
            g: shards[-1].edge_series[g] / shards[-1].gpus for g in shards[-1].edge_series
        }
        written = sum(per_gpu_written[g] * gpus / intervals[g] for g in per_gpu_written)
        bytes_s = written * shards[-1].bytes_per_sample
        print(
            f"{n:>6} {gpus:>11,.0f} {series:>13,.0f} {series / SCRAPE_S:>10,.0f} "
            + "".join(f"{share[g]:>12.1%}" for g in edge_groups)
            + f" {bytes_s / 1024:>7.1f} KiB"
        )
        ok = max(share.values()) < GOAL and series <= SERIES_BUDGET
        if recommended is None and ok:
            recommended = n
    worst_global = max(global_share.values())
    print(
        f"global goal < 10%: {'met' if worst_global < GOAL else 'NOT met'} "
        f"(worst {worst_global:.1%}); added time to page: up to one edge evaluation "
        f"({INTERVAL_S} s) + remote-write delay (5 s batch deadline by default)"
    )
    print(f"machine: remote-write delay measured up to {max(s.delay_s for s in shards):.1f} s")
    if recommended is not None:
        print(
            f"recommended: {recommended} shards for {GPUS:,} GPUs = "
            f"{recommended * 16_384 / GPUS:g} per 16K GPUs (every edge group < {GOAL:.0%} of its "
            f"interval and <= {SERIES_BUDGET:,} series per shard)"
        )
    else:
        print(f"no shard count up to {SHARD_CHOICES[-1]} meets the per-shard goals")
    owner = culprit(RuleContext(spec), yaml.safe_load(generated_files(spec)[0]))
    count = recommended or SHARD_CHOICES[-1]
    report(shards, owner, intervals, edge_groups, count, GPUS, GOAL)
    if args.all_rules:
        print_ranked(
            {
                (group, rule): [(s.gpus, s.rules.get(group, {}).get(rule)) for s in shards]
                for group, rules in shards[-1].rules.items()
                if group not in edge_groups
                for rule in rules
            },
            GPUS,
            intervals,
            {r for rules in shards[-1].culprit_rules.values() for r in rules},
        )
    # The machine may be shared: its load says how far CPU figures can be trusted.
    print(
        f"machine: load average (1/5/15 min) at start {' '.join(f'{x:.1f}' for x in load)}, at end "
        f"{' '.join(f'{x:.1f}' for x in os.getloadavg())}, on {os.cpu_count()} CPUs; "
        f"bench took {(time.monotonic() - began) / 60:.1f} min"
    )


if __name__ == "__main__":
    main()
