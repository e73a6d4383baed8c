"""Read spec files and turn every problem into one line naming file, field and the fix."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import yaml
from pydantic import ValidationError

from trainsignals.generator.alerts.catalog import suggest_alert_name
from trainsignals.generator.routing.kubernetes import secret_reference_problems
from trainsignals.generator.signals.feasibility import feasibility_problems
from trainsignals.generator.spec.errors import SpecError, problem_lines
from trainsignals.generator.spec.job import JobSpec
from trainsignals.generator.spec.secrets import secret_problems

__all__ = ["SpecError", "load_specs", "parse_spec", "problem_lines", "spec_files"]


def parse_spec(path: Path, text: str) -> JobSpec:
    """Validate one spec's text; SpecError lists every problem with file and field."""
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f":{mark.line + 1}" if mark else ""
        raise SpecError([f"{path}{where}: not valid YAML ({exc}); fix the syntax"]) from None
    if not isinstance(data, dict):
        raise SpecError([f"{path}: (top level): a spec is a mapping; start with `name: <job>`"])
    leaked = secret_problems(data)  # before validation: never echo a secret back in errors
    if leaked:
        raise SpecError([f"{path}: {line}" for line in leaked])
    try:
        spec = JobSpec.model_validate(data)
    except ValidationError as exc:
        raise SpecError(problem_lines(path, exc, JobSpec)) from None
    # The alert names are checked here, not in the spec model: the catalogue is built on the
    # spec (generator/alerts/ imports generator/spec/, never the other way).
    unknown = [problem for name in spec.alerts if (problem := suggest_alert_name(name))]
    if unknown:
        raise SpecError([f"{path}: alerts: {problem}" for problem in unknown])
    unreferenced = secret_reference_problems(spec)  # deploy.kubernetes needs Secret names
    if unreferenced:
        raise SpecError([f"{path}: {line}" for line in unreferenced])
    # Objectives the spec's own healthy job would miss (its generated tests would fail too).
    infeasible = feasibility_problems(spec)
    if infeasible:
        raise SpecError([f"{path}: {line}" for line in infeasible])
    return spec


def load_specs(paths: Iterable[Path]) -> list[JobSpec]:
    """Load and validate specs; all problems of all files are reported together."""
    specs: list[JobSpec] = []
    problems: list[str] = []
    seen: dict[str, Path] = {}
    for path in sorted(paths):
        try:
            spec = parse_spec(path, path.read_text(encoding="utf-8"))
        except SpecError as exc:
            problems.extend(exc.problems)
            continue
        except OSError as exc:
            problems.append(f"{path}: cannot read ({exc.strerror}); check the path")
            continue
        if spec.name in seen:
            problems.append(
                f"{path}: name: job name {spec.name!r} is already used by {seen[spec.name]}; "
                "give each job a unique name"
            )
            continue
        seen[spec.name] = path
        specs.append(spec)
    if problems:
        raise SpecError(problems)
    return specs


def spec_files(directory: Path) -> list[Path]:
    return sorted([*directory.glob("*.yaml"), *directory.glob("*.yml")])
