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
from trainsignals.generator.alerts.model import MODES, AlertDef
from trainsignals.generator.signals.recording import NODE_HARDWARE_FAULTS

__all__ = ["ALERTS", "BY_NAME", "MODES", "NODE_HARDWARE_FAULTS", "AlertDef", "suggest_alert_name"]

ALERTS: tuple[AlertDef, ...] = DEFINITIONS
BY_NAME: dict[str, AlertDef] = {a.name: a for a in ALERTS}
if len(BY_NAME) != len(ALERTS):
    raise ValueError("two alert definitions share a name")


def suggest_alert_name(name: str) -> str | None:
    """None when `name` is a known alert, else the problem and the closest known names."""
    if name in BY_NAME:
        return None
    close = difflib.get_close_matches(name, BY_NAME, n=2)
    hint = f"did you mean {' or '.join(close)}?" if close else "see `trainsignals explain`"
    return f"unknown alert {name!r}; {hint}"
