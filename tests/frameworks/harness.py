"""A real training run under real Prometheus + Alertmanager, for the framework callbacks.

The test builds a tiny model, starts training in a thread with a callback under test, and this
harness serves the generated (time-compressed) rules of a spec shaped like the run: 1 node,
1 rank, a throughput floor a CPU reaches. Prometheus scrapes the rank through the generated
scrape config (file_sd). `poison` turns every later training loss into NaN.
`assert_silent_then_pages` is the check both callbacks' tests make on such a run.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.conftest import require_tool
from trainsignals.generator.spec.job import JobSpec
from trainsignals.stacks.stack import Stack, job_files

# 1 real second = 1 simulated minute: NonFiniteLoss's 1m `for` is 1 s, a stall 10 s.
TIME_SCALE = 60.0
HEALTHY_SECONDS = 12.0  # 12 simulated minutes of healthy training, checked silent
FIRE_TIMEOUT = 25.0


def tiny_run_spec(name: str) -> JobSpec:
    """The spec of the CPU run: one rank, no GPU exporter, a floor any CPU passes."""
    return JobSpec.model_validate(
        {
            "name": name,
            "team": "ml-research",
            "shape": {
                "nodes": 1,
                "gpus_per_node": 1,
                "gpu_model": "H100-SXM",
                "model_flops_per_token": 1e5,
            },
            "objectives": {"tokens_per_second_min": 1.0},
        }
    )


@dataclass
class Control:
    """Shared between the test thread and the training thread's callbacks."""

    poison: threading.Event = field(default_factory=threading.Event)
    stop: threading.Event = field(default_factory=threading.Event)
    error: list[BaseException] = field(default_factory=list)


@dataclass
class Monitored:
    stack: Stack
    spec: JobSpec
    control: Control

    def firing(self, window: str = "1h") -> set[str]:
        """Alert names that fired for this job in the last `window` (Prometheus's ALERTS)."""
        expr = (
            f'max_over_time(ALERTS{{alertstate="firing",training_job="{self.spec.name}"}}'
            f"[{window}])"
        )
        return {item["metric"]["alertname"] for item in self.stack.query(expr)}

    def notified(self) -> set[str]:
        assert self.stack.receiver is not None
        return {n.alertname for n in self.stack.receiver.snapshot() if n.status == "firing"}

    def query_value(self, expr: str) -> float | None:
        result = self.stack.query(expr)
        return float(result[0]["value"][1]) if result else None


def write_targets(folder: Path, port: int) -> None:
    group = [{"targets": [f"127.0.0.1:{port}"], "labels": {"node": "cpu-0"}}]
    (folder / "training.json.tmp").write_text(json.dumps(group), encoding="utf-8")
    (folder / "training.json.tmp").rename(folder / "training.json")


@contextmanager
def monitored_run(
    tmp_path: Path,
    spec: JobSpec,
    train: Callable[[Control], None],
    port: Callable[[], int | None],
) -> Iterator[Monitored]:
    """Start the stack, run `train(control)` in a thread, wait for its endpoint (`port()`)."""
    require_tool("prometheus")
    require_tool("prometheus-alertmanager")
    rules = tmp_path / f"{spec.name}.rules.yaml"
    files = job_files(spec, TIME_SCALE)
    rules.write_text(next(t for n, t in files.items() if n.endswith(".rules.yaml")), "utf-8")
    targets = tmp_path / "targets"
    targets.mkdir()
    control = Control()

    def run() -> None:
        try:
            train(control)
        except BaseException as exc:  # reported by the test thread
            control.error.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    with Stack(tmp_path / "stack", [spec], [targets], [rules], defer_rules=True) as stack:
        thread.start()
        deadline = time.monotonic() + 60
        while port() is None:
            if control.error or time.monotonic() > deadline:
                raise RuntimeError(f"training never served /metrics: {control.error}")
            time.sleep(0.05)
        write_targets(targets, port())  # type: ignore[arg-type]
        stack.wait_for_targets(1)
        stack.load_rules()
        try:
            yield Monitored(stack, spec, control)
        finally:
            control.stop.set()
            thread.join(timeout=60)
    if control.error:
        raise control.error[0]


def healthy_then_nan(run: Monitored) -> tuple[set[str], set[str]]:
    """Healthy for HEALTHY_SECONDS (returns what fired), then NaN losses until NonFiniteLoss
    is notified (returns what was notified)."""
    time.sleep(HEALTHY_SECONDS)
    if run.control.error:
        raise run.control.error[0]
    healthy_fired = run.firing() | run.notified()
    run.control.poison.set()
    deadline = time.monotonic() + FIRE_TIMEOUT
    while "NonFiniteLoss" not in run.notified() and time.monotonic() < deadline:
        if run.control.error:
            raise run.control.error[0]
        time.sleep(0.25)
    return healthy_fired, run.notified()


def assert_silent_then_pages(
    tmp_path: Path,
    spec: JobSpec,
    train: Callable[[Control], None],
    port: Callable[[], int | None],
    *,
    framework: str,
    tokens_per_step: int,
) -> None:
    """A monitored run (`monitored_run`) is silent while healthy and pages NonFiniteLoss on NaN
    losses; Prometheus scraped its steps, tokens, a checkpoint save and the eval phase."""
    with monitored_run(tmp_path, spec, train, port) as run:
        healthy_fired, notified = healthy_then_nan(run)
        job = f'training_job="{spec.name}"'
        steps = run.query_value(f"sum(trainsignals_steps_total{{{job}}})")
        tokens = run.query_value(f"sum(trainsignals_tokens_total{{{job}}})")
        saved = run.query_value(
            f"max(trainsignals_last_checkpoint_timestamp_seconds{{{job}}})"
            f" - max(trainsignals_process_start_time_seconds{{{job}}})"
        )
        evals = run.query_value(f'max_over_time(trainsignals_phase{{{job},phase="eval"}}[1h])')

    assert healthy_fired == set(), f"healthy {framework} run fired {healthy_fired}"
    assert "NonFiniteLoss" in notified, f"NaN losses notified only {notified}"
    assert steps is not None and steps > 100
    assert tokens == pytest.approx(steps * tokens_per_step, rel=0.05)
    assert saved is not None and saved > 0, f"{framework}: no checkpoint was marked saved"
    assert evals == 1, "the eval phase was never scraped"


def sample_values(exposition: bytes, names: Sequence[str]) -> dict[str, float]:
    """`name: value` of the exposition's samples of these names (one series each)."""
    prefixes = tuple(f"{name}{{" for name in names)
    return {
        line.split("{")[0]: float(line.rsplit(" ", 1)[1])
        for line in exposition.decode().splitlines()
        if line.startswith(prefixes)
    }
