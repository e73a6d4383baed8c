"""The spec the replay evaluates, and its generated rules and routing (the adapter).

The job is Llama 3 405B's shape cut to the stored slots: `slots` nodes x 8 H100 with the same
per-GPU work, so every threshold the generator derives from the shape (expected ranks, peak
FLOP/s, tokens/s floor) matches the series the replay writes. `RECOVERY` is what the replay
asks of the spec's `recovery:` section; it is applied only when the spec model has one, and
the report says which mode the rules were generated for.
"""

from __future__ import annotations

from trainsignals.generator.pipeline import Options, generate_all
from trainsignals.generator.spec.job import JobSpec

from .emit import TOKENS_PER_STEP
from .history import DATA_WAIT_RATIO
from .timeline import STEP_SECONDS

JOB = "llama3-405b-replay"
SOURCE = "trainsignals/fleet/spec.py (fleet replay)"
RECOVERY = {"mode": "auto_restart"}  # the defaults: nothing tuned to this fleet


def tokens_per_second(slots: int) -> float:
    per_rank_step = TOKENS_PER_STEP // 16
    return slots * 8 * per_rank_step * (1 - DATA_WAIT_RATIO) / STEP_SECONDS


def fleet_spec(slots: int) -> tuple[JobSpec, str]:
    """The spec and the recovery mode its rules were generated for."""
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
    }
    mode = "manual (the spec model has no recovery section yet)"
    if "recovery" in JobSpec.model_fields:
        raw["recovery"] = dict(RECOVERY)
        mode = RECOVERY["mode"]
    return JobSpec.model_validate(raw), mode


def generated_files(spec: JobSpec) -> tuple[str, str]:
    """(rule file, alertmanager.yaml) exactly as `trainsignals generate` writes them."""
    files = generate_all([(spec, SOURCE)], Options(with_tests=False, with_dashboards=False))
    return files[f"alerts/{spec.name}.rules.yaml"], files["alerts/alertmanager.yaml"]
