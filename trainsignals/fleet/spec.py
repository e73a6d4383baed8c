"""The spec the replay evaluates, and its generated rules and routing (the adapter).

The job is Llama 3 405B's shape cut to the stored slots: `slots` nodes x 8 H100 with the same
per-GPU work, so every threshold the generator derives from the shape (expected ranks, peak
FLOP/s, tokens/s floor) matches the series the replay writes. The spec's `recovery.mode` is
the replay's mode (`--mode`), nothing else tuned to this fleet. Besides the job's rule file the
replay evaluates the meta-monitoring alerts it can feed (those reading only series it writes:
scrape targets vanishing), since a job's own life (finished, dead) must not page through them.
"""

from __future__ import annotations

import re

import yaml

from trainsignals.generator.pipeline import Options, generate_all
from trainsignals.generator.spec.job import JobSpec

from .emit import KNOWN, TOKENS_PER_STEP
from .history import DATA_WAIT_RATIO
from .timeline import STEP_SECONDS

JOB = "llama3-405b-replay"
SOURCE = "trainsignals/fleet/spec.py (fleet replay)"
_SELECTED = re.compile(r"([a-zA-Z_:][a-zA-Z0-9_:]*)\s*\{")  # a metric name and its matchers
MODES = ("auto_restart", "manual")
NODES_RULES = "alerts/nodes.rules.yaml"  # recovery.mode; the defaults for everything else


def tokens_per_second(slots: int) -> float:
    per_rank_step = TOKENS_PER_STEP // 16
    return slots * 8 * per_rank_step * (1 - DATA_WAIT_RATIO) / STEP_SECONDS


def fleet_spec(slots: int, mode: str = "auto_restart") -> tuple[JobSpec, str]:
    """The spec and the recovery mode its rules were generated for."""
    if mode not in MODES:
        raise ValueError(f"fleet replay: --mode {mode!r}: use one of {', '.join(MODES)}")
    raw: dict = {
        "name": JOB,
        "team": "foundation-models",
        "owners": ["pretraining-lead@example.com"],
        "description": "Llama 3 405B-shaped pre-training, replayed from a fault history.",
        "shape": {
            "nodes": slots,
            "gpus_per_node": 8,
            "gpu_model": "H100-SXM",
            "dtype": "bf16",
            "model_flops_per_token": 2.43e12,  # 6 x 405e9
        },
        "objectives": {
            "mfu_min_ratio": 0.3,
            "tokens_per_second_min": round(0.7 * tokens_per_second(slots)),
            "checkpoint_max_age": "2h",
            "stall_after": "15m",
            "max_pause": "45m",
            "loss_plateau_window": "24h",
            "loss_plateau_min_improvement_ratio": 0.001,
        },
        "slos": [{"sli": "goodput", "objective": 0.8, "window": "30d"}],
        # The replay routes with its own model of Alertmanager (routing.py): nothing is sent.
        "routing": {"notify_nobody": ["page", "ticket"]},
        "recovery": {"mode": mode},
    }
    return JobSpec.model_validate(raw), mode


def generated_files(spec: JobSpec) -> tuple[str, str, str]:
    """(rule file, alertmanager.yaml, meta rule file) as `trainsignals generate` writes them."""
    files = generate_all([(spec, SOURCE)], Options(with_tests=False, with_dashboards=False))
    return (
        files[f"alerts/{spec.name}.rules.yaml"],
        files["alerts/alertmanager.yaml"],
        files["alerts/meta.rules.yaml"],
    )


def node_groups(spec: JobSpec) -> list[dict]:
    """The fleet's node incident record and its lemon ticket (alerts/nodes.rules.yaml, where
    the generator writes one): it reads the hardware alerts (ALERTS) of every job, here the
    replayed one's, across its nodes and spares."""
    files = generate_all([(spec, SOURCE)], Options(with_tests=False, with_dashboards=False))
    text = files.get(NODES_RULES)
    return yaml.safe_load(text)["groups"] if text else []


def fed_meta_groups(meta_text: str, job: str) -> list[dict]:
    """The meta rule file's groups cut to the alerts the replay feeds: each is about this job
    and reads only series the replay writes or the job's rule file records (scrape targets
    vanishing). The others read Prometheus' and Alertmanager's own metrics, or nothing (the
    always-firing dead man's switch)."""
    groups = []
    for group in yaml.safe_load(meta_text)["groups"]:
        rules = []
        for rule in group["rules"]:
            reads = {n for n in _SELECTED.findall(rule.get("expr", "")) if ":" not in n}
            if "alert" in rule and f'"{job}"' in rule["expr"] and reads and reads <= KNOWN:
                rules.append(rule)
        if rules:
            groups.append({**group, "rules": rules})
    return groups
