"""One line of the readiness checklist (checks.py and its delivery checks, delivery.py)."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class Check:
    name: str
    ok: bool = True
    detail: str = ""
    problems: list[tuple[str, str]] = field(default_factory=list)  # (problem, fix)
    notes: list[str] = field(default_factory=list)

    def fail(self, problem: str, fix: str) -> None:
        self.ok = False
        self.problems.append((problem, fix))
