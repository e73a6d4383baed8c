"""Every alert trainsignals knows, one definition each (see generator/alerts/model.py).

The order here is the order of the generated rules, `explain` and the runbook index: the
self-healing symptoms, then the training process, loss and checkpoints, nodes, GPUs, SLOs.
"""

from __future__ import annotations

from trainsignals.generator.alerts.definitions import (
    fabric,
    failslow,
    gpu_conditions,
    gpu_faults,
    inputs,
    loss_checkpoint,
    reachability,
    recovery,
    restarts,
    slo_burn,
    straggler,
    training,
)
from trainsignals.generator.alerts.model import AlertDef

DEFINITIONS: tuple[AlertDef, ...] = (
    *recovery.GROUP.definitions,
    *restarts.GROUP.definitions,
    *training.GROUP.definitions,
    *loss_checkpoint.GROUP.definitions,
    *reachability.GROUP.definitions,
    *gpu_faults.GROUP.definitions,
    *gpu_conditions.GROUP.definitions,
    *fabric.GROUP.definitions,
    *failslow.GROUP.definitions,
    *straggler.GROUP.definitions,
    *slo_burn.GROUP.definitions,
    *inputs.GROUP.definitions,
)
