"""Value types shared by the spec's sections: durations, severities, ratios, strict models."""

from __future__ import annotations

import re
from typing import Annotated, Literal

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    PlainSerializer,
    WithJsonSchema,
)

from trainsignals.generator.spec.durations import DURATION_PATTERN, format_duration, parse_duration

LABEL_NAME = re.compile(r"^[a-zA-Z_][a-zA-Z0-9_]*$")
JOB_NAME = re.compile(r"^[a-z0-9][a-z0-9-]{0,62}$")
# Characters that would break out of a PromQL string or a label matcher.
UNSAFE_LABEL_VALUE = re.compile(r'["\'{}\\\n`]')


def _to_seconds(value: object) -> object:
    if isinstance(value, str):
        return parse_duration(value)
    # A bare number was read as seconds; `stall_after: 10` almost always meant minutes.
    if isinstance(value, bool):
        raise ValueError("not a duration; write e.g. 90s, 10m, 6h or 1d")
    if isinstance(value, int | float):
        whole = int(value) if float(value).is_integer() else None
        fix = f"write `{whole}s` or `{whole}m`" if whole else "write e.g. 90s or 10m"
        raise ValueError(f"a bare number has no unit (seconds? minutes?); {fix}")
    return value


# Durations are written as "10m" in YAML and held as whole seconds. The schema says string:
# a unit is required (a bare number is refused above).
Duration = Annotated[
    int,
    BeforeValidator(_to_seconds),
    Field(gt=0),
    PlainSerializer(format_duration, return_type=str),
    WithJsonSchema({"type": "string", "pattern": DURATION_PATTERN, "examples": ["10m"]}),
]


def _yaml_off(value: object) -> object:
    # YAML 1.1 reads a bare `off` as false; that is what the user meant.
    return "off" if value is False else value


Severity = Annotated[Literal["page", "ticket", "off"], BeforeValidator(_yaml_off)]
PositiveFloat = Annotated[float, Field(gt=0)]
Ratio = Annotated[float, Field(gt=0, le=1)]


class StrictModel(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
