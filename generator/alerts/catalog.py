"""The alerts trainsignals knows, by name: a view of generator/alerts/definitions/.

Defaults follow one rule: page only when a human must act now (progress or data is being
lost, or soon will be); everything that can wait for working hours is a ticket. A job whose
`recovery.mode` is `auto_restart` heals itself from most causes (a lost GPU, a dead node, a
crashed rank: the scheduler restarts it from its checkpoint on other hardware), so there the
causes are tickets for whoever repairs hardware (`owner="infra"`), and what pages is the
symptom that the self-healing loop failed (no progress, a crash loop, goodput burning).
"""

from __future__ import annotations

import difflib

from trainsignals.generator.alerts.definitions import DEFINITIONS
from trainsignals.generator.alerts.model import (
    MODES,
    AlertDef,
    Explains,
    seal,
)

__all__ = [
    "ALERTS",
    "BY_NAME",
    "MODES",
    "AlertDef",
    "cause_depth",
    "explained",
    "relations",
    "suggest_alert_name",
]

ALERTS: tuple[AlertDef, ...] = DEFINITIONS
BY_NAME: dict[str, AlertDef] = {a.name: a for a in ALERTS}
if len(BY_NAME) != len(ALERTS):
    raise ValueError("two alert definitions share a name")
seal(ALERTS)


def explained(explains: Explains, causes: tuple[str, ...] | list[str] = ()) -> tuple[str, ...]:
    """The alerts `explains` names, by name or role, in definition order; never a cause."""
    return tuple(
        a.name
        for a in ALERTS
        if a.name not in causes
        and (a.name in explains.alerts or set(a.roles) & set(explains.roles))
    )


def relations(name: str) -> tuple[list[tuple[str, Explains]], list[tuple[str, Explains]]]:
    """(what `name` explains, what explains `name`): (other alert, declaration) pairs."""
    explains = [(t, e) for e in BY_NAME[name].explains for t in explained(e, (name,))]
    explained_by = [
        (cause.name, e)
        for cause in ALERTS
        for e in cause.explains
        if name in explained(e, (cause.name,))
    ]
    return explains, explained_by


def cause_depth() -> dict[str, int]:
    """{alert: length of the longest chain of declared causes above it} (0: nothing explains
    it, a root cause). Raises ValueError on a cycle: alerts that explain each other would
    mute each other while both fire, and nothing would page."""
    parents = {a.name: [cause for cause, _ in relations(a.name)[1]] for a in ALERTS}
    depth: dict[str, int] = {}

    def visit(name: str, path: tuple[str, ...]) -> int:
        if name in path:
            cycle = " -> ".join((*path[path.index(name) :], name))
            raise ValueError(f"alerts explain each other ({cycle}): both would be muted")
        if name not in depth:
            depth[name] = max((visit(p, (*path, name)) + 1 for p in parents[name]), default=0)
        return depth[name]

    for alert in ALERTS:
        visit(alert.name, ())
    return depth


def _check_declarations() -> None:
    """Every name an `explains=` types is a defined alert: a typo is an import error here,
    not an inhibit rule that silently matches nothing."""
    for alert in ALERTS:
        for explains in alert.explains:
            for name in explains.alerts:
                if name not in BY_NAME:
                    raise ValueError(
                        f"{alert.name}: explains unknown alert {name!r} "
                        f"(generator/alerts/definitions/); {suggest_alert_name(name)}"
                    )
                if name == alert.name:
                    raise ValueError(f"{alert.name}: explains itself")
    cause_depth()


def suggest_alert_name(name: str) -> str | None:
    """None when `name` is a known alert, else the problem and the closest known names."""
    if name in BY_NAME:
        return None
    close = difflib.get_close_matches(name, BY_NAME, n=2)
    hint = f"did you mean {' or '.join(close)}?" if close else "see `trainsignals explain`"
    return f"unknown alert {name!r}; {hint}"


_check_declarations()
