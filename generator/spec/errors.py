"""Spec problems as one line each, naming file, field and the fix: the spec's and the
monitoring settings' validation errors (generator/loader.py, generator/spec/monitoring.py)."""

from __future__ import annotations

import difflib
import types
from pathlib import Path
from typing import Annotated, Any, Union, get_args, get_origin

from pydantic import BaseModel, ValidationError


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
    "less_than": "write a smaller value",
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


# A value that must match a pattern: what a matching value looks like, by field name.
_PATTERN_FIXES = {
    "file": "write an absolute path, e.g. /etc/alertmanager/secrets/<name>/<key>",
    "name": "write a Kubernetes name: lower-case letters, digits, '-' and '.'",
    "key": "write a Secret key: letters, digits, '-', '_' and '.'",
    "namespace": "write a Kubernetes namespace: lower-case letters, digits and '-'",
}


def _fix(error: dict) -> str | None:
    kind, got = error["type"], error.get("input")
    limit = (error.get("ctx") or {}).get("lt", (error.get("ctx") or {}).get("le"))
    if kind in ("less_than", "less_than_equal") and limit == 1 and isinstance(got, int | float):
        if 1 < got <= 100:  # 85 meant 85 %
            return f"write {got / 100:g} (a ratio, not a percentage)"
        return "write a ratio below 1"
    if kind == "string_pattern_mismatch":
        field = next((str(i) for i in reversed(error["loc"]) if isinstance(i, str)), "")
        return _PATTERN_FIXES.get(field, "write a value that matches the pattern")
    return _FIXES.get(kind)


def _describe(error: dict, model: type[BaseModel] | None = None) -> str:
    message = error["msg"].removeprefix("Value error, ")
    if error["type"] == "extra_forbidden":
        return _unknown_key(error, model)
    fix = _fix(error)
    got = error.get("input")
    shown = "" if error["type"] == "missing" or isinstance(got, dict) else f" (got {got!r})"
    return f"{message}{shown}" + (f"; {fix}" if fix and fix not in message else "")


def problem_lines(path: Path, exc: ValidationError, model: type[BaseModel]) -> list[str]:
    """One line per validation error: file, field path, what is wrong and the fix."""
    return [f"{path}: {_field_path(e['loc'])}: {_describe(e, model)}" for e in exc.errors()]
