"""The culprit signals of issue 28 in the sharded bench: which rules and series they are, and
the history their range reads need to do real work.

The culprit rules: the straggler score (generator/signals/straggler.py), the GPUs and ports
against their peers (peers.py), the hang suspects (hang_suspects.py), their alerts
(TrainingStraggler, GpuFailSlow, NodeLinkDegraded), and the per-node partials the sharded
split pushes down to the shards only for them (found by splitting the rule file with and
without them: what only they need).

A rule reading a window of recorded series reads what earlier evaluations recorded: a freshly
started Prometheus has minutes of it, production has hours (the straggler's baseline reads 6h of
each rank's ratio). `record_history` writes that history, at the recording group's production
interval, for every per-rank, per-GPU and per-node series a rule reads over a window, with the
label sets the rules themselves recorded, so those reads cost what they cost in production.
"""

from __future__ import annotations

import json
import re
import subprocess
import time
import urllib.parse
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import yaml
from rule_timing import Spread, fit, fit_spread, line_fit, percent

from trainsignals.fleet.emit import import_openmetrics, referenced_metrics
from trainsignals.generator.alerts.definitions.failslow import GPU_FAIL_SLOW, NODE_LINK_DEGRADED
from trainsignals.generator.alerts.definitions.straggler import TRAINING_STRAGGLER
from trainsignals.generator.deploy.sharding import split_document
from trainsignals.generator.signals.hang_suspects import DATA_WAIT_OPEN, SUSPECT
from trainsignals.generator.signals.peers import peer_recordings
from trainsignals.generator.signals.promql import RuleContext
from trainsignals.generator.signals.straggler import OWN_WORK, straggler_recordings
from trainsignals.generator.spec.durations import parse_duration
from trainsignals.stacks import reaper
from trainsignals.stacks.stack import HOST

CULPRIT_ALERTS = frozenset({TRAINING_STRAGGLER, GPU_FAIL_SLOW, NODE_LINK_DEGRADED})
PER_UNIT_LEVELS = ("rank", "gpu", "node", "mig")  # recorded levels whose series scale with GPUs
MAX_HISTORY_S = 6 * 3600  # the longest window a per-unit rule reads (the straggler baseline)
_RANGE_READ = re.compile(r"([A-Za-z_]+:[A-Za-z0-9_]+:[A-Za-z0-9_]+)(?:\{[^}]*\})?\[(\w+)\]")


@dataclass
class Culprit:
    """What the culprit signals add to the split rule files."""

    records: frozenset[str]  # names the culprit rules record (edge and global)
    edge_records: frozenset[str]  # of them, recorded on the shards (partials included)
    raw: frozenset[str]  # raw metrics added for them (read by them only, or exported for them)

    def owns(self, rule: dict) -> bool:
        return rule.get("record") in self.records or rule.get("alert") in CULPRIT_ALERTS


def culprit_names(ctx: RuleContext) -> set[str]:
    return set(straggler_recordings(ctx)) | set(peer_recordings(ctx)) | {SUSPECT}


def _records(doc: dict) -> set[str]:
    return {r["record"] for g in doc["groups"] for r in g["rules"] if "record" in r}


def culprit(ctx: RuleContext, doc: dict) -> Culprit:
    """The culprit rules of the job's rule file `doc` (unsplit), and what the split adds for
    them: the edge records and raw metrics that exist only because of them."""
    names = culprit_names(ctx)
    without = {
        "groups": [
            {
                **g,
                "rules": [
                    r
                    for r in g["rules"]
                    if r.get("record") not in names and r.get("alert") not in CULPRIT_ALERTS
                ],
            }
            for g in doc["groups"]
        ]
    }
    edge_all, global_all = split_document(ctx, doc)
    edge_without, _ = split_document(ctx, without)
    edge_added = _records(edge_all) - _records(edge_without)
    # The per-rank inputs the instrumentation exports for them count even where a generic
    # rule (an input's presence check) reads them too.
    raw_added = (
        referenced_metrics(yaml.safe_dump(doc)) - referenced_metrics(yaml.safe_dump(without))
    ) | {OWN_WORK, DATA_WAIT_OPEN}
    present = _records(edge_all) | _records(global_all)
    return Culprit(
        frozenset((names & present) | edge_added), frozenset(edge_added), frozenset(raw_added)
    )


def culprit_groups(groups: list[dict], owner: Culprit, keep: bool = True) -> list[dict]:
    """The groups with only their culprit rules, or (`keep` false) only their other rules;
    groups left without rules left out."""
    kept = [{**g, "rules": [r for r in g["rules"] if owner.owns(r) == keep]} for g in groups]
    return [g for g in kept if g["rules"]]


def range_reads(groups: list[dict], intervals: dict[str, int]) -> dict[str, tuple[int, int]]:
    """{per-unit recorded series a rule reads over a window: (longest window, production
    interval of the group recording it)}, seconds; windows capped at MAX_HISTORY_S."""
    recorded_in = {
        r["record"]: intervals[g["name"]] for g in groups for r in g["rules"] if "record" in r
    }
    reads: dict[str, tuple[int, int]] = {}
    for group in groups:
        for rule in group["rules"]:
            for match in _RANGE_READ.finditer(rule["expr"]):
                name, window = match.group(1), parse_duration(match.group(2))
                if name.split(":")[0] not in PER_UNIT_LEVELS or name not in recorded_in:
                    continue
                longest = max(reads.get(name, (0, 0))[0], min(window, MAX_HISTORY_S))
                reads[name] = (longest, recorded_in[name])
    return reads


def instant(port: int, expr: str, at: float | None = None) -> list[dict]:
    args = {"query": expr} | ({} if at is None else {"time": f"{at:.3f}"})
    url = f"http://{HOST}:{port}/api/v1/query?{urllib.parse.urlencode(args)}"
    with urllib.request.urlopen(url, timeout=120) as answer:
        return json.load(answer)["data"]["result"]


def count(port: int, expr: str, at: float | None = None) -> int:
    result = instant(port, f"count({expr})", at)
    return int(float(result[0]["value"][1])) if result else 0


def _labels(metric: dict[str, str]) -> str:
    def quoted(value: str) -> str:
        return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")

    return ",".join(f'{k}="{quoted(v)}"' for k, v in sorted(metric.items()) if k != "__name__")


def write_history(
    port: int, job: str, reads: dict[str, tuple[int, int]], end: float, path: Path
) -> int:
    """Write each series of `reads` (label sets and values as the rules recorded them on the
    running Prometheus at `port`) from `end` - window to before `end`, at its interval, as
    OpenMetrics to `path`; returns the samples written. Import it (`import_openmetrics`) once
    that Prometheus is stopped: the history ends before its first evaluation, so it overlaps
    nothing the Prometheus holds."""
    samples = 0
    with path.open("w") as out:
        for name, (window, interval) in sorted(reads.items()):
            stamps = range(int(end) - window, int(end) - 1, interval)
            for one in instant(port, f'{name}{{training_job="{job}"}}'):
                labels, value = _labels(one["metric"]), one["value"][1]
                out.writelines(f"{name}{{{labels}}} {value} {t}\n" for t in stamps)
                samples += len(stamps)
        out.write("# EOF\n")
    return samples


def record_history(
    start: Callable[[], subprocess.Popen],
    port: int,
    data: Path,
    groups: list[dict],
    production: dict[str, int],
    job: str,
) -> int:
    """A first run of Prometheus (`start`, on `port` and the data folder `data`): the rules
    record their per-rank, per-GPU and per-node series; their history is then written into
    `data`, before that run's first evaluation. Returns the samples written; start Prometheus
    again to measure."""
    started = time.time()
    process = start()
    try:
        # A group that reads another's output may run first, and the chain is four groups
        # long: the shard's edge group (own-work rate), the fast group (ratio), the baseline
        # group (the sampled ratio and the baseline), the fast group again (the cost). With
        # two evaluations each, the cost and the sampled ratio had no history (neither did
        # what reads their windows: the baseline, TrainingStraggler).
        wait_evaluated(port, len(groups), 4)
        reads = range_reads(groups, production)
        history = write_history(port, job, reads, started, data.parent / "history.om")
    finally:
        reaper.stop([process], timeout=30)
    import_openmetrics([data.parent / "history.om"], data)
    return history


def wait_evaluated(port: int, groups: int, times: int, timeout: float = 300) -> dict[str, float]:
    """Wait until each of the `groups` rule groups ran `times` times since Prometheus started;
    returns {group (as Prometheus names it): its last evaluation's timestamp}."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            with urllib.request.urlopen(f"http://{HOST}:{port}/metrics", timeout=10) as answer:
                text = answer.read().decode()
        except OSError:
            text = ""
        runs = _per_group(text, "prometheus_rule_group_iterations_total")
        if len(runs) >= groups and min(runs.values()) >= times:
            return _per_group(text, "prometheus_rule_group_last_evaluation_timestamp_seconds")
        if time.monotonic() > deadline:
            raise RuntimeError(f"rule groups not evaluated {times} times: {runs}")
        time.sleep(1)


def _per_group(text: str, metric: str) -> dict[str, float]:
    return {
        m.group(1): float(m.group(2))
        for m in re.finditer(rf'{metric}\{{rule_group="([^"]+)"\}} (\S+)', text)
    }


class Measured(Protocol):
    gpus: int
    seconds: dict[str, Spread]
    culprit_seconds: dict[str, Spread]
    culprit_series: dict[str, int]
    culprit_rules: dict[str, dict[str, float]]
    history: int


def report(
    shards: list[Measured],
    owner: Culprit,
    intervals: dict[str, int],
    edge_groups: list[str],
    shard_count: int,
    gpus: int,
    goal: float,
) -> None:
    """Per group (edge groups at `shard_count` shards, global groups at `gpus`): its share of
    its interval (median, p25-p75) and its culprit rules' part; the culprit series per GPU;
    the costliest culprit rules."""
    per_shard = gpus / shard_count
    print(
        f"\nculprit signals (issue 28) at {gpus:,} GPUs, {shard_count} shards "
        f"({per_shard:,.0f} GPUs each): CPU per evaluation / interval, projected, median "
        f"(p25-p75); goal: every group < {goal:.0%}"
    )
    print(
        f"{'group':<16}{'runs on':>9}{'interval':>9}{'group':>23}{'culprit':>9}"
        f"{'line fit':>10}{'culprit':>9}  rules  goal"
    )
    worst = worst_line = 0.0
    last = shards[-1]
    none = Spread(0.0, 0.0, 0.0)
    for group in sorted(last.seconds, key=lambda g: (g not in edge_groups, g)):
        at = per_shard if group in edge_groups else gpus
        cost = fit_spread([(s.gpus, s.seconds[group]) for s in shards], at)
        # The culprit part never read above the group's (noise falls on both).
        culprit_points = [(s.gpus, s.culprit_seconds.get(group, none).median) for s in shards]
        mine = min(fit(culprit_points, at), cost.median)
        line = line_fit([(s.gpus, s.seconds[group].median) for s in shards], at)
        mine_line = min(line_fit(culprit_points, at), line)
        share = cost.median / intervals[group]
        rules = len(last.culprit_rules.get(group, {}))
        worst = max(worst, share)
        worst_line = max(worst_line, line / intervals[group])
        print(
            f"{group:<16}{'shard' if group in edge_groups else 'global':>9}"
            f"{intervals[group]:>8}s{percent(cost, intervals[group]):>23}"
            f"{mine / intervals[group]:>9.1%}{line / intervals[group]:>10.1%}"
            f"{mine_line / intervals[group]:>9.1%}  {rules:>5}"
            f"  {'met' if share < goal else 'NOT met'}"
        )
    print(
        f"culprit goal (every group < {goal:.0%} of its interval, culprit rules included): "
        f"{'met' if worst < goal else 'NOT met'} (worst {worst:.1%}, proportional: an upper "
        f"bound); fixed + per-GPU line: {'met' if worst_line < goal else 'NOT met'} "
        f"(worst {worst_line:.1%})"
    )
    _costliest(shards, edge_groups, per_shard, gpus)
    _series(last, owner, gpus)


def _costliest(shards: list[Measured], edge_groups: list[str], per_shard: float, gpus: int) -> None:
    """The culprit rules' own costs (median CPU per evaluation, projected)."""
    projected = []
    for group, rules in shards[-1].culprit_rules.items():
        at = per_shard if group in edge_groups else gpus
        for name in rules:
            points = [(s.gpus, s.culprit_rules.get(group, {}).get(name, 0.0)) for s in shards]
            projected.append((fit(points, at), group, name))
    top = sorted(projected, reverse=True)[:5]
    print(
        "costliest culprit rules (CPU per evaluation, median, projected): "
        + ", ".join(f"{name} ({group}) {seconds:.2f} s" for seconds, group, name in top)
    )


def _series(shard: Measured, owner: Culprit, gpus: int) -> None:
    """Series the culprit signals add, per GPU (per-rank series: one rank per GPU)."""
    per_gpu = {name: n / shard.gpus for name, n in shard.culprit_series.items()}
    kinds = (
        ("raw (scraped on the shards)", owner.raw),
        ("recorded on the shards (remote-written)", owner.edge_records),
        ("recorded by the global ruler", owner.records - owner.edge_records),
    )
    print(
        f"series the culprit signals add, per GPU (measured on {shard.gpus:,} GPUs; "
        f"{shard.history:,} samples of recorded history backfilled for the windows they read):"
    )
    for title, names in kinds:
        # Job-level series (one per job, or per job and rail) are not per GPU.
        mine = {n: per_gpu.get(n, 0.0) for n in sorted(names) if not n.startswith("job:")}
        jobs = sorted(n for n in names if n.startswith("job:"))
        total = sum(mine.values())
        print(
            f"  {title}: {total:.2f} per GPU = {total * gpus:,.0f} at {gpus:,} GPUs"
            + (f", plus {len(jobs)} job-level" if jobs else "")
            + "; "
            + ", ".join(f"{_short(n)} {v:.3g}" for n, v in mine.items())
        )
    print(
        "  (0: series that exist only in an incident or with an optional input: the hang "
        "suspects while a job is stopped, NCCL Inspector's bus bandwidth)"
    )


def _short(name: str) -> str:
    return name.replace("trainsignals_", "")
