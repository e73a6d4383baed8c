"""`trainsignals simulate`: serve a simulated training job with an injected fault."""

from __future__ import annotations

import signal
import threading
import time
from pathlib import Path

import click

from trainsignals.generator.alerts.definitions.training import TRAINING_TARGETS_DOWN
from trainsignals.generator.loader import SpecError, load_specs
from trainsignals.generator.spec.durations import format_duration, parse_duration

from .job import Simulation
from .scenarios import SCENARIOS


class DurationType(click.ParamType):
    name = "duration"

    def convert(self, value: object, param: click.Parameter | None, ctx: click.Context | None):
        if isinstance(value, int | float):
            return int(value)
        try:
            return parse_duration(str(value))
        except ValueError as exc:
            self.fail(str(exc), param, ctx)


DURATION = DurationType()


@click.command("simulate")
@click.option(
    "--spec",
    "spec_path",
    required=True,
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="Job spec (jobs/<job>.yaml).",
)
@click.option(
    "--scenario", type=click.Choice(sorted(SCENARIOS)), default="healthy", show_default=True
)
@click.option("--nodes", type=click.IntRange(1, 64), help="Simulated nodes [spec, max 4].")
@click.option(
    "--gpus-per-node", type=click.IntRange(1, 16), help="Simulated GPUs per node [spec, max 8]."
)
@click.option(
    "--time-scale",
    type=click.FloatRange(min=0, min_open=True),
    default=1.0,
    show_default=True,
    help="Simulated seconds per real second.",
)
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--fault-at", type=DURATION, help="Simulated time of fault onset [scenario's].")
@click.option(
    "--duration",
    type=DURATION,
    help="Simulated time to run, then exit [scenario's; 0 = until Ctrl-C].",
)
@click.option("--host", default="127.0.0.1", show_default=True)
@click.option(
    "--base-port",
    type=click.IntRange(0, 65535),
    default=0,
    show_default=True,
    help="Ranks on base..base+world-1, GPU exporters after them; 0 = free ports.",
)
@click.option(
    "--targets-dir",
    type=click.Path(file_okay=False, path_type=Path),
    help="Write Prometheus file_sd training.json and gpu.json here.",
)
def simulate(
    spec_path: Path,
    scenario: str,
    nodes: int | None,
    gpus_per_node: int | None,
    time_scale: float,
    seed: int,
    fault_at: int | None,
    duration: int | None,
    host: str,
    base_port: int,
    targets_dir: Path | None,
) -> None:
    """Serve a synthetic training job (one /metrics per rank, one GPU exporter per node)
    whose timeline runs TIME-SCALE times faster than real time, with SCENARIO's fault.

    Example: trainsignals simulate --spec jobs/minimal.yaml --scenario nan_loss
    --nodes 2 --gpus-per-node 2 --time-scale 60 --targets-dir /tmp/sd
    """
    try:
        spec = load_specs([spec_path])[0]
    except SpecError as exc:
        raise click.ClickException(str(exc)) from None
    try:
        sim = Simulation(
            spec,
            scenario,
            time_scale=time_scale,
            seed=seed,
            nodes=nodes,
            gpus_per_node=gpus_per_node,
            fault_at=fault_at,
            host=host,
            base_port=base_port,
            targets_dir=targets_dir,
        )
    except ValueError as exc:
        raise click.ClickException(str(exc)) from None
    chosen = SCENARIOS[scenario]
    run_for = chosen.duration if duration is None else duration
    shape = sim.spec.shape
    if (shape.nodes, shape.gpus_per_node) != (spec.shape.nodes, spec.shape.gpus_per_node):
        click.echo(
            f"note: simulating {shape.nodes} x {shape.gpus_per_node} GPUs, the spec says "
            f"{spec.shape.nodes} x {spec.shape.gpus_per_node}; generate rules for this "
            f"shape or {TRAINING_TARGETS_DOWN} and MFU will be off",
            err=True,
        )
    try:
        sim.start(duration=run_for or None)
    except OSError as exc:
        sim.stop()
        raise click.ClickException(f"cannot serve on {host}: {exc}") from None
    for t in sim.targets():
        who = f"rank {t.rank}" if t.kind == "training" else "gpu exporter"
        click.echo(f"{t.kind:8} {t.node} {who:12} http://{t.address}/metrics")
    alerts = ", ".join(f"{a} ({s})" for a, s in chosen.alerts_for(sim.spec).items()) or "none"
    click.echo(
        f"scenario {scenario}: fault at {format_duration(sim.fault_at)}, expect {alerts}; "
        f"running {format_duration(run_for) if run_for else 'until Ctrl-C'} simulated "
        f"at x{time_scale:g}"
    )
    # Signals only flip a flag: a handler calling Event.set() (or a KeyboardInterrupt raised
    # inside Event.wait()) can deadlock on the lock the main thread holds there, which once
    # left a simulator running after Ctrl-C and its parent's SIGTERM.
    stopping: list[int] = []
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, lambda signum, _frame: stopping.append(signum))
        signal.signal(signal.SIGINT, lambda signum, _frame: stopping.append(signum))
    try:
        while not stopping and not sim.finished.is_set():
            time.sleep(0.2)
    except KeyboardInterrupt:  # SIGINT before the handler was installed
        pass
    finally:
        sim.stop()
