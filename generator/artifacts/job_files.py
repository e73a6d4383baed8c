"""A job's own files, written from its typed results: its rules, their promtool tests and
its dashboard (pipeline.job_output builds the documents)."""

from __future__ import annotations

from trainsignals.generator.artifacts.kind import ArtifactKind, JobOutput, Run
from trainsignals.generator.output.yaml import dump


class RulesKind(ArtifactKind):
    """alerts/<job>.rules.yaml: recording and alerting rules."""

    name = "rules"
    of_job = True

    def job_files(self, job: JobOutput, run: Run) -> dict[str, str]:
        return {f"alerts/{job.name}.rules.yaml": dump(job.rules, job.header)}


class RuleTestsKind(ArtifactKind):
    """alerts/<job>.test.yaml and <job>.long.test.yaml: the promtool tests of its rules."""

    name = "rule-tests"
    of_job = True

    def job_files(self, job: JobOutput, run: Run) -> dict[str, str]:
        files = {}
        if job.tests is not None:
            files[f"alerts/{job.name}.test.yaml"] = dump(job.tests, job.header)
        if job.long_tests is not None:
            files[f"alerts/{job.name}.long.test.yaml"] = dump(job.long_tests, job.header)
        return files


class DashboardKind(ArtifactKind):
    """dashboards/<job>.json."""

    name = "dashboard"
    of_job = True

    def job_files(self, job: JobOutput, run: Run) -> dict[str, str]:
        if job.dashboard_json is None:
            return {}
        return {f"dashboards/{job.name}.json": job.dashboard_json}
