"""The simulated job's shape: its nodes (fake GPUs, a GPU exporter, a node_exporter's fabric
series) and its ranks (one TrainingMetrics each), as the simulation builds them."""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field

from trainsignals.exporters.gpu.fake_backend import FakeBackend, FakeGpu
from trainsignals.exporters.gpu.server import Exporter, MetricsServer, build_exporter
from trainsignals.exporters.training import TrainingMetrics
from trainsignals.generator.spec.job import JobSpec

from .fabric import NodeFabric
from .gpus import GpuLoad, make_gpus, update_gpu
from .profile import JobProfile
from .targets import Target

MAX_NODES, MAX_GPUS_PER_NODE = 4, 8  # default caps: at most 32 rank endpoints


@dataclass
class Rank:
    rank: int
    node: int
    local_rank: int
    metrics: TrainingMetrics
    target: Target
    up: bool = True

    def take_down(self) -> None:
        """The process is gone: its endpoint stops answering."""
        self.up = False
        self.metrics.stop_http_server()


@dataclass
class Node:
    index: int
    name: str
    gpus: list[FakeGpu]
    backend: FakeBackend
    exporter: Exporter
    target: Target
    disk_free: int
    up: bool = True
    server: MetricsServer | None = None
    ranks: list[Rank] = field(default_factory=list)
    # node_exporter's InfiniBand series (simulator/fabric.py), served as the node's own target.
    fabric: NodeFabric = field(default_factory=NodeFabric)
    fabric_target: Target | None = None
    fabric_server: MetricsServer | None = None

    def tick_hardware(
        self,
        profile: JobProfile,
        *,
        phase: str,
        stalled: bool,
        data_wait_ratio: float,
        waiting: set[int],
        hot_gpus: set[int],
        disk_filled: float,
        seconds: float,
        rng: random.Random,
        clock_factors: dict[int, float] | None = None,
    ) -> None:
        """This tick's free disk (`disk_filled`: the share the fault filled) and GPU readings
        (`hot_gpus`: indices running hot; `waiting`: ranks stuck in their data loader, whose
        GPUs idle while the others spin); a node that is down reports nothing."""
        if not self.up:
            return
        ratio = max(0.0, profile.disk_free_ratio - disk_filled)
        self.disk_free = int(profile.disk_size_bytes * ratio)
        with self.backend.lock:
            for rank, gpu in zip(self.ranks, self.gpus, strict=True):
                load = GpuLoad(
                    alive=rank.up,
                    phase=phase,
                    stalled=stalled and rank.rank not in waiting,
                    waiting=rank.rank in waiting,
                    data_wait_ratio=data_wait_ratio,
                    hot=gpu.index in hot_gpus,
                    clock_factor=(clock_factors or {}).get(gpu.index, 1.0),
                )
                update_gpu(gpu, load, 10_000 + rank.rank, seconds, rng)


def effective_spec(spec: JobSpec, nodes: int | None, gpus_per_node: int | None) -> JobSpec:
    """The spec with the simulated shape (defaults: the spec's, capped at 4 x 8)."""
    n = nodes if nodes is not None else min(spec.shape.nodes, MAX_NODES)
    g = (
        gpus_per_node
        if gpus_per_node is not None
        else min(spec.shape.gpus_per_node, MAX_GPUS_PER_NODE)
    )
    if n < 1 or g < 1:
        raise ValueError("nodes and gpus_per_node must be at least 1")
    shape = spec.shape.model_copy(update={"nodes": n, "gpus_per_node": g})
    return spec.model_copy(update={"shape": shape})


def build_cluster(
    spec: JobSpec,
    profile: JobProfile,
    host: str,
    rank_metrics: Callable[[Node, int, int], TrainingMetrics],
) -> tuple[list[Node], list[Rank]]:
    """Every node and rank of the (effective) spec; `rank_metrics(node, rank, local_rank)`
    makes a rank's TrainingMetrics."""
    shape, labels = spec.shape, spec.selector_labels
    nodes: list[Node] = []
    ranks: list[Rank] = []
    for n in range(shape.nodes):
        name = f"{spec.name}-node{n}"
        gpus = make_gpus(profile, n, shape.gpus_per_node)
        backend = FakeBackend(gpus)
        exporter = build_exporter(backend, name, labels)
        free = int(profile.disk_size_bytes * profile.disk_free_ratio)
        node = Node(
            n,
            name,
            gpus,
            backend,
            exporter,
            Target("gpu", name, None, exporter.registry, host),
            free,
        )
        node.fabric_target = Target("node", name, None, node.fabric.registry, host)
        for local in range(shape.gpus_per_node):
            rank = n * shape.gpus_per_node + local
            metrics = rank_metrics(node, rank, local)
            r = Rank(
                rank, n, local, metrics, Target("training", name, rank, metrics.registry, host)
            )
            node.ranks.append(r)
            ranks.append(r)
        nodes.append(node)
    return nodes, ranks
