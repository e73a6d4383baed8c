"""What the simulator scenario tests share: reading a simulation's endpoints."""

from __future__ import annotations

from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

from trainsignals.generator.spec.job import JobSpec
from trainsignals.simulator import Simulation

ROOT = Path(__file__).resolve().parents[2]
MIN, HOUR = 60, 3600


def values(text: str | None, name: str, **match: str) -> list[float]:
    assert text is not None, "endpoint is down"
    return [
        s.value
        for fam in text_string_to_metric_families(text)
        for s in fam.samples
        if s.name == name and all(s.labels.get(k) == v for k, v in match.items())
    ]


class Probe:
    """Reads one simulation's endpoints: per-rank training series, per-node GPU series."""

    def __init__(self, sim: Simulation) -> None:
        self.sim = sim

    def training(self, name: str, rank: int = 0, **match: str) -> float:
        target = self.sim.targets()[rank]
        (value,) = values(self.sim.scrape(target), name, **match)
        return value

    def gpu(self, name: str, node: int = 0, gpu: int = 0, **match: str) -> float:
        target = [t for t in self.sim.targets() if t.kind == "gpu"][node]
        (value,) = values(self.sim.scrape(target), name, gpu=str(gpu), **match)
        return value

    def phase(self, rank: int = 0) -> str:
        text = self.sim.scrape(self.sim.targets()[rank])
        assert text is not None
        return next(
            s.labels["phase"]
            for fam in text_string_to_metric_families(text)
            for s in fam.samples
            if s.name == "trainsignals_phase" and s.value == 1
        )


def make(spec: JobSpec, scenario: str, **kw: object) -> Simulation:
    args: dict = dict(time_scale=60, seed=7, nodes=2, gpus_per_node=2, start_time=1.0e9)
    args.update(kw)
    return Simulation(spec, scenario, **args)


def counter_before_and_after(
    spec: JobSpec, scenario: str, read, after: float = 10 * MIN
) -> tuple[float, float, float]:
    with make(spec, scenario) as sim:
        p = Probe(sim)
        sim.advance_to(sim.fault_at - 5 * MIN)
        early = read(p)
        sim.advance_to(sim.fault_at - sim.tick)
        before = read(p)
        sim.advance_to(sim.fault_at + after)
        return early, before, read(p)


def scrape_all(sim: Simulation) -> list[list[str]]:
    """Every endpoint's lines, less the exporter's own scrape timing (wall-clock by nature)."""
    return [
        [line for line in (sim.scrape(t) or "").splitlines() if "scrape_duration" not in line]
        for t in sim.targets()
    ]


def ib_value(sim: Simulation, name: str, node: int = 0, device: str = "mlx5_0") -> float:
    """A node_exporter InfiniBand series of one node, as its endpoint serves it now."""
    target = [t for t in sim.targets() if t.kind == "node"][node]
    (value,) = values(sim.scrape(target), name, device=device, port="1")
    return value
