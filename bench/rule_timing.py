"""Rule cost per evaluation, replayed many times at one moment: Prometheus's CPU while it runs
(its engine's own time beside it), median and p25-p75.

Why not the running rule manager's `evaluationTime` over many real evaluations: the benches'
raw series are blocks written before Prometheus starts, so each later evaluation reads staler
data (5m windows empty within minutes) and costs less. Writing the blocks to reach into the
future does not help on Prometheus 2.42: the head refuses samples older than the newest
block's end, so every recording rule fails "out of bounds" (tested); with an out-of-order
window the rules record, but into the out-of-order head, another storage path than
production's. And the real groups run concurrently, so each one's duration includes waiting
for the others.

So each rule's expression is evaluated again, as an instant query at the timestamp of its
group's last real evaluation (it reads exactly what that evaluation read, recorded inputs
included), with the rule groups unloaded and one query at a time, many rounds, the rules of
every group interleaved in each round. Two clocks per query: the engine's `evalTotalTime`
(`stats=all`: the evaluation alone, no HTTP or JSON) and the CPU time of all of Prometheus's
threads (/proc/PID/task/*/schedstat, ns). The cost is the CPU: on the shared 2-core box (load
2 to 23 within one run) the engine's wall time of one rule swung 2-5x between rounds, and a
512-GPU shard measured in a busy minute cost more than a 1,024-GPU one in a quiet minute; CPU
time does not count the time other processes hold the cores. A group's cost in a round is
the sum of its rules' (a group runs its rules one after another); the figures are the median
over rounds and the spread p25-p75. CPU time still counts a slower machine (this one's speed
swings by up to 1.8x within minutes, and a busy neighbour on the other hyperthread slows every
instruction): each round is scaled to the README machine's speed by the reference loop
measured before and after it (bench/figures.py).

Two things made a whole size move between runs, both in Prometheus, not in the machine:
- the storage layout: the benches write blocks that overlap in time (a shard's four 15 s
  quarters, the recorded history), and Prometheus merges them on its compactor's first pass,
  a minute or more after it starts. A query over the 8 overlapping blocks cost 2.5-3x one over
  the 3 merged ones (same samples read), and the merge fell inside bench_sharded's replay (at
  round 5 to 9 of 11): a size's median was whichever layout held more rounds. The replay now
  waits for the merge (`wait_compacted`), and says on stderr if the blocks loaded changed;
- Go's collector: on, it ran ~11 times a round, on different rules each round, and one rule's
  rounds split into two modes 3x apart. Both benches replay with it off (up to a bound), and
  `collect_garbage` runs it between rounds, so a rule's cost excludes the collection of its
  garbage (the rule manager's real evaluations, on `machine:` lines, include it).
Within one layout, two runs' raw CPU per group and size agreed within 1-8%, the loop's factor
within 5%: no drift of Prometheus's speed apart from the loop's showed, so no Go-side
reference is used. Two fixed queries timed in every round, tried for one, agreed as well: a
subquery over `vector(1)` 4-6 ms in both runs, a count over every series 660-710 ms over the
overlapping blocks and 205-220 ms over the merged ones at 512 GPUs in both. With
BENCH_RAW=<folder>, each replay writes its rounds as measured (JSON: factor, blocks loaded,
every rule's CPU and engine seconds).
"""

from __future__ import annotations

import itertools
import json
import os
import statistics
import sys
import time
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

import yaml
from figures import RoundSpeed

from trainsignals.stacks.stack import HOST

ROUNDS = 11  # replays of every rule; median and p25-p75 over them

Timings = dict[str, dict[str, list[float]]]  # group -> rule -> seconds, one per round


@dataclass(frozen=True)
class Spread:
    median: float
    low: float  # p25
    high: float  # p75

    @classmethod
    def of(cls, values: Iterable[float]) -> Spread:
        data = sorted(values)
        if len(data) < 2:
            value = data[0] if data else 0.0
            return cls(value, value, value)
        low, median, high = statistics.quantiles(data, n=4, method="inclusive")
        return cls(median, low, high)

    def scaled(self, factor: float) -> Spread:
        return Spread(self.median * factor, self.low * factor, self.high * factor)


def cpu_seconds(pid: int) -> float:
    """CPU time of every thread of process `pid` so far, in ns resolution (schedstat)."""
    total = 0
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            total += int((task / "schedstat").read_text().split()[0])
        except (FileNotFoundError, ProcessLookupError):  # a thread that just left
            continue
    return total / 1e9


def engine_seconds(port: int, pid: int, expr: str, at: float) -> tuple[float, float]:
    """(the query engine's evalTotalTime, Prometheus's CPU seconds) for `expr` as an instant
    query at `at`."""
    args = urllib.parse.urlencode({"query": expr, "time": f"{at:.3f}", "stats": "all"})
    before = cpu_seconds(pid)
    with urllib.request.urlopen(f"http://{HOST}:{port}/api/v1/query?{args}", timeout=120) as r:
        answer = json.load(r)
    cpu = cpu_seconds(pid) - before
    return float(answer["data"]["stats"]["timings"]["evalTotalTime"]), cpu


def drop_rules(config: Path) -> None:
    """Take the rule files out of the Prometheus configuration `config`."""
    document = yaml.safe_load(config.read_text())
    document["rule_files"] = []
    config.write_text(yaml.safe_dump(document))


def unload_rules(port: int, config: Path) -> None:
    """Stop the rule manager's own evaluations (they would compete with the replay)."""
    drop_rules(config)
    request = urllib.request.Request(f"http://{HOST}:{port}/-/reload", method="POST")
    urllib.request.urlopen(request, timeout=60).read()


def collect_garbage(port: int) -> None:
    """Have Prometheus run Go's garbage collector now (net/http/pprof's heap profile with
    `gc=1` calls runtime.GC first), between the timed queries: each round starts from the same
    heap, not from the last round's garbage. With the collector off (bench_sharded.py) the heap
    would otherwise grow round by round to its memory limit, where the collector runs on every
    query; with it on, a collection lands on whichever rule runs when the garbage adds up."""
    url = f"http://{HOST}:{port}/debug/pprof/heap?gc=1"
    with urllib.request.urlopen(url, timeout=120) as answer:
        answer.read()


def blocks_loaded(port: int) -> int:
    """The persistent blocks Prometheus at `port` reads now."""
    with urllib.request.urlopen(f"http://{HOST}:{port}/metrics", timeout=60) as answer:
        text = answer.read().decode()
    return int(float(text.split("\nprometheus_tsdb_blocks_loaded ", 1)[1].split()[0]))


def overlapping(data: Path) -> bool:
    """Whether two of the blocks in the TSDB folder `data` cover the same time."""
    spans = sorted(
        (meta["minTime"], meta["maxTime"])
        for meta in (json.loads(p.read_text()) for p in block_metas(data))
    )
    return any(later[0] < earlier[1] for earlier, later in itertools.pairwise(spans))


def block_metas(data: Path) -> list[Path]:
    """The meta.json of every finished block in the TSDB folder `data`."""
    return [p for p in data.glob("*/meta.json") if ".tmp" not in p.parent.name]


def wait_compacted(port: int, data: Path, timeout: float = 300) -> None:
    """Wait until Prometheus at `port` merged the overlapping blocks in `data` and reads the
    merged ones. The benches write blocks that overlap (a shard's four 15 s quarters, the
    recorded history); Prometheus merges them on its compactor's first pass, a minute or more
    after it starts, and a query over 8 overlapping blocks cost ~3x one over the 3 merged
    ones (a shard's edge group 1,650 and 450 ms at 1,024 GPUs): a replay that began before
    the merge measured both layouts, the median whichever held more rounds."""
    deadline = time.monotonic() + timeout
    while True:
        if not overlapping(data) and blocks_loaded(port) == len(block_metas(data)):
            return
        if time.monotonic() > deadline:
            raise RuntimeError(f"Prometheus did not merge the overlapping blocks in {data}")
        time.sleep(2)


def rule_name(rule: dict) -> str:
    return rule.get("record") or rule["alert"]


def replay(
    port: int,
    pid: int,
    groups: list[dict],
    stamps: dict[str, float],
    name: Callable[[str], str],
    rounds: int = ROUNDS,
) -> tuple[Timings, Timings]:
    """({group (`name` of its full name): {rule: [CPU seconds per round]}}, the same in
    engine seconds) for `groups` (rule file groups) on the Prometheus `pid` at `port`, each
    group's rules at `stamps[group]`, at the README machine's speed; rules of one name in a
    group (the hang suspects' arms) are summed."""
    cpu: Timings = {name(g["name"]): {} for g in groups}
    engine: Timings = {name(g["name"]): {} for g in groups}
    speed = RoundSpeed()
    raw: list[dict] = []  # every round as measured, for BENCH_RAW
    for round_ in range(rounds):
        collect_garbage(port)
        blocks = blocks_loaded(port)
        measured: list[tuple[Timings, str, str, float]] = []
        for group in groups:
            short = name(group["name"])
            for rule in group["rules"]:
                wall, spent = engine_seconds(port, pid, rule["expr"], stamps[short])
                measured += [
                    (engine, short, rule_name(rule), wall),
                    (cpu, short, rule_name(rule), spent),
                ]
        factor = speed.factor()
        for timings, short, rule, seconds in measured:
            runs = timings[short].setdefault(rule, [])
            if len(runs) == round_:
                runs.append(0.0)
            runs[round_] += seconds * factor
        raw.append(
            {
                "factor": factor,
                "blocks": [blocks, blocks_loaded(port)],
                "seconds": [(f"{s}/{r}", t is cpu, v) for t, s, r, v in measured],
            }
        )
    layouts = {count for entry in raw for count in entry["blocks"]}
    if len(layouts) > 1:
        print(f"rule_timing: blocks loaded changed during the replay: {layouts}", file=sys.stderr)
    if os.environ.get("BENCH_RAW"):  # a folder: each replay's rounds as measured, in JSON
        folder = Path(os.environ["BENCH_RAW"])
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"replay-{time.time():.0f}.json").write_text(json.dumps(raw))
    return cpu, engine


def group_spread(rules: dict[str, list[float]], keep: Callable[[str], bool] = bool) -> Spread:
    """A group's (or the part of its rules `keep` says) cost per round: median, p25-p75."""
    chosen = [runs for rule, runs in rules.items() if keep(rule)]
    if not chosen:
        return Spread(0.0, 0.0, 0.0)
    return Spread.of(sum(column) for column in zip(*chosen, strict=True))


def fit(points: list[tuple[float, float]], at: float) -> float:
    """The measured (GPUs, seconds) points fitted as seconds proportional to GPUs (least
    squares through the origin), read at `at` GPUs. An upper bound where a group has a fixed
    part, but sturdy: a line through two sizes 512 GPUs apart, extrapolated 128-fold, turned
    a 30% difference at the small size into 6.5% vs 23.3% of a minute between two runs."""
    return sum(x * y for x, y in points) / sum(x * x for x, _ in points) * at


def line_fit(points: list[tuple[float, float]], at: float) -> float:
    """The points fitted as a fixed part plus a part proportional to GPUs (least squares
    line, neither part below 0), read at `at` GPUs: the estimate where `fit` is the upper
    bound. A group whose cost barely grows between the sizes measured (per-query overhead:
    parsing, index lookups) is mostly fixed, which `fit` multiplies with the GPUs."""
    n = len(points)
    mean_x = sum(x for x, _ in points) / n
    mean_y = sum(y for _, y in points) / n
    spread_x = sum((x - mean_x) ** 2 for x, _ in points)
    if n < 2 or spread_x == 0:
        return fit(points, at)
    slope = max(0.0, sum((x - mean_x) * (y - mean_y) for x, y in points) / spread_x)
    fixed = max(0.0, mean_y - slope * mean_x)
    return fixed + slope * at


def fit_spread(points: list[tuple[float, Spread]], at: float) -> Spread:
    """The median projected by `fit`; p25 and p75 around it as far (relatively) as at the
    largest size measured (quantile lines fitted apart could cross)."""
    median = fit([(x, s.median) for x, s in points], at)
    largest = max(points, key=lambda point: point[0])[1]
    if largest.median <= 0:
        return Spread(median, median, median)
    return largest.scaled(median / largest.median)


def percent(spread: Spread, interval: float) -> str:
    """`12.3% (11.9-12.8)`: median and p25-p75 as shares of `interval`, each to ~3 significant
    digits (a share of 0.2% printed to one decimal would move by half when it moves by 0.05)."""
    share = spread.scaled(100 / interval)
    return f"{_digits(share.median)}% ({_digits(share.low)}-{_digits(share.high)})"


def _digits(percent: float) -> str:
    decimals = 1 if percent >= 10 else 2 if percent >= 1 else 3
    return f"{percent:.{decimals}f}"


def last_evaluations(port: int, name: Callable[[str], str]) -> dict[str, float]:
    """{group: seconds its last real evaluation took} (the rule manager's evaluationTime)."""
    with urllib.request.urlopen(f"http://{HOST}:{port}/api/v1/rules", timeout=60) as answer:
        groups = json.load(answer)["data"]["groups"]
    return {name(g["name"]): float(g["evaluationTime"]) for g in groups}


def print_ranked(
    points: dict[tuple[str, str], list[tuple[int, Spread | None]]],
    at: int,
    intervals: dict[str, int],
    marked: set[str],
) -> None:
    """Every (group, rule) of `points` (measured sizes: GPUs, its seconds) projected to `at`
    GPUs and ranked, costliest first: median and p25-p75 seconds, and the median's share of
    its group's interval; rules in `marked` (the culprit rules) flagged."""
    rows = []
    for (group, rule), measured in points.items():
        none = Spread(0.0, 0.0, 0.0)
        cost = fit_spread([(gpus, s or none) for gpus, s in measured], at)
        rows.append((cost, group, rule))
    rows.sort(key=lambda row: -row[0].median)
    print(
        f"\nevery global rule at {at:,} GPUs, costliest first (CPU seconds per evaluation, "
        "median (p25-p75), projected; share of its group's interval; * a culprit rule):"
    )
    for rank, (cost, group, rule) in enumerate(rows, 1):
        print(
            f"{rank:>4} {cost.median:>7.3f} s ({cost.low:.3f}-{cost.high:.3f}) "
            f"{cost.median / intervals[group]:>6.2%} {group:<15} {rule}"
            f"{' *' if rule in marked else ''}"
        )
    sums: dict[str, float] = {}
    for cost, group, _ in rows:
        sums[group] = sums.get(group, 0.0) + cost.median
    print(
        "sums of the rules' medians: "
        + ", ".join(f"{group} {total:.2f} s" for group, total in sorted(sums.items()))
        + " (below the groups' figures: a group's round sums carry the garbage collection and "
        "other lumps that land on one of its rules in most rounds; one rule's median does not)"
    )
