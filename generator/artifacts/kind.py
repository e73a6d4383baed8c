"""One interface for every kind of generated file, over typed results.

The pipeline (generator/pipeline.py) builds each job's results once (`JobOutput`: its alerts,
rules document, promtool tests, dashboard) and hands them to every registered kind. A kind
returns {relative path: text}, its header already in the text, and never reads another kind's
text: what it needs from another builder it gets typed, from `JobOutput` or from that
builder's public functions.

A kind has up to two steps:
- `job_files(job, run)`: the files of one job. It runs in the job's worker process
  (generator/output/workers.py), where the job's results are at hand.
- `fleet_files(run, parts)`: the files all jobs share, once per generation, in the parent
  process, after every job. `parts` holds what `job_part` returned for each job, in the order
  of the specs: plain data (strings, dataclasses), since it comes back from a worker pickled
  (the job's alerts hold functions and cannot).
A per-job kind writes only `job_files`, a fleet-wide kind only `fleet_files`; the runbooks
use both (one row per job and alert, one file per alert).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any, ClassVar

from trainsignals.generator.alerts.model import AlertRule
from trainsignals.generator.output.files import Options, dashboard_text
from trainsignals.generator.signals.promql import RuleContext
from trainsignals.generator.spec.job import JobSpec
from trainsignals.generator.spec.monitoring import MonitoringSettings


@dataclass(frozen=True)
class Run:
    """What every kind of one generation shares: the specs, the options, the settings."""

    specs: Sequence[tuple[JobSpec, str]]  # (spec, its source path), in the order given
    options: Options
    settings: MonitoringSettings  # options.monitoring, or the built-in defaults

    @property
    def job_specs(self) -> list[JobSpec]:
        return [spec for spec, _ in self.specs]

    @property
    def sources(self) -> str:
        """The spec files, for the header of a file all jobs share."""
        return ", ".join(source for _, source in self.specs)


@dataclass(frozen=True)
class JobOutput:
    """One job's typed results: what every kind builds its files of the job from."""

    spec: JobSpec
    source: str  # the spec's file, for headers
    digest: str  # output.files.spec_hash(spec)
    header: str  # output.files.header: the comment the job's YAML files start with
    ctx: RuleContext
    alerts: list[AlertRule]
    rules: dict  # the rules document: alerts/<job>.rules.yaml, wrapped as is on Kubernetes
    tests: dict | None  # promtool tests (None: Options.with_tests off, or a time scale)
    long_tests: dict | None  # the long-horizon promtool tests (likewise)
    dashboard: dict | None  # the Grafana dashboard (None: Options.with_dashboards off)

    @property
    def name(self) -> str:
        return self.spec.name

    @cached_property
    def dashboard_json(self) -> str | None:
        """The dashboard as dashboards/<job>.json holds it (the Kubernetes ConfigMap carries
        the same text): serialised once."""
        return None if self.dashboard is None else dashboard_text(self.dashboard)


class ArtifactKind:
    """A kind of generated file. Subclass it, give it a unique `name`, override the steps it
    has, and register an instance (pipeline.KINDS.register)."""

    name: ClassVar[str]
    # Its per-job files are part of the job's own files (pipeline.generate_job, generate):
    # what the job's Prometheus evaluates and tests, and its dashboard.
    of_job: ClassVar[bool] = False

    def job_files(self, job: JobOutput, run: Run) -> dict[str, str]:
        """This kind's files of one job (in the job's worker process)."""
        return {}

    def job_part(self, job: JobOutput, run: Run) -> Any:
        """Plain data of one job that `fleet_files` needs (in the job's worker process)."""
        return None

    def fleet_files(self, run: Run, parts: Sequence[Any]) -> dict[str, str]:
        """This kind's files that all jobs share; `parts`: job_part of each job."""
        return {}

    def __repr__(self) -> str:
        return f"<artifact kind {self.name!r}>"
