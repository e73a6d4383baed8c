"""The artifact contract (generator/artifacts/): a new kind is one class registered in
pipeline.KINDS; the pipeline, `generate` and the writer need no change to produce it."""

from __future__ import annotations

import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from trainsignals.generator.artifacts import ArtifactKind, JobOutput, Registry, Run
from trainsignals.generator.loader import load_specs
from trainsignals.generator.output.files import GENERATED_MARK
from trainsignals.generator.output.workers import worker_count
from trainsignals.generator.pipeline import KINDS, Options, generate_all
from trainsignals.generator.writer import write_tree

from .conftest import JOBS

OPTIONS = Options(with_tests=False)  # the toy needs no promtool tests: a faster run


class AlertCount(ArtifactKind):
    """A toy kind: one file per job (its alerts) and one for all jobs (the counts), built
    from the jobs' typed results."""

    name = "toy-alert-count"

    def job_files(self, job: JobOutput, run: Run) -> dict[str, str]:
        names = "\n".join(f"- {alert.name}" for alert in job.alerts)
        return {f"docs/toy/{job.name}.md": f"<!-- {GENERATED_MARK} -->\n{names}\n"}

    def job_part(self, job: JobOutput, run: Run) -> tuple[str, int]:
        return job.name, len(job.alerts)  # plain data: it may come back from a worker

    def fleet_files(self, run: Run, parts: Sequence[Any]) -> dict[str, str]:
        rows = "".join(f"| {name} | {count} |\n" for name, count in parts)
        return {"docs/toy.md": f"<!-- {GENERATED_MARK} from {run.sources} -->\n{rows}"}


@pytest.fixture
def toy() -> Iterator[AlertCount]:
    kind = KINDS.register(AlertCount())
    try:
        yield kind
    finally:
        KINDS.unregister(kind.name)


def _specs() -> list:
    (spec,) = load_specs([JOBS / "minimal.yaml"])
    return [(spec, "jobs/minimal.yaml")]


def test_a_registered_kind_is_generated_and_its_files_go_when_it_goes(
    toy: AlertCount, tmp_path: Path
) -> None:
    specs = _specs()
    files = generate_all(specs, OPTIONS)
    rules = files["alerts/minimal.rules.yaml"]
    alerts = rules.count("- alert: ")
    assert files["docs/toy.md"].endswith(f"| minimal | {alerts} |\n")
    assert files["docs/toy/minimal.md"].count("\n- ") == alerts
    write_tree(tmp_path, files)
    assert (tmp_path / "docs/toy.md").exists()

    KINDS.unregister(toy.name)
    try:
        without = generate_all(specs, OPTIONS)
        assert without == {p: text for p, text in files.items() if "toy" not in p}
        removed = write_tree(tmp_path, without)  # the writer removes what no kind writes now
        assert {"docs/toy.md", "docs/toy/minimal.md"} <= set(removed)
        assert not (tmp_path / "docs/toy.md").exists()
    finally:
        KINDS.register(toy)  # for the fixture to take it out again


@pytest.mark.skipif(sys.platform != "linux", reason="workers fork: Linux only")
def test_each_jobs_part_comes_back_from_its_worker(toy: AlertCount) -> None:
    ((spec, _),) = _specs()
    specs = [(spec.model_copy(update={"name": f"toy-{i:02d}"}), f"{i}.yaml") for i in range(16)]
    assert worker_count(len(specs), 2) == 2
    files = generate_all(specs, Options(with_tests=False, workers=2), Registry([toy]))
    rows = files["docs/toy.md"].splitlines()[1:]
    assert [row.split(" | ")[0] for row in rows] == [f"| toy-{i:02d}" for i in range(16)]
    assert len(files) == 17


def test_a_registry_walks_only_its_own_kinds() -> None:
    files = generate_all(_specs(), OPTIONS, Registry([AlertCount()]))
    assert sorted(files) == ["docs/toy.md", "docs/toy/minimal.md"]


def test_one_path_one_kind(toy: AlertCount) -> None:
    class Clash(ArtifactKind):
        name = "toy-clash"

        def fleet_files(self, run: Run, parts: Sequence[Any]) -> dict[str, str]:
            return {"docs/toy.md": "mine\n"}

    with pytest.raises(ValueError, match=r"'toy-clash' writes docs/toy\.md"):
        generate_all(_specs(), OPTIONS, Registry([AlertCount(), Clash()]))
    with pytest.raises(ValueError, match="already registered"):
        KINDS.register(AlertCount())


def test_the_built_in_kinds() -> None:
    assert KINDS.names()[:4] == ["rules", "rule-tests", "dashboard", "sharded"]
    assert all(kind.of_job for kind in KINDS if kind.name in KINDS.names()[:4])
    assert len(set(KINDS.names())) == len(KINDS)
