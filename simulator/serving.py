"""The simulated job's endpoints: a /metrics per rank, and per node its GPU exporter and its
node_exporter's fabric series; their file_sd files for Prometheus."""

from __future__ import annotations

from pathlib import Path

from prometheus_client.exposition import generate_latest

from trainsignals.exporters.gpu.server import serve

from .cluster import Node, Rank
from .targets import Target, write_file_sd


class Endpoints:
    """Ports: `base_port` + rank for the ranks, then the GPU exporters, then the
    node_exporters (0: any free port). `targets_dir`: where the file_sd files go."""

    def __init__(
        self,
        nodes: list[Node],
        ranks: list[Rank],
        labels: dict[str, str],
        host: str,
        base_port: int,
        targets_dir: Path | None,
    ) -> None:
        self.nodes, self.ranks, self.labels = nodes, ranks, labels
        self.host, self.base_port, self.targets_dir = host, base_port, targets_dir
        self.serving = False

    def targets(self) -> list[Target]:
        """Every endpoint, training ranks first; `port` is set once served."""
        fabric = [n.fabric_target for n in self.nodes if n.fabric_target is not None]
        return [r.target for r in self.ranks] + [n.target for n in self.nodes] + fabric

    def is_up(self, target: Target) -> bool:
        if target.kind == "gpu":
            return next(n for n in self.nodes if n.target is target).up
        if target.kind == "node":
            return next(n for n in self.nodes if n.fabric_target is target).up
        return self.ranks[target.rank or 0].up

    def scrape(self, target: Target) -> str | None:
        """What the endpoint answers now (without HTTP); None when it is down."""
        if not self.is_up(target):
            return None
        return generate_latest(target.registry).decode()

    def port(self, offset: int) -> int:
        return 0 if self.base_port == 0 else self.base_port + offset

    def serve(self) -> None:
        """Open every endpoint of what is up and write the file_sd files."""
        world = len(self.ranks)
        self.serving = True
        for r in self.ranks:
            if r.up:
                self.serve_rank(r)
        for node in self.nodes:
            if node.up:
                node.server = serve(
                    node.exporter.registry, self.host, self.port(world + node.index)
                )
                node.target.port = node.server.port
                node.fabric_server = serve(
                    node.fabric.registry,
                    self.host,
                    self.port(world + len(self.nodes) + node.index),
                )
                if node.fabric_target is not None:
                    node.fabric_target.port = node.fabric_server.port
        if self.targets_dir is not None:
            write_file_sd(self.targets_dir, self.targets(), self.labels)

    def serve_rank(self, rank: Rank) -> None:
        """A rank's endpoint, on the port it had (a restarted process binds it again)."""
        port = rank.target.port or self.port(rank.rank)
        rank.target.port = rank.metrics.start_http_server(port, addr=self.host)

    def close_node(self, node: Node) -> None:
        """A node's GPU exporter and node_exporter stop answering (the node went down)."""
        for server in (node.server, node.fabric_server):
            if server:
                server.close()
        node.server = node.fabric_server = None

    def withdraw(self) -> None:
        """The scheduler released the nodes: the job's file_sd files become empty."""
        if self.targets_dir is not None:
            write_file_sd(self.targets_dir, [], self.labels)

    def close(self) -> None:
        """Close every endpoint and the GPU exporters' XID threads."""
        for r in self.ranks:
            r.metrics.stop_http_server()
        for node in self.nodes:
            self.close_node(node)
            node.exporter.close()
