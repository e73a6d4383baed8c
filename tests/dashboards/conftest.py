"""The dashboard tests' fixtures: each spec of helpers.SPECS, and its built dashboard."""

from __future__ import annotations

import pytest

from tests.dashboards.helpers import SPECS, build_job_dashboard
from trainsignals.generator.alerts.rules import AlertRule
from trainsignals.generator.signals.promql import RuleContext
from trainsignals.generator.spec.job import JobSpec


@pytest.fixture(params=SPECS, ids=[s.name for s in SPECS])
def spec(request: pytest.FixtureRequest) -> JobSpec:
    return request.param


@pytest.fixture
def built(spec: JobSpec) -> tuple[dict, list[AlertRule], RuleContext]:
    return build_job_dashboard(spec)
