"""Cost of the lemon-node record (alerts/nodes.rules.yaml, generator/nodes/) at 131,072 GPUs.

The record is fleet-level (one rule file for every job and spare, on the global ruler when
sharded): its cost grows with hardware incidents, not with GPUs. It is measured at full size
on a real Prometheus 2.42, no projection: 16,384 nodes (131,072 GPUs), each with a recorded
incident start in the last 30 days (an upper bound: most nodes have none), LEMON_SHARE of them
with LEMON_INCIDENTS; and a bad hour, FIRING_SHARE of the nodes with a hardware alert firing
for the last 20 minutes (`ALERTS`, what the start rule reads). Tickets (non-fatal evidence):
every node with TICKETS recorded ticket starts in 30 days, a lemon with LEMON_TICKETS, and
TICKET_FIRING_SHARE of the nodes with a ticket firing for the last 20 minutes. Every group is
evaluated every 15 s; after 5 real evaluations each group's rules are replayed at its last one
(bench/rule_timing.py: Prometheus's CPU, median and p25-p75 over the rounds); that over its
production interval is its cost. Goal: every group under 10%.

The incident starts are placed in a few two-hour blocks spread over the 30 days (the reads
cover the whole window either way; a block per two hours would be 360 blocks to open).
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_fleet_cost import EVAL_S, NO_COLLECTION, group_durations, spawn_prometheus
from rule_timing import ROUNDS, Spread, group_spread, percent, replay, unload_rules

from trainsignals.fleet.emit import import_openmetrics
from trainsignals.fleet.spec import JOB, fleet_spec
from trainsignals.generator.nodes.files import nodes_document
from trainsignals.generator.signals.node_incidents import FAULT_START, INCIDENT_START, TICKET_START
from trainsignals.generator.spec.durations import parse_duration
from trainsignals.stacks import reaper
from trainsignals.stacks.ports import free_port
from trainsignals.stacks.stack import PROMETHEUS

NODES = 16_384  # 131,072 GPUs
LEMON_SHARE = 0.012  # Kokolis et al. 2024: 1.2% of the nodes
LEMON_INCIDENTS = 4
FIRING_SHARE = 0.01
DAYS = 30
BLOCK_DAYS = (1, 5, 9, 13, 17, 21, 25, 29)  # days back holding the incident starts
GOAL = 0.10
FAULT = "GpuLost"  # a declared hardware fault (the rules' regex lists them)
TICKET = "GpuXidError"  # a ticket (derived from the declarations: the rules' regex lists them)
TICKETS = 2  # ticket starts per node in 30 days (the replay's model: 1)
LEMON_TICKETS = 20  # a lemon's (the replay's model: 10)
TICKET_FIRING_SHARE = 0.05


def write_series(path: Path, now: int) -> int:
    """Incident starts over 30 days, and the hardware alerts firing now; returns samples."""
    lemons = int(NODES * LEMON_SHARE)
    firing = int(NODES * FIRING_SHARE)
    lines: list[str] = []
    for n in range(NODES):
        node = f"gpu-n{n:05d}"
        for i in range(LEMON_INCIDENTS if n < lemons else 1):
            day = BLOCK_DAYS[(n + i) % len(BLOCK_DAYS)]
            start = now - day * 86400 + (n % 100) * 60
            lines.append(f'{INCIDENT_START}{{node="{node}"}} {start} {start}')
            labels = f'alertname="{FAULT}",node="{node}",training_job="{JOB}"'
            lines.append(f"{FAULT_START}{{{labels}}} {start} {start}")
        for i in range(LEMON_TICKETS if n < lemons else TICKETS):
            day = BLOCK_DAYS[(n + i + 3) % len(BLOCK_DAYS)]
            start = now - day * 86400 + (n % 100) * 60 + 3600 * (1 + i // len(BLOCK_DAYS))
            lines.append(f'{TICKET_START}{{node="{node}"}} {start} {start}')
            labels = f'alertname="{TICKET}",node="{node}",training_job="{JOB}"'
            lines.append(f"{FAULT_START}{{{labels}}} {start} {start}")
    for n in range(firing):
        labels = f'alertname="{FAULT}",alertstate="firing",node="gpu-n{n:05d}"'
        lines += [
            f'ALERTS{{{labels},training_job="{JOB}"}} 1 {t}' for t in range(now - 1200, now, 60)
        ]
    for n in range(NODES - int(NODES * TICKET_FIRING_SHARE), NODES):
        labels = f'alertname="{TICKET}",alertstate="firing",node="gpu-n{n:05d}",gpu="0"'
        lines += [
            f'ALERTS{{{labels},training_job="{JOB}"}} 1 {t}' for t in range(now - 1200, now, 60)
        ]
    # OpenMetrics wants each series' samples together and in time order.
    lines.sort(key=lambda line: (line.rsplit(" ", 2)[0], int(line.rsplit(" ", 1)[1])))
    path.write_text("\n".join(lines) + "\n# EOF\n")
    return len(lines)


def main() -> None:
    if shutil.which("promtool") is None or shutil.which(PROMETHEUS) is None:
        sys.exit("promtool or prometheus not found: run `make setup`")
    load = os.getloadavg()
    spec, _ = fleet_spec(2)
    document = nodes_document([spec], None)
    production = {g["name"]: parse_duration(g.get("interval", "60s")) for g in document["groups"]}
    for group in document["groups"]:
        group["interval"] = f"{EVAL_S}s"
    with tempfile.TemporaryDirectory(prefix="bench-nodes-") as tmp:
        work = Path(tmp)
        rules, config, data = work / "nodes.rules.yaml", work / "prometheus.yml", work / "data"
        rules.write_text(yaml.safe_dump(document, sort_keys=False))
        config.write_text(yaml.safe_dump({"rule_files": [str(rules)]}))
        now = int(time.time()) // 60 * 60
        samples = write_series(work / "series.om", now)
        import_openmetrics([work / "series.om"], data)
        port = free_port()
        log = (work / "prometheus.log").open("wb")
        process = spawn_prometheus(config, data, port, log, env=NO_COLLECTION)
        try:
            real, stamps = group_durations(port)
            unload_rules(port, config)
            timings, _ = replay(
                port, process.pid, document["groups"], stamps, lambda name: name, ROUNDS
            )
        finally:
            reaper.stop([process], timeout=30)
    print(
        f"\nlemon-node record at {NODES:,} nodes ({NODES * 8:,} GPUs), measured at full size: "
        f"every node with an incident start in {DAYS} days, {LEMON_SHARE:.1%} with "
        f"{LEMON_INCIDENTS}, {FIRING_SHARE:.0%} with a hardware alert firing; {TICKETS} ticket "
        f"starts per node ({LEMON_TICKETS} on a lemon), {TICKET_FIRING_SHARE:.0%} with a ticket "
        f"firing ({samples:,} samples)"
    )
    worst = 0.0
    for name, interval in production.items():
        cost = group_spread(timings[name])
        share = cost.median / interval
        worst = max(worst, share)
        print(
            f"  {name.removeprefix('trainsignals-'):<24} interval {interval:>4} s: CPU "
            f"{cost.median * 1000:.0f} ms ({cost.low * 1000:.0f}-{cost.high * 1000:.0f}) per "
            f"evaluation = {percent(cost, interval)}"
        )
    print(
        f"goal every group < {GOAL:.0%}: {'met' if worst < GOAL else 'NOT met'} (worst {worst:.2%})"
    )
    print(
        "machine: real evaluations here now (wall, median): "
        + ", ".join(
            f"{name.removeprefix('trainsignals-')} {Spread.of(real[name]).median * 1000:.0f} ms"
            for name in production
        )
        + f"; load average {load[0]:.1f} -> {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs"
    )


if __name__ == "__main__":
    main()
