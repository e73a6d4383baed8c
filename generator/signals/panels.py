"""Stable dashboard panel ids, shared by the dashboard builder and the alerts' dashboard_url."""

from __future__ import annotations

PANEL_IDS: dict[str, int] = {
    # Top row: the four golden signals plus MFU.
    "step_time": 1,
    "throughput": 2,
    "errors": 3,
    "gpu_saturation": 4,
    "mfu": 5,
    "slo": 6,
    # Training process.
    "loss": 10,
    "data_wait": 11,
    "checkpoint_age": 12,
    "step_progress": 13,
    "targets_up": 14,
    "dropped_batches": 15,
    "step_time_series": 16,
    "throughput_series": 17,
    "mfu_series": 18,
    "restarts": 19,
    # Per node and per GPU.
    "gpu_utilization": 20,
    "gpu_memory": 21,
    "gpu_power": 22,
    "gpu_temperature": 23,
    "gpu_throttle": 24,
    "gpu_errors": 25,
    "gpu_count": 26,
    "gpu_activity": 27,
    "gpu_mig_memory": 28,
    "gpu_mig_activity": 29,
    "gpu_nvlink": 33,
    "disk": 30,
    "network": 31,
    "fabric": 32,
    "firing_alerts": 40,
    # Goodput row (generator/dashboards/goodput.py).
    "goodput": 50,
    "badput": 51,
    # Stragglers (generator/dashboards/straggler_panels.py): ids 60-64.
    "straggler": 60,
    "straggler_heatmap": 61,
    # "Where is it slow" row (generator/dashboards/where_slow.py): ids 65-69.
    "where_slow_nodes": 65,
    "where_slow_gpus": 66,
    "where_slow_links": 67,
    "where_slow_nccl": 68,
    "where_slow_link_rate": 69,
    # Suspects and lemon nodes (generator/dashboards/suspect_panels.py): ids 70-79.
    "suspects": 70,
    "nodes_by_incidents": 71,
}

# Each keyed panel's title (tests/test_dashboard_text.py checks the dashboards agree), so a
# runbook's link to a panel reads as the title of the panel it opens.
PANEL_TITLES: dict[str, str] = {
    "step_time": "Step time p95",
    "throughput": "Throughput (tokens/s)",
    "errors": "Errors",
    "gpu_saturation": "GPU saturation",
    "mfu": "MFU",
    "slo": "Error budget remaining",
    "loss": "Loss",
    "data_wait": "Data-loader wait share",
    "checkpoint_age": "Checkpoint age",
    "step_progress": "Time since last step",
    "targets_up": "Targets up",
    "dropped_batches": "Dropped batches",
    "step_time_series": "Step time",
    "throughput_series": "Throughput (tokens/s)",
    "mfu_series": "MFU",
    "restarts": "Restarts",
    "gpu_utilization": "GPU utilization",
    "gpu_memory": "GPU memory used",
    "gpu_power": "GPU power",
    "gpu_temperature": "GPU temperature",
    "gpu_throttle": "GPU throttling",
    "gpu_errors": "GPU errors",
    "gpu_count": "GPUs per node",
    "gpu_activity": "GPU activity (real busy)",
    "gpu_mig_memory": "MIG instances: memory used",
    "gpu_mig_activity": "MIG instances: activity",
    "gpu_nvlink": "NVLink errors",
    "disk": "Checkpoint disk free",
    "network": "Network",
    "fabric": "InfiniBand fabric",
    "firing_alerts": "Firing alerts",
    "goodput": "Goodput (ETTR)",
    "badput": "Where the time goes (1h)",
    "straggler": "Slowest ranks: throughput cost",
    "straggler_heatmap": "Own work per rank vs the median",
    "where_slow_nodes": "Slowest nodes (GPU clock vs job median)",
    "where_slow_gpus": "GPU SM clock vs job median",
    "where_slow_links": "InfiniBand throughput vs peers' median",
    "where_slow_nccl": "NCCL bus bandwidth vs communicator median",
    "where_slow_link_rate": "InfiniBand link rate vs peers' median",
    "suspects": "Suspects of the current incident",
    "nodes_by_incidents": "Nodes by incident count (30d, every job)",
}


def dashboard_uid(job: str) -> str:
    """Stable uid from the job name (Grafana allows 40 characters)."""
    return f"ts-{job}"[:40]
