"""Read spec files and turn every problem into one line naming file, field and the fix."""

from __future__ import annotations

import difflib
import types
from collections.abc import Iterable
from pathlib import Path
from typing import Annotated, Any, Union, get_args, get_origin

import yaml
from pydantic import BaseModel, ValidationError
from trainsignals.generator.alerts.catalog import suggest_alert_name
from trainsignals.generator.routing.kubernetes import secret_reference_problems
from trainsignals.generator.spec.job import JobSpec
from trainsignals.generator.spec.secrets import secret_problems


class SpecError(Exception):
    """One or more problems in spec files; `problems` holds one line each."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__("\n".join(problems))
        self.problems = problems


def _field_path(location: tuple[int | str, ...]) -> str:
    parts: list[str] = []
    for item in location:
        if isinstance(item, int):
            parts.append(f"[{item}]")
        elif item in ("function-after", "function-before", "function-plain"):
            continue
        else:
            parts.append(("." if parts else "") + str(item))
    return "".join(parts) or "(top level)"


_FIXES = {
    "extra_forbidden": "remove it or fix its spelling (unknown keys are errors)",
    "missing": "add it",
    "int_parsing": "write a whole number",
    "int_type": "write a whole number",
    "float_parsing": "write a number",
    "float_type": "write a number",
    "string_type": "write a string",
    "greater_than": "write a positive value",
    "greater_than_equal": "write a larger value",
    "less_than_equal": "write a smaller value",
    "literal_error": "write one of the listed values",
    "dict_type": "write a mapping (key: value)",
    "model_type": "write a mapping (key: value)",
}


def _members(annotation: Any) -> list[Any]:
    """The types a value of `annotation` may hold: Annotated and unions unwrapped."""
    origin = get_origin(annotation)
    if origin is Annotated:
        return _members(get_args(annotation)[0])
    if origin in (Union, types.UnionType):
        return [m for arg in get_args(annotation) for m in _members(arg)]
    return [annotation]


def _step(annotation: Any, item: int | str) -> list[Any]:
    """The types found one level down `annotation`, at a field name or a list index."""
    found = []
    for member in _members(annotation):
        origin = get_origin(member)
        if isinstance(member, type) and issubclass(member, BaseModel):
            if isinstance(item, str) and item in member.model_fields:
                found.append(member.model_fields[item].annotation)
        elif origin in (tuple, list) and isinstance(item, int):
            found.append(get_args(member)[0])
        elif origin is dict and isinstance(item, str):
            found.append(get_args(member)[1])
    return found


def valid_keys(model: type[BaseModel], location: tuple[int | str, ...]) -> list[str]:
    """The keys the mapping at `location` (a field path under `model`) accepts."""
    annotations: list[Any] = [model]
    for item in location:
        annotations = [found for a in annotations for found in _step(a, item)]
    keys = {
        key
        for a in annotations
        for member in _members(a)
        if isinstance(member, type) and issubclass(member, BaseModel)
        for key in member.model_fields
    }
    return sorted(keys)


def _unknown_key(error: dict, model: type[BaseModel] | None) -> str:
    # A typo must name its fix: the closest valid key, or every valid key.
    key, parent = str(error["loc"][-1]), tuple(error["loc"][:-1])
    keys = valid_keys(model, parent) if model else []
    close = difflib.get_close_matches(key, keys, n=1)
    if close:
        return (
            f"unknown key {key!r}; did you mean `{close[0]}`? "
            "Fix the spelling (unknown keys are errors)"
        )
    if keys:
        return f"unknown key {key!r}; remove it or write one of: {', '.join(keys)}"
    return f"unknown key {key!r}; {_FIXES['extra_forbidden']}"


def _describe(error: dict, model: type[BaseModel] | None = None) -> str:
    message = error["msg"].removeprefix("Value error, ")
    if error["type"] == "extra_forbidden":
        return _unknown_key(error, model)
    fix = _FIXES.get(error["type"])
    got = error.get("input")
    shown = "" if error["type"] == "missing" or isinstance(got, dict) else f" (got {got!r})"
    return f"{message}{shown}" + (f"; {fix}" if fix and fix not in message else "")


def problem_lines(path: Path, exc: ValidationError, model: type[BaseModel]) -> list[str]:
    """One line per validation error: file, field path, what is wrong and the fix."""
    return [f"{path}: {_field_path(e['loc'])}: {_describe(e, model)}" for e in exc.errors()]


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
