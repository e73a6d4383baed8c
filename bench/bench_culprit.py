"""The culprit signals of issue 28 in the sharded bench: which rules and series they are, and
the history their range reads need to do real work.

The culprit rules: the straggler score (generator/signals/straggler.py), the GPUs and ports
against their peers (peers.py), the hang suspects (hang_suspects.py), their alerts
(TrainingStraggler, GpuFailSlow, NodeLinkDegraded), and the per-node partials the sharded
split pushes down to the shards only for them (found by splitting the rule file with and
without them: what only they need).

A rule reading a window of recorded series reads what earlier evaluations recorded: a freshly
started Prometheus has minutes of it, production has hours (the straggler's baseline reads 6h of
each rank's ratio). `backfill` writes that history, at the recording group's production
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

import yaml
from trainsignals.generator.alerts.definitions.failslow import GPU_FAIL_SLOW, NODE_LINK_DEGRADED
from trainsignals.generator.alerts.definitions.straggler import TRAINING_STRAGGLER
from trainsignals.generator.deploy.sharding import split_document
from trainsignals.generator.signals.hang_suspects import DATA_WAIT_OPEN, SUSPECT
from trainsignals.generator.signals.peers import peer_recordings
from trainsignals.generator.signals.promql import RuleContext
from trainsignals.generator.signals.straggler import OWN_WORK, straggler_recordings
from trainsignals.generator.spec.durations import parse_duration

from trainsignals.fleet.emit import import_openmetrics, referenced_metrics
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
        # Twice: a group that reads another's output may run first.
        wait_evaluated(port, len(groups), 2)
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
