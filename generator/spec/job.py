"""The job spec: one reviewed YAML file per training job, validated strictly.

A minimal spec names the job, its team and its shape; every objective and every alert's
severity has a default. Unknown keys are errors, so a typo can never silently disable an alert.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator, model_validator

from trainsignals.generator.spec.deploy import Deploy
from trainsignals.generator.spec.receivers import Routing

# The sections and value types live in their own modules; importers keep using this one.
from trainsignals.generator.spec.sections import (
    CRASH_LOOP_RESTARTS,
    Cadence,
    Links,
    Objectives,
    Recovery,
    ScrapeJobs,
    Shape,
    Slo,
)
from trainsignals.generator.spec.types import (
    JOB_NAME,
    LABEL_NAME,
    UNSAFE_LABEL_VALUE,
    Duration,
    PositiveFloat,
    Ratio,
    Severity,
    StrictModel,
)

__all__ = [
    "CRASH_LOOP_RESTARTS",
    "Cadence",
    "Duration",
    "JobSpec",
    "Links",
    "Objectives",
    "PositiveFloat",
    "Ratio",
    "Recovery",
    "ScrapeJobs",
    "Severity",
    "Shape",
    "Slo",
    "StrictModel",
]


class JobSpec(StrictModel):
    """One training job: identity, shape, objectives, alerts, routing and deployment."""

    name: str = Field(
        description="Job name: file names, the dashboard uid and the training_job label; "
        "lower-case letters, digits and '-'."
    )
    team: str = Field(description="Team that owns the job; its alerts route by this label.")
    owners: tuple[str, ...] = Field((), description="People to reach, shown in runbooks.")
    rotation: str | None = Field(
        None, description="On-call rotation that takes the pages (on-call load per rotation)."
    )
    description: str = Field("", description="What the job is, for readers of the spec.")
    selector: dict[str, str] = Field(
        default_factory=dict,
        description="Labels every series of the job carries (default: training_job=<name>).",
    )
    scrape_jobs: ScrapeJobs = Field(
        ScrapeJobs(), description="Prometheus `job` label of each kind of target."
    )
    gpu_metrics: Literal["trainsignals", "dcgm"] = Field(
        "trainsignals",
        description="Which exporter the GPU series come from: trainsignals' own or dcgm-exporter.",
    )
    shape: Shape = Field(description="What the job runs on and the FLOPs of its work (for MFU).")
    objectives: Objectives = Field(
        Objectives(), description="What healthy means: the thresholds of the alerts."
    )
    cadence: Cadence = Field(
        Cadence(),
        description="How a healthy run saves and evaluates: the generated tests' healthy job "
        "follows it; goodput objectives and checkpoint_max_age are checked against it.",
    )
    alerts: dict[str, Severity] = Field(
        default_factory=dict,
        description="Severity per alert name: page, ticket or off. Unlisted alerts keep "
        "their defaults (runbooks/ lists them).",
    )
    checkpoint_path: str = Field(
        "", description="Where checkpoints are written, shown in the runbooks."
    )
    links: Links = Field(Links(), description="Runbook and Grafana base URLs alerts link to.")
    routing: Routing = Field(
        Routing(), description="The team's receivers per severity (credentials by reference)."
    )
    recovery: Recovery = Field(
        Recovery(), description="How the job heals itself, which decides what pages."
    )
    slos: tuple[Slo, ...] = Field(
        (), description="Service level objectives, alerted by multi-window burn rates."
    )
    deploy: Deploy = Field(
        Deploy(), description="Where Prometheus finds the targets: ports, file_sd, Kubernetes."
    )

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
        """The labels every series of this job carries (default: training_job=<name>). A new
        dict on each call (callers extend it); the default without a sort (~20,000 calls a spec
        with tests)."""
        if not self.selector:
            return {"training_job": self.name}
        return dict(sorted(self.selector.items()))

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
