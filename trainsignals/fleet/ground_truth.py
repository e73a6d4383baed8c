"""The replay's whole ground truth: Llama 3's interruptions and incidents (history.py) with
issue 28's culprits added (failslow.py): lemon nodes, the hang's stuck rank, fail-slows,
every node's non-fatal tickets."""

from __future__ import annotations

from .failslow import add_failslows, add_hang_culprit, add_lemons, add_tickets
from .history import FULL_DAYS, History, build_interruptions


def build_history(days: float = FULL_DAYS, seed: int = 405) -> History:
    history = build_interruptions(days, seed)
    add_lemons(history)
    add_hang_culprit(history)
    add_failslows(history)
    add_tickets(history)
    return history
