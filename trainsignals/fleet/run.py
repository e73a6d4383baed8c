"""One replay end to end: history -> series -> blocks -> Prometheus -> alerts -> notifications."""

from __future__ import annotations

import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from trainsignals.generator.signals.hang_suspects import SUSPECT

from .emit import Emitter, referenced_metrics, unsupported
from .evaluate import AlertEpisode, evaluate_rules
from .ground_truth import build_history
from .history import MINUTE, History
from .prom import Prometheus
from .routing import Alertmanager, Notification
from .spec import fed_meta_groups, fleet_spec, generated_files, node_groups
from .timeline import Truth, simulate

EPOCH = 1_767_571_200  # 2026-01-05T00:00:00Z, the replay's first second

# Whole-run ETTR from the generated goodput recordings, first expression that answers wins.
# `{job}` is the training_job label and `{wall}` the run length in seconds.
# ETTR over the whole run: the hourly goodput recordings (generator/signals/goodput.py) averaged.
GOODPUT_QUERIES = (
    'avg_over_time(job:trainsignals_goodput:ratio_1h{{training_job="{job}"}}[{wall}s])',
)


@dataclass
class Replay:
    history: History
    truth: Truth
    mode: str
    slots: int
    samples: int = 0
    series_missing: list[str] = field(default_factory=list)
    tiers: int = 0
    episodes: list[AlertEpisode] = field(default_factory=list)
    notifications: list[Notification] = field(default_factory=list)
    ettr_measured: float | None = None
    ettr_query: str = ""
    seconds: dict[str, float] = field(default_factory=dict)
    # The hang suspects the pages' annotation names: (run second, labels) per evaluation.
    suspects: list[tuple[int, dict[str, str]]] = field(default_factory=list)


def ticket_episodes(history: History, job: str) -> list[AlertEpisode]:
    """Every node's non-fatal tickets (failslow.add_tickets) as the ALERTS Prometheus would keep
    for them: the node record reads nothing else of them."""
    episodes = []
    for ticket in history.tickets:
        labels = {"alertname": ticket.alert, "node": ticket.node, "severity": "ticket"}
        labels["training_job"] = job
        if ticket.gpu is not None:
            labels["gpu"] = str(ticket.gpu)
        firing = [(EPOCH + ticket.start_s + MINUTE, EPOCH + ticket.end_s + MINUTE)]
        episodes.append(AlertEpisode(ticket.alert, labels, firing))
    return episodes


def run_replay(
    days: float,
    seed: int = 405,
    slots: int = 2,
    work: Path | None = None,
    shards: int = 1,
    mode: str = "auto_restart",
) -> Replay:
    clock = time.monotonic()
    history = build_history(days, seed)
    minutes, truth = simulate(history, slots)
    spec, mode = fleet_spec(slots, mode)
    rules_text, am_text, meta_text = generated_files(spec)
    document = yaml.safe_load(rules_text)
    if shards > 1:  # through the sharded rule split: edge groups, then the global ones
        from trainsignals.generator.deploy.sharding import single_store_rules

        document = single_store_rules(spec, document, shards)
    meta = fed_meta_groups(meta_text, spec.name)
    document["groups"] += meta + node_groups(spec)  # the lemon ticket reads ALERTS only
    wanted = referenced_metrics(rules_text + yaml.safe_dump({"groups": meta}))
    replay = Replay(history, truth, mode, slots, series_missing=unsupported(wanted))
    replay.seconds["model"] = time.monotonic() - clock

    with tempfile.TemporaryDirectory(prefix="fleet-", dir=work) as tmp:
        root = Path(tmp)
        data = root / "data"
        data.mkdir()
        start, end = EPOCH + MINUTE, EPOCH + len(minutes) * MINUTE
        with Prometheus(data) as prom:
            emitter = Emitter(
                minutes,
                spec.selector_labels,
                (spec.scrape_jobs.training, spec.scrape_jobs.gpu),
                wanted,
                EPOCH,
            )
            clock = time.monotonic()
            replay.samples = emitter.write_blocks(root / "om", root / "raw-blocks")
            prom.restart_with(root / "raw-blocks")
            replay.seconds["series"] = time.monotonic() - clock
            clock = time.monotonic()
            replay.tiers, replay.episodes = evaluate_rules(
                prom, document, start, end, root, ticket_episodes(history, spec.name)
            )
            replay.seconds["rules"] = time.monotonic() - clock
            # Over the job's life: up to its completion, when it completed.
            life_end = EPOCH + history.completed_s if history.completed_s else end
            for template in GOODPUT_QUERIES:
                expr = template.format(job=spec.name, wall=life_end - start + MINUTE)
                result = prom.range_query(expr, life_end, life_end)
                if result:
                    replay.ettr_measured = float(result[0]["values"][-1][1])
                    replay.ettr_query = expr
                    break
            replay.suspects = [
                (round(float(ts)) - EPOCH, series["metric"])
                for series in prom.range_query(SUSPECT, start, end)
                for ts, _ in series["values"]
            ]
    replay.notifications = Alertmanager(am_text).replay(replay.episodes, start, end)
    return replay
