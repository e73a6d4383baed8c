"""The simulator tests' spec: the minimal example job."""

from __future__ import annotations

import pytest

from tests.simulator.helpers import ROOT
from trainsignals.generator.loader import load_specs
from trainsignals.generator.spec.job import JobSpec


@pytest.fixture(scope="module")
def spec() -> JobSpec:
    return load_specs([ROOT / "jobs" / "minimal.yaml"])[0]
