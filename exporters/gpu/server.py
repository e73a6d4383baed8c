"""Wiring: a registry around the GPU collector, and an HTTP(S) server for /metrics.

`build_registry` and `serve` are the stable entry points the simulator uses to serve fake
GPUs on a port of its own (signatures documented in exporters/gpu/README.md).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from wsgiref.simple_server import WSGIServer

from prometheus_client import CollectorRegistry, start_http_server
from trainsignals.exporters.gpu.backend import GpuBackend
from trainsignals.exporters.gpu.collector import CollectOptions, GpuCollector

DEFAULT_PORT = 9842


@dataclass
class Exporter:
    registry: CollectorRegistry
    collector: GpuCollector

    def close(self) -> None:
        """Stop the XID thread and shut NVML down."""
        self.collector.close()


def build_exporter(
    backend: GpuBackend,
    node: str,
    const_labels: dict[str, str] | None = None,
    gpu_indices: list[int] | None = None,
    options: CollectOptions | None = None,
) -> Exporter:
    # A registry of our own: no default process/platform collectors, whose series would
    # carry neither `node` nor the --label labels and are not in the metric catalog.
    registry = CollectorRegistry(auto_describe=False)
    collector = GpuCollector(backend, node, const_labels, gpu_indices, options)
    registry.register(collector)
    return Exporter(registry, collector)


def build_registry(
    backend: GpuBackend,
    node: str,
    const_labels: dict[str, str],
    gpu_indices: list[int] | None = None,
) -> CollectorRegistry:
    """The exporter's registry for `backend` (initialises it and starts the XID thread)."""
    return build_exporter(backend, node, const_labels, gpu_indices).registry


@dataclass
class MetricsServer:
    server: WSGIServer
    thread: threading.Thread

    @property
    def port(self) -> int:
        return int(self.server.server_address[1])

    def shutdown(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(5)

    close = shutdown


def serve(
    registry: CollectorRegistry,
    address: str,
    port: int,
    certfile: str | None = None,
    keyfile: str | None = None,
) -> MetricsServer:
    """Serve /metrics in a daemon thread (HTTPS when certfile and keyfile are given).

    Port 0 picks a free port; read it back from `.port`.
    """
    server, thread = start_http_server(port, address, registry, certfile=certfile,
                                       keyfile=keyfile)
    return MetricsServer(server, thread)
