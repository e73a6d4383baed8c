"""Evaluate a generated rule file on Prometheus over backfilled blocks, as its rule manager would.

Recording rules: `promtool tsdb create-blocks-from rules`, one dependency tier at a time (the
backfiller cannot read what it is writing), restarting Prometheus on the new blocks between
tiers. Alerting rules: a range query of each expression at the evaluation step, then `for` and
`keep_firing_for` applied exactly as Prometheus' alerting rule does (pending from the first
evaluation that returns the series, firing once `ts - active_at >= for`, resolved at the first
evaluation without it unless keep_firing_for holds it).
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import yaml

from trainsignals.generator.durations import parse_duration

from .prom import STEP_S, Prometheus


@dataclass
class AlertEpisode:
    alertname: str
    labels: dict[str, str]
    firing: list[tuple[int, int]]  # [from, to) of each firing stretch, unix seconds


def _uses(expr: str, name: str) -> bool:
    return re.search(rf"(?<![\w:]){re.escape(name)}(?![\w:])", expr) is not None


def recording_tiers(rules: list[dict]) -> list[list[dict]]:
    """Recording rules in dependency order: a tier reads only raw series and earlier tiers."""
    recorded = {r["record"] for r in rules}
    tier_of: dict[str, int] = {}
    pending = list(rules)
    tiers: list[list[dict]] = []
    while pending:
        ready = [
            r for r in pending
            if all(n in tier_of for n in recorded if n != r["record"] and _uses(r["expr"], n))
        ]
        if not ready:
            raise ValueError("recording rules depend on each other in a cycle")
        tiers.append(ready)
        pending = [r for r in pending if r not in ready]
        for rule in ready:  # names recorded by several rules (one per slo) finish together
            if all(other["record"] != rule["record"] for other in pending):
                tier_of[rule["record"]] = len(tiers)
    return tiers


GROUP = "fleet-replay"


def _backfill(prom: Prometheus, rules: list[dict], start: float, end: float, work: Path) -> Path:
    """One promtool rule backfill. Every call uses the same group name and file path, so
    every tier is evaluated at the same offset within the minute (Prometheus staggers groups
    by a hash of name and file)."""
    rule_file = work / "backfill.rules.yaml"
    group = {"name": GROUP, "interval": f"{STEP_S}s", "rules": rules}
    rule_file.write_text(yaml.safe_dump({"groups": [group]}, sort_keys=False))
    out = work / "backfill-blocks"
    shutil.rmtree(out, ignore_errors=True)
    done = subprocess.run(
        [
            "promtool", "tsdb", "create-blocks-from", "rules", "-q",
            f"--url={prom.url}", f"--start={int(start)}", f"--end={int(end)}",
            f"--output-dir={out}", f"--eval-interval={STEP_S}s", str(rule_file),
        ],
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        raise RuntimeError(f"promtool rule backfill failed: {done.stderr.strip()}")
    return out


def evaluation_offset(prom: Prometheus, epoch: int, work: Path) -> float:
    """Seconds after each whole minute at which promtool evaluates the replay's group."""
    out = _backfill(prom, [{"record": "fleet:calibration", "expr": "vector(1)"}],
                    epoch, epoch + 600, work)
    first = min(
        json.loads((block / "meta.json").read_text())["minTime"] for block in out.iterdir()
    )
    shutil.rmtree(out)
    return round((first / 1000 - epoch) % STEP_S, 3)


def backfill_recordings(
    prom: Prometheus, document: dict, start: float, end: float, work: Path
) -> int:
    recording = [r for g in document["groups"] for r in g["rules"] if "record" in r]
    tiers = recording_tiers(recording)
    for tier in tiers:
        prom.restart_with(_backfill(prom, tier, start, end, work))
    return len(tiers)


def evaluate_alerts(
    prom: Prometheus, document: dict, start: int, end: int, offset: float = 0.0
) -> list[AlertEpisode]:
    """Alert episodes on the whole-minute grid start..end; queries run `offset` s later."""
    episodes: list[AlertEpisode] = []
    for group in document["groups"]:
        for rule in group["rules"]:
            if "alert" not in rule:
                continue
            hold = parse_duration(rule["for"]) if rule.get("for") else 0
            keep = parse_duration(rule["keep_firing_for"]) if rule.get("keep_firing_for") else 0
            for series in prom.range_query(rule["expr"], start + offset, end + offset):
                labels = {k: v for k, v in series["metric"].items() if k != "__name__"}
                labels |= {k: str(v) for k, v in (rule.get("labels") or {}).items()}
                labels["alertname"] = rule["alert"]
                times = [round(float(ts) - offset) for ts, _ in series["values"]]
                firing = apply_for(times, hold, keep)
                if firing:
                    episodes.append(AlertEpisode(rule["alert"], labels, firing))
    return episodes


def apply_for(times: list[int], hold: int, keep: int, step: int = STEP_S) -> list[tuple[int, int]]:
    """Firing stretches of one alert series present at `times` (sorted evaluation instants)."""
    firing: list[tuple[int, int]] = []
    active_at: int | None = None
    fired_at: int | None = None
    last_seen: int | None = None
    present = set(times)
    if not times:
        return firing
    ts = times[0]
    while ts <= times[-1] + keep + step:
        if ts in present:
            if active_at is None:
                active_at = ts
            last_seen = ts
            if fired_at is None and ts - active_at >= hold:
                fired_at = ts
        elif active_at is not None:
            held = fired_at is not None and keep and last_seen is not None and ts - last_seen < keep
            if not held:
                if fired_at is not None:
                    firing.append((fired_at, ts))
                active_at = fired_at = last_seen = None
        ts += step
    if fired_at is not None:
        firing.append((fired_at, ts))
    return firing
