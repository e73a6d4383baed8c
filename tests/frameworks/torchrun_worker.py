"""Run by tests/frameworks/test_torchrun_launch.py under real torchrun (no torch import here).

Writes what TrainingMetrics.from_env() saw, and what it exposes, to <out>/inc<N>-rank<R>.json;
rank 1 of the first incarnation then fails so torchrun restarts the worker group.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from trainsignals.exporters.training import TrainingMetrics

out = Path(sys.argv[1])
metrics = TrainingMetrics.from_env(labels={"training_job": "torchrun-tiny"})
launch = metrics.launch
exposed = [
    line
    for line in metrics.exposition().decode().splitlines()
    if line.startswith(("trainsignals_incarnation{", "trainsignals_training_info{"))
]
view = {
    "rank": launch.rank,
    "local_rank": launch.local_rank,
    "world_size": launch.world_size,
    "local_world_size": launch.local_world_size,
    "group_rank": launch.group_rank,
    "restart_count": launch.restart_count,
    "max_restarts": launch.max_restarts,
    "launched": launch.launched,
    "exposed": exposed,
}
path = out / f"inc{launch.restart_count}-rank{launch.rank}.json"
path.with_suffix(".tmp").write_text(json.dumps(view), encoding="utf-8")
path.with_suffix(".tmp").rename(path)  # whole, even if torchrun stops this worker next
if launch.restart_count == 0 and launch.rank == 1:
    # Fail only once rank 0 has written its view: torchrun stops the whole group on a failure.
    deadline = time.monotonic() + 30
    while not (out / "inc0-rank0.json").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    sys.exit(3)
