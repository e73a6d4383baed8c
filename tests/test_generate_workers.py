"""Generating in worker processes (generator/output/workers.py) writes what one process
writes, and a job that fails in a worker fails as it would without workers."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from trainsignals.generator import pipeline
from trainsignals.generator.loader import load_specs, spec_files
from trainsignals.generator.output.workers import SPECS_PER_WORKER, worker_count
from trainsignals.generator.pipeline import Options, generate, generate_all
from trainsignals.generator.spec.job import JobSpec

from .conftest import JOBS

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="workers fork: Linux only")


def fleet(copies: int) -> list:
    """Renamed copies of the example specs, each with its own spec file name."""
    specs = load_specs(spec_files(JOBS))
    return [
        (spec.model_copy(update={"name": f"{spec.name}-{i}"}), f"jobs/{spec.name}-{i}.yaml")
        for i in range(copies)
        for spec in specs
    ]


def test_workers_write_what_one_process_writes() -> None:
    specs = fleet(6)  # 18 specs: two workers
    assert worker_count(len(specs), 2) == 2
    serial = generate_all(specs, Options(workers=1))
    assert generate_all(specs, Options(workers=2)) == serial
    per_job = generate(specs, Options(workers=2))
    assert per_job == {path: serial[path] for path in per_job}
    assert len(per_job) == 4 * len(specs)  # rules, tests, long-horizon tests, dashboard of each


def test_a_job_that_fails_in_a_worker_raises_its_own_error(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    specs = fleet(6)
    real = pipeline.job_output

    def broken(spec: JobSpec, source: str, options: Options) -> pipeline.JobOutput:
        if spec.name == "minimal-4":
            (tmp_path / str(os.getpid())).touch()  # who failed
            raise ValueError(f"{source}: cannot generate (in process {os.getpid()})")
        return real(spec, source, options)

    monkeypatch.setattr(pipeline, "job_output", broken)  # forked workers inherit it
    with pytest.raises(ValueError, match=rf"jobs/minimal-4.yaml: .*process {os.getpid()}\)"):
        generate_all(specs, Options(workers=2))
    # It failed in a worker first, then again here, where its error is raised.
    assert {int(p.name) for p in tmp_path.iterdir()} - {os.getpid()}
    assert (tmp_path / str(os.getpid())).exists()


def test_worker_count() -> None:
    assert worker_count(3) == 1  # the example specs: no worker worth forking
    assert worker_count(SPECS_PER_WORKER * 64, 4) == 4
    assert worker_count(SPECS_PER_WORKER * 2, 64) == 2
    cores = len(os.sched_getaffinity(0))
    assert worker_count(SPECS_PER_WORKER * 1000) == cores
