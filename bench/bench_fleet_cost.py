"""Monitoring cost of one 16,384-GPU job (2,048 nodes x 8 GPUs, Llama 3 405B's shape).

Prints, per GPU source, the series each GPU costs (read from the exporters themselves, see
bench_gpu_exporter.py), the series each training rank serves, the series the generated
recording rules add per job, and each generated rule group's evaluation time and Prometheus'
peak memory measured on a real Prometheus 2.42 (127.0.0.1).

Rule evaluation is measured at two smaller scales and projected linearly to 16,384 GPUs (a
full-size run needs ~750k series in memory, too much for a bounded bench on a shared
machine): Prometheus gets 70 minutes of healthy series (the series the rules read, written as
the fleet replay writes them, one sample a minute, backfilled with promtool; the 1h windows
are full; the recorded per-rank, per-GPU and per-node series the rules read over a window get
that window's history, up to 6h, bench_culprit.py), loads the generated rule file with every
group evaluated every 15 s (so each one runs several times) and reports
`prometheus_rule_group_last_duration_seconds` after each evaluation; the fastest of them
counts (the machine is shared: the rest is waiting for a CPU). Each group's cost is that time
over the group's own interval in the generated file (the global default, 1 minute, where it
sets none). The goal: every group under 10%.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_culprit import record_history
from bench_gpu_exporter import CollectOptions, dcgm_series_per_gpu, own_series_per_gpu
from trainsignals.exporters.training.metrics import TrainingMetrics
from trainsignals.exporters.training.timeaccount import ACTIVITIES
from trainsignals.generator.spec.durations import format_duration, parse_duration

from trainsignals.fleet.emit import Emitter, referenced_metrics
from trainsignals.fleet.failslow import OWN_SHARE
from trainsignals.fleet.history import DATA_WAIT_RATIO
from trainsignals.fleet.spec import JOB, fleet_spec, generated_files
from trainsignals.fleet.timeline import STEP_SECONDS, Minute
from trainsignals.stacks import reaper
from trainsignals.stacks.stack import HOST, PROMETHEUS, free_port

NODES, GPUS_PER_NODE = 2048, 8
GPUS = NODES * GPUS_PER_NODE
SCALES = (32, 128)  # nodes measured; the projection is linear in GPUs
MINUTES = 70  # the 1h windows read a full hour
EVAL_S = 15
DEFAULT_INTERVAL_S = 60  # Prometheus' default evaluation interval (groups that set none)
EVALUATIONS = 5  # evaluations of each group observed per scale
CPU_ROUNDS = 5  # each group's rules run this often for its CPU time


def rank_series() -> int:
    """Series one rank of the training instrumentation serves while training."""
    metrics = TrainingMetrics(
        rank=0,
        local_rank=0,
        world_size=8,
        labels={"training_job": "b"},
        checkpoint_dir=tempfile.gettempdir(),
    )
    with metrics.step(tokens=1000, samples=2):
        pass
    metrics.loss(2.0)
    metrics.checkpoint_saved()
    text = metrics.exposition().decode()
    return sum(1 for line in text.splitlines() if line and not line.startswith("#"))


def recorded_series(rules_text: str, nodes: int) -> int:
    """Output series of the recording rules, from their `level:` (job, node or GPU)."""
    per_level = {"job": 1, "node": nodes, "gpu": nodes * GPUS_PER_NODE}
    document = yaml.safe_load(rules_text)
    return sum(
        per_level.get(rule["record"].split(":")[0], 1)
        for group in document["groups"]
        for rule in group["rules"]
        if "record" in rule
    )


def healthy_minutes(nodes: int) -> list[Minute]:
    """Every rank training since the start: 2% of each minute waiting for data, OWN_SHARE of
    the training time its own work (the straggler's input: at 0, the job's median own-work
    rate is 0 and the straggler's ratio, baseline and cost record nothing to measure)."""
    hosts = tuple(f"gpu-n{i:04d}" for i in range(nodes))
    minutes = []
    for m in range(MINUTES):
        seconds = {"train": (m + 1) * 60 * (1 - DATA_WAIT_RATIO)}
        seconds["data_wait"] = (m + 1) * 60 * DATA_WAIT_RATIO
        minutes.append(
            Minute(
                alive=True,
                phase="train",
                steps=m * 60 / STEP_SECONDS,
                step_seconds=STEP_SECONDS,
                data_wait=seconds["data_wait"],
                last_step=m * 60 + 58,
                last_checkpoint=0,
                loss=2.0,
                busy=0.97,
                incarnation=0,
                process_start=0,
                nodes=hosts,
                global_step=m * 60 / STEP_SECONDS,
                activity=tuple(seconds.get(a, 0.0) for a in ACTIVITIES),
                own_work=seconds["train"] * OWN_SHARE,
            )
        )
    return minutes


def group_intervals(rules_text: str) -> dict[str, int]:
    """Each generated group's evaluation interval in seconds, keyed by its short name."""
    return {
        short_name(group["name"]): parse_duration(group.get("interval", f"{DEFAULT_INTERVAL_S}s"))
        for group in yaml.safe_load(rules_text)["groups"]
    }


def short_name(group: str) -> str:
    """`trainsignals-<job>-recording-slow` -> `recording-slow`."""
    return group.split(f"{JOB}-", 1)[-1]


def rule_costs(port: int, rules_text: str) -> dict[str, dict[str, float]]:
    """{group: {rule: seconds of one instant query of its expression (best of three)}}."""
    costs: dict[str, dict[str, float]] = {}
    for group in yaml.safe_load(rules_text)["groups"]:
        mine = costs.setdefault(short_name(group["name"]), {})
        for rule in group["rules"]:
            name = rule.get("record") or rule["alert"]
            query = urllib.parse.urlencode({"query": rule["expr"]})
            best = float("inf")
            for _ in range(3):
                started = time.perf_counter()
                with urllib.request.urlopen(
                    f"http://{HOST}:{port}/api/v1/query?{query}", timeout=60
                ) as answer:
                    answer.read()
                best = min(best, time.perf_counter() - started)
            mine[name] = mine.get(name, 0.0) + best
    return costs


def wait_ready(port: int, timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            with urllib.request.urlopen(f"http://{HOST}:{port}/-/ready", timeout=2) as answer:
                if answer.status == 200:
                    return
        except OSError:
            if time.monotonic() > deadline:
                raise
        time.sleep(0.5)


def group_durations(port: int) -> tuple[dict[str, float], dict[str, float]]:
    """({group: fastest of EVALUATIONS evaluations, seconds}, {group: its last evaluation's
    timestamp})."""
    wait_ready(port)
    seen: dict[str, dict[float, float]] = {}  # group -> {evaluation timestamp: duration}
    deadline = time.monotonic() + EVAL_S * (EVALUATIONS + 3)
    while time.monotonic() < deadline:
        with urllib.request.urlopen(f"http://{HOST}:{port}/metrics", timeout=10) as answer:
            text = answer.read().decode()
        last = {
            m.group(1): float(m.group(2))
            for m in re.finditer(
                r'prometheus_rule_group_last_evaluation_timestamp_seconds\{rule_group="([^"]+)"\}'
                r" (\S+)",
                text,
            )
        }
        for m in re.finditer(
            r'prometheus_rule_group_last_duration_seconds\{rule_group="([^"]+)"\} (\S+)', text
        ):
            if last.get(m.group(1), 0) > 0:
                seen.setdefault(m.group(1), {})[last[m.group(1)]] = float(m.group(2))
        if seen and all(len(runs) >= EVALUATIONS for runs in seen.values()):
            break
        time.sleep(EVAL_S / 3)
    fastest = {short_name(g.split(";")[-1]): min(runs.values()) for g, runs in seen.items()}
    return fastest, {short_name(g.split(";")[-1]): max(runs) for g, runs in seen.items()}


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process (/proc/PID/stat fields 14 and 15)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def query(port: int, expr: str, at: float) -> None:
    args = urllib.parse.urlencode({"query": expr, "time": f"{at:.3f}"})
    with urllib.request.urlopen(f"http://{HOST}:{port}/api/v1/query?{args}", timeout=120) as r:
        r.read()


def group_cpu(
    port: int, pid: int, document: dict, stamps: dict[str, float], rounds: int = CPU_ROUNDS
) -> dict[str, float]:
    """Prometheus CPU seconds per evaluation of each group: steadier than wall time on a busy
    machine (that includes waiting for a CPU), though not immune to it. The rule groups are
    unloaded first; each group's rules then run as instant queries at its last evaluation's
    timestamp (what they read is there), `rounds` times, less Prometheus' idle CPU."""
    config = yaml.safe_load(Path(document["config"]).read_text())
    config["rule_files"] = []
    Path(document["config"]).write_text(yaml.safe_dump(config))
    urllib.request.urlopen(
        urllib.request.Request(f"http://{HOST}:{port}/-/reload", method="POST"), timeout=60
    ).read()
    cpu: dict[str, float] = {}
    for group in document["groups"]:
        name = short_name(group["name"])
        before, started = cpu_seconds(pid), time.monotonic()
        time.sleep(1.0)
        idle = (cpu_seconds(pid) - before) / (time.monotonic() - started)
        before, started = cpu_seconds(pid), time.monotonic()
        for _ in range(rounds):
            for rule in group["rules"]:
                query(port, rule["expr"], stamps[name])
        spent = cpu_seconds(pid) - before - idle * (time.monotonic() - started)
        cpu[name] = max(0.0, spent) / rounds
    return cpu


@dataclass
class Scale:
    gpus: int
    wall: dict[str, float]  # group -> fastest evaluation, seconds
    cpu: dict[str, float]  # group -> Prometheus CPU seconds per evaluation
    peak_mib: float
    samples: int
    costs: dict[str, dict[str, float]]  # group -> rule -> seconds of one instant query


def measure(nodes: int, work: Path) -> Scale:
    spec, _ = fleet_spec(nodes)
    rules_text, _, _ = generated_files(spec)
    # Every group evaluated every EVAL_S for the measurement; its cost is judged against the
    # interval the generated file gives it (group_intervals).
    document = yaml.safe_load(rules_text)
    for group in document["groups"]:
        group["interval"] = f"{EVAL_S}s"
    rules = work / "rules.yaml"
    rules.write_text(yaml.safe_dump(document, sort_keys=False))
    epoch = int(time.time()) // 60 * 60 - MINUTES * 60
    emitter = Emitter(
        healthy_minutes(nodes),
        spec.selector_labels,
        (spec.scrape_jobs.training, spec.scrape_jobs.gpu),
        referenced_metrics(rules_text),
        epoch,
    )
    data = work / "data"
    samples = emitter.write_blocks(work / "om", data)
    config = work / "prometheus.yml"
    config.write_text(
        yaml.safe_dump(
            {"global": {"evaluation_interval": f"{EVAL_S}s"}, "rule_files": [str(rules)]}
        )
    )
    port = free_port()
    log = (work / "prometheus.log").open("wb")

    def start() -> subprocess.Popen:
        return spawn_prometheus(config, data, port, log)

    # The recorded history the rules' windows read (the straggler's 6h baseline...), written
    # after a first run recorded the series (bench_culprit.py).
    production = {
        g["name"]: parse_duration(g.get("interval", f"{DEFAULT_INTERVAL_S}s"))
        for g in yaml.safe_load(rules_text)["groups"]
    }
    samples += record_history(start, port, data, document["groups"], production, spec.name)
    process = start()
    try:
        wall, stamps = group_durations(port)
        costs = rule_costs(port, rules_text)
        cpu = group_cpu(port, process.pid, {**document, "config": str(config)}, stamps)
        status = Path(f"/proc/{process.pid}/status").read_text()
        peak_kib = int(re.search(r"VmHWM:\s+(\d+)", status).group(1))  # type: ignore[union-attr]
    finally:
        reaper.stop([process], timeout=30)
    return Scale(nodes * GPUS_PER_NODE, wall, cpu, peak_kib / 1024, samples, costs)


def project(small: tuple[int, float], large: tuple[int, float]) -> tuple[float, float]:
    """(seconds per GPU, seconds at GPUS): linear through the two scales."""
    slope = max(0.0, (large[1] - small[1]) / (large[0] - small[0]))
    return slope, large[1] + slope * (GPUS - large[0])


def spawn_prometheus(config: Path, data: Path, port: int, log: BinaryIO) -> subprocess.Popen:
    """A bench Prometheus on 127.0.0.1 over a backfilled TSDB (kept: retention 10y)."""
    return reaper.spawn(
        [
            PROMETHEUS,
            f"--config.file={config}",
            f"--storage.tsdb.path={data}",
            "--storage.tsdb.retention.time=10y",
            f"--web.listen-address={HOST}:{port}",
            "--web.enable-lifecycle",
        ],
        stdout=log,
        stderr=log,
    )


def main() -> None:
    for tool in ("promtool", PROMETHEUS):
        if shutil.which(tool) is None:
            sys.exit(f"{tool} not found: run `make setup`")
    own_mean, _, own_node = own_series_per_gpu(CollectOptions())
    dcgm = dcgm_series_per_gpu()
    per_rank = rank_series()
    spec, _ = fleet_spec(NODES)
    recorded = recorded_series(generated_files(spec)[0], NODES)
    print(f"fleet cost: one job of {NODES:,} nodes x {GPUS_PER_NODE} GPUs = {GPUS:,} GPUs")
    print(f"{'source':<40} {'per GPU':>8} {'job series':>12}")
    own_total = own_mean * GPUS + own_node * NODES
    print(f"{'trainsignals-gpu-exporter (default)':<40} {own_mean:>8.1f} {own_total:>12,.0f}")
    print(f"{'dcgm-exporter (default counters)':<40} {dcgm:>8} {dcgm * GPUS:>12,}")
    print(f"{'training instrumentation (per rank)':<40} {per_rank:>8} {per_rank * GPUS:>12,}")
    print(f"{'recorded by the generated rules':<40} {recorded / GPUS:>8.2f} {recorded:>12,}")

    intervals = group_intervals(generated_files(spec)[0])
    print(
        f"\nrule groups on Prometheus 2.42, {MINUTES} min of healthy series: CPU per "
        f"evaluation (mean of {CPU_ROUNDS}) and wall time (fastest of {EVALUATIONS}), measured "
        "and projected"
    )
    scales: list[Scale] = []
    for nodes in SCALES:
        with tempfile.TemporaryDirectory(prefix="bench-fleet-") as tmp:
            scales.append(measure(nodes, Path(tmp)))
    first, last = scales[0], scales[-1]
    sizes = "".join(f"{f'{s.gpus} GPUs':>11}" for s in scales)
    print(f"{'':<25}{'Prometheus CPU per evaluation':^46}   {'wall time (fastest)':^46}")
    row = f"{sizes}{'16,384 GPUs':>13}{'ratio':>8}"
    print(f"{'group':<16}{'interval':>9}{row}   {row}")
    worst = worst_wall = 0.0
    for group in sorted(last.cpu):
        interval = intervals[group]
        cells = []
        for kind in ("cpu", "wall"):
            a, b = getattr(first, kind)[group], getattr(last, kind)[group]
            _, projected = project((first.gpus, a), (last.gpus, b))
            ratio = projected / interval
            if kind == "cpu":
                worst = max(worst, ratio)
            else:
                worst_wall = max(worst_wall, ratio)
            cells.append(f"{a * 1000:>9.0f}ms{b * 1000:>9.0f}ms{projected:>12.2f}s{ratio:>8.1%}")
        print(f"{group:<16}{format_duration(interval):>9}{cells[0]}   {cells[1]}")
    peaks = [(s.gpus, s.peak_mib, s.samples) for s in scales]
    costs = last.costs
    (g1, m1, _), (g2, m2, _) = peaks[0], peaks[-1]
    per_gpu_mib = max(0.0, (m2 - m1) / (g2 - g1))
    print(
        "Prometheus peak RSS: "
        + ", ".join(f"{g:,} GPUs {m:.0f} MiB ({s:,} samples)" for g, m, s in peaks)
        + f"; {per_gpu_mib * 1024:.0f} KiB per GPU -> {m2 + per_gpu_mib * (GPUS - g2):,.0f} MiB "
        "projected for 16,384 GPUs (series the rules read only)"
    )
    for group, rules in sorted(costs.items()):
        top = sorted(rules.items(), key=lambda item: -item[1])[:4]
        print(
            f"costliest in {group} at {SCALES[-1] * GPUS_PER_NODE:,} GPUs (one instant query "
            "each): " + ", ".join(f"{name} {seconds * 1000:.0f} ms" for name, seconds in top)
        )
    verdict = "met" if worst < 0.10 else "NOT met"
    print(
        f"goal every group < 10% of its interval: {verdict} (worst projected {worst:.1%} in "
        f"Prometheus CPU per evaluation; {worst_wall:.1%} in wall time on this machine now)"
    )


if __name__ == "__main__":
    main()
