"""The spec's sections below the top level: shape, objectives, recovery, SLOs, scrape jobs, links.

Every field carries a `description`: the JSON Schema editors read and docs/spec.md are generated
from them (generator/docs/spec_reference.py).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field, field_validator, model_validator

from trainsignals.generator.spec.receivers import Routing
from trainsignals.generator.spec.types import (
    UNSAFE_LABEL_VALUE,
    Duration,
    PositiveFloat,
    Ratio,
    StrictModel,
)
from trainsignals.metrics.gpu_models import DTYPES, PEAK_DENSE_FLOPS, model_of_board_name


class Shape(StrictModel):
    """What the job runs on, and how much work a token costs (for MFU)."""

    nodes: Annotated[int, Field(ge=1)] = Field(1, description="Nodes the job runs on.")
    gpus_per_node: Annotated[int, Field(ge=1, le=16)] = Field(
        8, description="GPUs per node, each one rank."
    )
    gpu_model: str = Field(description="GPU model, for its peak FLOP/s (MFU), e.g. H100-SXM.")
    dtype: Literal["bf16", "fp16", "fp8", "tf32"] = Field(
        "bf16", description="Training precision: picks the peak FLOP/s that MFU divides by."
    )
    model_flops_per_token: PositiveFloat | None = Field(
        None,
        description="Model FLOPs per token, e.g. 6 x parameters for a dense transformer "
        "(plus attention). Set this or model_flops_per_step.",
    )
    model_flops_per_step: PositiveFloat | None = Field(
        None,
        description="Model FLOPs of one optimizer step, for jobs that are not token based. "
        "Set this or model_flops_per_token.",
    )

    @field_validator("gpu_model")
    @classmethod
    def _known_gpu(cls, value: str) -> str:
        if value not in PEAK_DENSE_FLOPS:
            known = ", ".join(sorted(PEAK_DENSE_FLOPS))
            model = model_of_board_name(value)
            fix = "write one of: "
            if model:  # a board's name as nvidia-smi prints it
                fix = f"write {model} (that board's model here); models: "
            raise ValueError(f"unknown GPU model {value!r}; {fix}{known}")
        return value

    @model_validator(mode="after")
    def _flops_and_dtype(self) -> Shape:
        if (self.model_flops_per_token is None) == (self.model_flops_per_step is None):
            raise ValueError(
                "set exactly one of model_flops_per_token or model_flops_per_step "
                "(e.g. model_flops_per_token: 4.2e10 for 7B parameters, 6 x N)"
            )
        if self.dtype not in PEAK_DENSE_FLOPS[self.gpu_model]:
            have = ", ".join(d for d in DTYPES if d in PEAK_DENSE_FLOPS[self.gpu_model])
            raise ValueError(f"{self.gpu_model} has no {self.dtype} figure; write one of: {have}")
        return self

    @property
    def gpus(self) -> int:
        return self.nodes * self.gpus_per_node

    @property
    def peak_flops(self) -> float:
        """Peak dense FLOP/s of the whole job."""
        return self.gpus * PEAK_DENSE_FLOPS[self.gpu_model][self.dtype]


def _d(default: object, description: str) -> Any:
    # Field() with a default and a description: most objectives are exactly that.
    return Field(default, description=description)


class Objectives(StrictModel):
    """What healthy means for this job. Each field feeds one alert and its dashboard panel."""

    mfu_min_ratio: Ratio = _d(
        0.30, "MFU floor over mfu_window (a ticket: the slow efficiency leak)."
    )
    mfu_window: Duration = _d(6 * 3600, "Window the MFU floor is judged over.")
    tokens_per_second_min: PositiveFloat | None = _d(
        None,
        "Throughput floor that pages. Default: half the tokens/s that mfu_min_ratio implies.",
    )
    step_time_max_seconds: PositiveFloat | None = _d(
        None, "p95 step time bound; no alert when unset (the step size is the job's choice)."
    )
    nonfinite_losses_max: Annotated[int, Field(ge=0)] = _d(
        0, "NaN or Inf losses tolerated before the loss alert fires."
    )
    dropped_batches_max_ratio: Ratio = _d(
        0.01, "Share of batches that may be skipped over dropped_batches_window."
    )
    dropped_batches_window: Duration = _d(6 * 3600, "Window for dropped_batches_max_ratio.")
    # The baseline is the best average of a long window: a trailing hour would climb with a
    # slow divergence and never let the alert fire.
    loss_spike_factor: Annotated[float, Field(gt=1)] = _d(
        2.0,
        "Divergence: the loss (10m average) above this factor times its best 10m average "
        "of the last loss_divergence_window.",
    )
    loss_divergence_window: Duration = _d(
        6 * 3600, "How far back the best (lowest) loss is taken from, for loss_spike_factor."
    )
    loss_plateau_window: Duration = _d(
        6 * 3600, "Plateau: the loss must improve by loss_plateau_min_improvement_ratio in this."
    )
    loss_plateau_min_improvement_ratio: Ratio = _d(
        0.01, "Relative loss improvement expected per loss_plateau_window."
    )
    stall_after: Duration = _d(10 * 60, "No training step for this long is a stall.")
    max_pause: Duration = _d(
        30 * 60,
        "Longest announced pause (eval, checkpoint) before it counts as a stall; "
        "at least stall_after.",
    )
    checkpoint_max_age: Duration = _d(
        150 * 60,
        "Newest successful checkpoint older: alert. One ordinary restart must not reach it: at "
        "least 2 x cadence.checkpoint_interval + recovery.restart_budget + "
        "cadence.checkpoint_save_time (a crash just before a save restores a checkpoint one "
        "interval old, and the next save comes an interval of steps after the restart).",
    )
    data_wait_max_ratio: Ratio = _d(0.25, "Share of step time spent waiting for data.")
    disk_free_min_ratio: Ratio = _d(0.10, "Free-space floor of the checkpoint disk.")
    disk_full_horizon: Duration = _d(
        24 * 3600, "Alert when the checkpoint disk's trend fills it within this."
    )
    gpu_temperature_max_celsius: Annotated[float, Field(gt=0, le=120)] = _d(
        87.0, "GPU temperature bound."
    )
    gpu_memory_max_ratio: Ratio = _d(0.98, "Share of GPU memory in use before it alerts.")
    throttle_max_ratio: Ratio = _d(0.25, "Share of time a GPU may be clock-throttled.")
    straggler_cost_min_ratio: Ratio = _d(
        0.05,
        "Share of the job's throughput one slow rank may cost (its own work "
        "above the median rank's, and above its own usual excess) before it tickets.",
    )
    xid_page_codes: tuple[Annotated[int, Field(ge=1)], ...] = _d(
        (48, 62, 64, 74, 79, 95, 119, 120),
        "XID codes that need a human now (GPU off the bus, uncontained ECC, NVLink, GSP); "
        "other XIDs (mostly application faults such as 13, 31, 43) open a ticket.",
    )

    @model_validator(mode="after")
    def _pause_longer_than_stall(self) -> Objectives:
        if self.max_pause < self.stall_after:
            raise ValueError(
                "max_pause must be at least stall_after (a pause is a stall the job announced)"
            )
        return self


class Cadence(StrictModel):
    """How a healthy run of the job spends its time between steps: its saves and evals.

    The generated tests' healthy job follows it, and goodput objectives and checkpoint_max_age
    are checked against it (README: expected goodput): a spec whose own healthy job
    would page is refused.
    """

    checkpoint_interval: Duration = _d(3600, "How often the job saves a checkpoint.")
    checkpoint_save_time: Duration = _d(
        180, "How long one save pauses training (phase `checkpoint`)."
    )
    eval_interval: Duration | None = _d(
        5 * 3600,
        "How often the job pauses for an eval (the first halfway through); null: never.",
    )
    eval_time: Duration = _d(600, "How long one eval pauses training (phase `eval`).")

    @model_validator(mode="after")
    def _pauses_fit(self) -> Cadence:
        if self.checkpoint_save_time >= self.checkpoint_interval:
            raise ValueError(
                "checkpoint_save_time must be shorter than checkpoint_interval (the job would "
                "never train), e.g. checkpoint_save_time: 3m with checkpoint_interval: 1h"
            )
        if self.eval_interval is not None and self.eval_time >= self.eval_interval:
            raise ValueError(
                "eval_time must be shorter than eval_interval (the job would never train), "
                "e.g. eval_time: 10m with eval_interval: 6h"
            )
        return self


class ScrapeJobs(StrictModel):
    """Prometheus `job` label of each kind of target."""

    training: str = _d("trainsignals-training", "`job` label of the training ranks' targets.")
    gpu: str = _d("trainsignals-gpu", "`job` label of the GPU exporters' targets.")


class Links(StrictModel):
    """Where alerts and dashboards link to."""

    runbook_base_url: str = _d(
        "https://github.com/example/trainsignals/blob/main/runbooks",
        "Base URL of the runbooks; each alert links <base>/<Alert>.md.",
    )
    grafana_base_url: str = _d(
        "http://localhost:3000", "Grafana the alerts link their dashboard on."
    )


# A crash loop: this many restarts within restart_window without durable progress (two
# incarnations in a row that died before passing the high-water mark of the global step).
CRASH_LOOP_RESTARTS = 3


class Recovery(StrictModel):
    """How the job heals itself, which decides what pages.

    manual (default): nothing restarts the job but a human, so causes that stop it (a lost GPU,
    a dead node, a crashed rank) page. auto_restart: torchrun or the scheduler restarts the job
    from its last checkpoint and drains bad nodes, so a human is paged only when that loop
    fails (no progress for longer than restart_budget, a crash loop, bad loss, stale
    checkpoints, goodput burning); causes become tickets to infra_team.
    """

    mode: Literal["manual", "auto_restart"] = _d(
        "manual",
        "manual: causes that stop the job page its team. auto_restart: the job restarts "
        "itself; only failed recovery pages, causes are tickets to infra_team.",
    )
    restart_budget: Duration = _d(
        15 * 60, "How long an automatic restart may take, crash to first step, before it pages."
    )
    # The crash loop needs no tuning: 3 restarts without the step's high-water mark advancing.
    restart_window: Duration = _d(
        3600,
        "Crash loops (3 restarts without progress) are judged over this window. The last "
        "progress is remembered for as long as an outage lasts, whatever this is.",
    )
    max_restarts: Annotated[int | None, Field(ge=1)] = _d(
        None, "Optional cap: more restarts within restart_window page, even with progress."
    )
    infra_team: str | None = _d(
        None, "Team that repairs hardware: GPU, node and fabric tickets (default: the job's team)."
    )
    infra_routing: Routing = _d(
        Routing(), "Receivers of infra_team's pages and tickets (routing is per team)."
    )

    @field_validator("infra_team")
    @classmethod
    def _safe_team(cls, value: str | None) -> str | None:
        if value is not None and UNSAFE_LABEL_VALUE.search(value):
            raise ValueError(f"{value!r} has quotes, braces or backslashes; remove them")
        return value

    @model_validator(mode="after")
    def _budget_fits_window(self) -> Recovery:
        if self.restart_window < self.restart_budget:
            raise ValueError(
                "restart_window must be at least restart_budget (count restarts over a window "
                "longer than one restart may take), e.g. restart_window: 6h"
            )
        return self

    @property
    def automatic(self) -> bool:
        return self.mode == "auto_restart"


class Slo(StrictModel):
    """A service level objective on the job, alerted by multi-window burn rates.

    goodput: share of wall time in steps that move the job forward (start-up, checkpoints,
    eval, data wait, redone steps and recovery are bad time; the job's very first start-up is
    not counted). throughput: share of training time with
    throughput at or above the floor.
    """

    sli: Literal["goodput", "throughput"] = Field(
        description="goodput: share of wall time in productive steps; throughput: share of "
        "training time at or above the throughput floor."
    )
    objective: Annotated[float, Field(gt=0.5, lt=1)] = Field(
        description="Target share of good time, e.g. 0.8; the error budget is 1 - objective."
    )
    window: Duration = _d(30 * 86400, "The error budget's period.")

    @property
    def budget(self) -> float:
        return 1 - self.objective
