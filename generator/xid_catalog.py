"""XID code -> NVIDIA's immediate action, as an `action` label on the recorded XID series.

Source: NVIDIA, "Analyzing Xid Errors with the Xid Catalog", column "Resolution Bucket (Immediate
Action)", https://docs.nvidia.com/deploy/xid-errors/analyzing-xid-catalog.html (Ampere and newer).
Only rows read from that catalog are listed; a code not listed gets no `action` label, and the
runbook says to look it up there (no guessed actions).
"""

from __future__ import annotations

# code -> (mnemonic, immediate action)
XID_ACTIONS: dict[int, tuple[str, str]] = {
    1: ("ROBUST_CHANNEL_FIFO_ERROR_FIFO_METHOD", "CONTACT_SUPPORT"),
    2: ("ROBUST_CHANNEL_FIFO_ERROR_SW_METHOD", "CONTACT_SUPPORT"),
    3: ("ROBUST_CHANNEL_FIFO_ERROR_UNK_METHOD", "CONTACT_SUPPORT"),
    4: ("ROBUST_CHANNEL_FIFO_ERROR_CHANNEL_BUSY", "CONTACT_SUPPORT"),
    5: ("ROBUST_CHANNEL_FIFO_ERROR_RUNOUT_OVERFLOW", "CONTACT_SUPPORT"),
    6: ("ROBUST_CHANNEL_FIFO_ERROR_PARSE_ERR", "CONTACT_SUPPORT"),
    7: ("ROBUST_CHANNEL_FIFO_ERROR_PTE_ERR", "CONTACT_SUPPORT"),
    8: ("ROBUST_CHANNEL_FIFO_ERROR_IDLE_TIMEOUT", "RESTART_APP"),
    9: ("ROBUST_CHANNEL_GR_ERROR_INSTANCE", "CONTACT_SUPPORT"),
    10: ("ROBUST_CHANNEL_GR_ERROR_SINGLE_STEP", "CONTACT_SUPPORT"),
    11: ("ROBUST_CHANNEL_GR_ERROR_MISSING_HW", "RESTART_APP"),
    12: ("ROBUST_CHANNEL_GR_ERROR_SW_METHOD", "CONTACT_SUPPORT"),
    13: ("ROBUST_CHANNEL_GR_EXCEPTION", "RESTART_APP"),
    79: ("ROBUST_CHANNEL_GPU_HAS_FALLEN_OFF_THE_BUS", "RESTART_BM"),
}


def action_of(code: int | str) -> str:
    """The catalog's immediate action for an XID code, "" when the table has none."""
    try:
        return XID_ACTIONS[int(code)][1]
    except (KeyError, ValueError):
        return ""


def with_xid_action(expr: str) -> str:
    """`expr` (series with an `xid` label) with an `action` label per the catalog.

    One label_replace per action: it matches the whole `xid` value against that action's codes,
    so it works the same for the own exporter's counter and dcgm-exporter's err_code.
    """
    by_action: dict[str, list[int]] = {}
    for code, (_, action) in sorted(XID_ACTIONS.items()):
        by_action.setdefault(action, []).append(code)
    for action, codes in sorted(by_action.items()):
        expr = f'label_replace({expr}, "action", "{action}", "xid", "{"|".join(map(str, codes))}")'
    return expr
