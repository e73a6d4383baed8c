"""XID code -> NVIDIA's immediate action, as an `action` label on the recorded XID series.

Source: NVIDIA, "Analyzing Xid Errors with the Xid Catalog", column "Resolution Bucket (Immediate
Action)", https://docs.nvidia.com/deploy/xid-errors/analyzing-xid-catalog.html (Ampere and
newer). Codes 1-13 were read from that page; the others from its transcription in
aws/eks-node-monitoring-agent (the `WellKnownXidCodes` comment of its DCGM monitor, which
lists each code's NVIDIA resolution bucket). A code not listed gets no `action` label, and the
runbook says to look it up in the catalog: no guessed actions.
"""

from __future__ import annotations

# code -> (description, immediate action)
XID_ACTIONS: dict[int, tuple[str, str]] = {
    1: ("Unused", "CONTACT_SUPPORT"),
    2: ("Unused", "CONTACT_SUPPORT"),
    3: ("Unused", "CONTACT_SUPPORT"),
    4: ("Unused", "CONTACT_SUPPORT"),
    5: ("Unused", "CONTACT_SUPPORT"),
    6: ("Unused", "CONTACT_SUPPORT"),
    7: ("Unused", "CONTACT_SUPPORT"),
    8: ("GPU stopped processing", "RESTART_APP"),
    9: ("Unused", "CONTACT_SUPPORT"),
    10: ("Unused", "CONTACT_SUPPORT"),
    11: ("Invalid or corrupted push buffer stream", "RESTART_APP"),
    12: ("Unused", "CONTACT_SUPPORT"),
    13: ("Graphics Engine Exception", "RESTART_APP"),
    46: ("GPU stopped processing", "RESET_GPU"),
    48: ("Double Bit ECC Error", "WORKFLOW_XID_48"),
    54: ("Auxiliary power is not connected to the GPU board", "CHECK_MECHANICALS"),
    62: ("Internal micro-controller halt", "RESET_GPU"),
    63: ("ECC page retirement or row remapping recording event", "IGNORE"),
    64: ("ECC page retirement or row remapper recording failure", "RESET_GPU"),
    74: ("NVLink error", "WORKFLOW_NVLINK_ERR"),
    79: ("GPU has fallen off the bus", "RESTART_BM"),
    95: ("Uncontained ECC error", "RESET_GPU"),
    109: ("Context switch timeout", "RESET_GPU"),
    110: ("Security fault error", "RESET_GPU"),
    119: ("GSP RPC timeout", "RESET_GPU"),
    120: ("GSP error", "RESET_GPU"),
    136: ("Link training failed", "RESET_GPU"),
    140: ("Unrecoverable ECC error", "RESET_GPU"),
    142: ("NVENC3 error", "CONTACT_SUPPORT"),
    143: ("GPU initialization error", "RESET_GPU"),
    151: ("Key rotation error", "RESTART_VM"),
    155: ("NVLink SW defined error", "RESET_GPU"),
    156: ("Resource retirement event", "RESET_GPU"),
    158: ("GPU fatal timeout", "RESET_GPU"),
}


def action_of(code: int | str) -> str:
    """The catalog's immediate action for an XID code, "" when the table has none."""
    try:
        return XID_ACTIONS[int(code)][1]
    except (KeyError, ValueError):
        return ""


def codes_by_action(exclude: tuple[int, ...] | list[int] = ()) -> list[tuple[str, list[int]]]:
    """(action, its codes) sorted by action, leaving out `exclude`."""
    by_action: dict[str, list[int]] = {}
    for code, (_, action) in sorted(XID_ACTIONS.items()):
        if code not in exclude:
            by_action.setdefault(action, []).append(code)
    return sorted(by_action.items())


def with_xid_action(expr: str) -> str:
    """`expr` (series with an `xid` label) with an `action` label per the catalog.

    One label_replace per action: it matches the whole `xid` value against that action's codes,
    so it works the same for the own exporter's counter and dcgm-exporter's err_code.
    """
    for action, codes in codes_by_action():
        expr = f'label_replace({expr}, "action", "{action}", "xid", "{"|".join(map(str, codes))}")'
    return expr
