"""Read spec files and turn every problem into one line naming file, field and the fix."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import yaml
from pydantic import ValidationError

from .kubernetes_alertmanager import secret_reference_problems
from .secrets import secret_problems
from .spec import JobSpec


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


def _describe(error: dict) -> str:
    message = error["msg"].removeprefix("Value error, ")
    if error["type"] == "extra_forbidden":
        return f"unknown key; {_FIXES['extra_forbidden']}"
    fix = _FIXES.get(error["type"])
    got = error.get("input")
    shown = "" if error["type"] == "missing" or isinstance(got, dict) else f" (got {got!r})"
    return f"{message}{shown}" + (f"; {fix}" if fix and fix not in message else "")


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
        raise SpecError(
            [f"{path}: {_field_path(e['loc'])}: {_describe(e)}" for e in exc.errors()]
        ) from None
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
