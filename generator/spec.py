"""The job spec: one reviewed YAML file per training job, validated strictly.

A minimal spec names the job, its team and its shape; every objective and every alert's
severity has a default. Unknown keys are errors, so a typo can never silently disable an alert.
"""

from __future__ import annotations

import re
from typing import Annotated, Literal

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    PlainSerializer,
    field_validator,
    model_validator,
)

from trainsignals.gpu_models import DTYPES, PEAK_DENSE_FLOPS

from .deploy import Deploy
from .durations import format_duration, parse_duration
from .receivers import Routing

LABEL_NAME = re.compile(r"^[a-zA-Z_][a-zA-Z0-9_]*$")
JOB_NAME = re.compile(r"^[a-z0-9][a-z0-9-]{0,62}$")
# Characters that would break out of a PromQL string or a label matcher.
UNSAFE_LABEL_VALUE = re.compile(r'["\'{}\\\n`]')


def _to_seconds(value: object) -> object:
    if isinstance(value, str):
        return parse_duration(value)
    return value


# Durations are written as "10m" in YAML and held as whole seconds.
Duration = Annotated[
    int,
    BeforeValidator(_to_seconds),
    Field(gt=0),
    PlainSerializer(format_duration, return_type=str),
]


def _yaml_off(value: object) -> object:
    # YAML 1.1 reads a bare `off` as false; that is what the user meant.
    return "off" if value is False else value


Severity = Annotated[Literal["page", "ticket", "off"], BeforeValidator(_yaml_off)]
PositiveFloat = Annotated[float, Field(gt=0)]
Ratio = Annotated[float, Field(gt=0, le=1)]


class StrictModel(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Shape(StrictModel):
    """What the job runs on, and how much work a token costs (for MFU)."""

    nodes: Annotated[int, Field(ge=1)] = 1
    gpus_per_node: Annotated[int, Field(ge=1, le=16)] = 8
    gpu_model: str
    dtype: Literal["bf16", "fp16", "fp8", "tf32"] = "bf16"
    # Model FLOPs per token, e.g. 6 x parameters for a dense transformer (plus attention).
    model_flops_per_token: PositiveFloat | None = None
    # Alternative for jobs that are not token based: model FLOPs of one optimizer step.
    model_flops_per_step: PositiveFloat | None = None

    @field_validator("gpu_model")
    @classmethod
    def _known_gpu(cls, value: str) -> str:
        if value not in PEAK_DENSE_FLOPS:
            known = ", ".join(sorted(PEAK_DENSE_FLOPS))
            raise ValueError(f"unknown GPU model {value!r}; write one of: {known}")
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


class Objectives(StrictModel):
    """What healthy means for this job. Each field feeds one alert and its dashboard panel."""

    # Saturation / efficiency: MFU floor over a long window (ticket: the slow leak).
    mfu_min_ratio: Ratio = 0.30
    mfu_window: Duration = 6 * 3600
    # Traffic: tokens/s floor (page). Default: half the tokens/s that mfu_min_ratio implies.
    tokens_per_second_min: PositiveFloat | None = None
    # Latency: p95 step time bound; no alert when unset (the step size is the job's choice).
    step_time_max_seconds: PositiveFloat | None = None
    # Errors.
    nonfinite_losses_max: Annotated[int, Field(ge=0)] = 0
    dropped_batches_max_ratio: Ratio = 0.01
    dropped_batches_window: Duration = 6 * 3600
    # Loss-curve sanity.
    # Divergence: the loss (10m average) above loss_spike_factor x its best (lowest) 10m average
    # of the last loss_divergence_window. A baseline of the trailing hour would climb with a
    # slow divergence and never let it fire.
    loss_spike_factor: Annotated[float, Field(gt=1)] = 2.0
    loss_divergence_window: Duration = 6 * 3600
    loss_plateau_window: Duration = 6 * 3600
    loss_plateau_min_improvement_ratio: Ratio = 0.01
    # Progress.
    stall_after: Duration = 10 * 60
    max_pause: Duration = 30 * 60
    checkpoint_max_age: Duration = 2 * 3600
    data_wait_max_ratio: Ratio = 0.25
    # Infrastructure.
    disk_free_min_ratio: Ratio = 0.10
    disk_full_horizon: Duration = 24 * 3600
    gpu_temperature_max_celsius: Annotated[float, Field(gt=0, le=120)] = 87.0
    gpu_memory_max_ratio: Ratio = 0.98
    throttle_max_ratio: Ratio = 0.25
    # XID codes that need a human now (GPU off the bus, uncontained ECC, NVLink, GSP...);
    # other XIDs (mostly application faults such as 13, 31, 43) open a ticket.
    xid_page_codes: tuple[Annotated[int, Field(ge=1)], ...] = (48, 62, 64, 74, 79, 95, 119, 120)

    @model_validator(mode="after")
    def _pause_longer_than_stall(self) -> Objectives:
        if self.max_pause < self.stall_after:
            raise ValueError(
                "max_pause must be at least stall_after (a pause is a stall the job announced)"
            )
        return self


class ScrapeJobs(StrictModel):
    """Prometheus `job` label of each kind of target."""

    training: str = "trainsignals-training"
    gpu: str = "trainsignals-gpu"


class Links(StrictModel):
    runbook_base_url: str = "https://github.com/example/trainsignals/blob/main/runbooks"
    grafana_base_url: str = "http://localhost:3000"


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

    mode: Literal["manual", "auto_restart"] = "manual"
    # How long an automatic restart may take, crash to first step, before a human is needed.
    restart_budget: Duration = 15 * 60
    # Crash loop: restarts that make no progress, needing no tuning: 3 restarts or more
    # within restart_window while the global step's high-water mark did not advance in it.
    # restart_window is also how long the last progress is remembered through an outage.
    restart_window: Duration = 3600
    # Optional cap: more than max_restarts within restart_window pages even with progress.
    max_restarts: Annotated[int | None, Field(ge=1)] = None
    # Who repairs hardware: GPU, node and fabric tickets go to this team (default: the job's).
    infra_team: str | None = None
    infra_routing: Routing = Routing()

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

    goodput: share of wall time in steps that move the job forward (generator/goodput.py:
    start-up, checkpoints, eval, data wait, redone steps and recovery are bad time; the job's
    very first start-up is not counted). throughput: share of training time with
    throughput at or above the floor.
    """

    sli: Literal["goodput", "throughput"]
    objective: Annotated[float, Field(gt=0.5, lt=1)]
    window: Duration = 30 * 86400  # the error budget's period

    @property
    def budget(self) -> float:
        return 1 - self.objective


class JobSpec(StrictModel):
    name: str
    team: str
    owners: tuple[str, ...] = ()
    rotation: str | None = None
    description: str = ""
    selector: dict[str, str] = Field(default_factory=dict)
    scrape_jobs: ScrapeJobs = ScrapeJobs()
    gpu_metrics: Literal["trainsignals", "dcgm"] = "trainsignals"
    shape: Shape
    objectives: Objectives = Objectives()
    # Severity per alert name: page, ticket or off. Unlisted alerts keep their defaults.
    alerts: dict[str, Severity] = Field(default_factory=dict)
    checkpoint_path: str = ""
    links: Links = Links()
    routing: Routing = Routing()
    recovery: Recovery = Recovery()
    slos: tuple[Slo, ...] = ()
    deploy: Deploy = Deploy()  # scrape config, Slurm and Kubernetes (generator/deploy.py)

    @field_validator("slos")
    @classmethod
    def _one_slo_per_sli(cls, value: tuple[Slo, ...]) -> tuple[Slo, ...]:
        slis = [slo.sli for slo in value]
        if len(slis) != len(set(slis)):
            raise ValueError("one SLO per sli (goodput, throughput); merge the duplicates")
        return value

    @field_validator("name")
    @classmethod
    def _job_name(cls, value: str) -> str:
        if not JOB_NAME.match(value):
            raise ValueError(
                f"{value!r} is not a job name; use lower-case letters, digits and '-' "
                "(it becomes file names, a dashboard uid and a label value)"
            )
        return value

    @field_validator("team", "rotation")
    @classmethod
    def _safe_label(cls, value: str | None) -> str | None:
        if value is not None and UNSAFE_LABEL_VALUE.search(value):
            raise ValueError(f"{value!r} has quotes, braces or backslashes; remove them")
        return value

    @field_validator("selector")
    @classmethod
    def _selector_labels(cls, value: dict[str, str]) -> dict[str, str]:
        for label, label_value in value.items():
            if not LABEL_NAME.match(label):
                raise ValueError(f"{label!r} is not a Prometheus label name; use [a-zA-Z_0-9]")
            if UNSAFE_LABEL_VALUE.search(label_value):
                raise ValueError(
                    f"value of {label!r} ({label_value!r}) has quotes, braces or backslashes; "
                    "write the plain label value"
                )
        return value

    @field_validator("alerts")
    @classmethod
    def _known_alerts(cls, value: dict[str, str]) -> dict[str, str]:
        # Imported here: the alert catalogue imports this module.
        from .alert_catalog import suggest_alert_name

        for alert in value:
            problem = suggest_alert_name(alert)
            if problem:
                raise ValueError(problem)
        return value

    @model_validator(mode="after")
    def _infra_routing_needs_team(self) -> JobSpec:
        r = self.recovery
        if (r.infra_routing.page or r.infra_routing.ticket) and r.infra_team in (None, self.team):
            raise ValueError(
                "recovery.infra_routing needs recovery.infra_team set to a team other than the "
                "job's (routing is per team); or put the receivers in `routing`"
            )
        return self

    @property
    def infra_team(self) -> str:
        """The team that repairs hardware: recovery.infra_team, else the job's own team."""
        return self.recovery.infra_team or self.team

    @property
    def selector_labels(self) -> dict[str, str]:
        """The labels every series of this job carries (default: training_job=<name>)."""
        return dict(sorted((self.selector or {"training_job": self.name}).items()))

    @property
    def tokens_per_second_floor(self) -> float | None:
        """The page threshold on tokens/s, explicit or derived from the MFU floor."""
        if self.objectives.tokens_per_second_min is not None:
            return self.objectives.tokens_per_second_min
        if self.shape.model_flops_per_token is None:
            return None
        at_mfu_floor = self.objectives.mfu_min_ratio * self.shape.peak_flops
        return 0.5 * at_mfu_floor / self.shape.model_flops_per_token

    @property
    def steps_per_second_floor(self) -> float | None:
        """The page threshold on steps/s for specs that give FLOPs per step, not per token."""
        if self.tokens_per_second_floor is not None or self.shape.model_flops_per_step is None:
            return None
        at_mfu_floor = self.objectives.mfu_min_ratio * self.shape.peak_flops
        return 0.5 * at_mfu_floor / self.shape.model_flops_per_step
