"""A real Prometheus scraping one in-process training run, evaluating the job's generated rules.

`watch(run)`: `run(stop, nan)` trains in a thread until `stop` is set, returning a NaN loss
once `nan` is set. Healthy first (HEALTHY_SECONDS, no alert may fire), then NaN until
NonFiniteLoss fires. Rules are generated at TIME_SCALE like the e2e tests'.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from pathlib import Path

from trainsignals.generator.spec import JobSpec

from trainsignals.stack import Stack, job_files

TIME_SCALE = 60
HEALTHY_SECONDS = 12
NAN_TIMEOUT = 30
NODE = "cpu0"  # the scrape config's node label, and the one TrainingMetrics exports
# A CPU run of a tiny model has no GPUs, no GPU exporter and a tiny MFU: the alerts about
# those are off for this job; every training-loop alert stays on.
OFF = ("MfuBelowFloor", "ThroughputBelowFloor", "GpuExporterDown")


def cpu_spec(name: str) -> JobSpec:
    return JobSpec.model_validate(
        {
            "name": name,
            "team": "ml-research",
            "owners": ["alice@example.com"],
            "shape": {
                "nodes": 1,
                "gpus_per_node": 1,
                "gpu_model": "H100-SXM",
                "model_flops_per_token": 1e4,
            },
            "alerts": dict.fromkeys(OFF, "off"),
        }
    )


def firing(stack: Stack, job: str) -> set[str]:
    result = stack.query(f'ALERTS{{alertstate="firing",training_job="{job}"}}')
    return {r["metric"]["alertname"] for r in result}


def watch(
    tmp: Path, spec: JobSpec, port: int, run: Callable[[threading.Event, threading.Event], None]
) -> dict[str, object]:
    files = job_files(spec, TIME_SCALE)
    rules = tmp / "rules.yaml"
    rules.write_text(files[f"alerts/{spec.name}.rules.yaml"], encoding="utf-8")
    sd = tmp / "sd"
    sd.mkdir()
    labels = {**spec.selector_labels, "node": NODE}
    (sd / "training.json").write_text(
        json.dumps([{"targets": [f"127.0.0.1:{port}"], "labels": labels}]), encoding="utf-8"
    )
    stop, nan = threading.Event(), threading.Event()
    errors: list[BaseException] = []

    def target() -> None:
        try:
            run(stop, nan)
        except BaseException as exc:  # reported by the test
            errors.append(exc)

    out: dict[str, object] = {}
    with Stack(tmp / "stack", [spec], [sd], [rules], defer_rules=True) as stack:
        thread = threading.Thread(target=target, daemon=True)
        thread.start()
        try:
            stack.wait_for_targets(1)
            stack.load_rules()
            time.sleep(HEALTHY_SECONDS)
            out["healthy_firing"] = firing(stack, spec.name) | firing_pending_free(stack, spec)
            out["steps"] = stack.query(
                f'sum(trainsignals_steps_total{{training_job="{spec.name}"}})'
            )
            out["phases"] = stack.query(
                f'trainsignals_phase{{training_job="{spec.name}"}} == 1'
            )
            nan.set()
            deadline = time.monotonic() + NAN_TIMEOUT
            out["nan_firing"] = set()
            while time.monotonic() < deadline and "NonFiniteLoss" not in out["nan_firing"]:
                time.sleep(0.5)
                out["nan_firing"] = firing(stack, spec.name)
        finally:
            stop.set()
            thread.join(timeout=30)
    out["errors"] = errors
    return out


def firing_pending_free(stack: Stack, spec: JobSpec) -> set[str]:
    """Alerts pending at the end of the healthy phase count too: they would fire."""
    result = stack.query(f'ALERTS{{alertstate="pending",training_job="{spec.name}"}}')
    return {r["metric"]["alertname"] for r in result}
