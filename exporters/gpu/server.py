"""Wiring: a registry around the GPU collector, and an HTTP(S) server for /metrics.

`build_registry` and `serve` are the stable entry points the simulator uses to serve fake
GPUs on a port of its own (signatures documented in exporters/gpu/README.md).

The registry is a prometheus_client `CollectorRegistry` (so `generate_latest(registry)` and
everything else that takes a registry keep working), but `serve` does not format through
prometheus_client: for the exporter's own registry it writes the text format with
`exposition.TextWriter`, ~10x cheaper per line.
"""

from __future__ import annotations

import gzip
import logging
import queue
import socket
import ssl
import sys
import threading
from collections.abc import Callable, Collection, Iterable
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from prometheus_client import CollectorRegistry, generate_latest, start_http_server
from prometheus_client.registry import Collector

from trainsignals.exporters.gpu.backend import GpuBackend
from trainsignals.exporters.gpu.collector import CollectOptions, GpuCollector
from trainsignals.exporters.gpu.exposition import CONTENT_TYPE

DEFAULT_PORT = 9842

log = logging.getLogger("trainsignals.exporters.gpu")

StartResponse = Callable[[str, list[tuple[str, str]]], Any]
WsgiApp = Callable[[dict[str, Any], StartResponse], Iterable[bytes]]


class ExporterRegistry(CollectorRegistry):
    """The exporter's own registry: a CollectorRegistry that can also render its GPU
    collector directly in the text format."""

    def __init__(self, collector: GpuCollector) -> None:
        # No auto_describe: describing would run a whole collection at register time.
        super().__init__(auto_describe=False)
        self.collector = collector
        self._others: set[Collector] = set()
        self.register(collector)

    def register(self, collector: Collector) -> None:
        super().register(collector)
        if collector is not self.collector:
            self._others.add(collector)

    def unregister(self, collector: Collector) -> None:
        super().unregister(collector)
        self._others.discard(collector)

    def render_text(self, names: Collection[str] | None = None) -> bytes:
        """What generate_latest(self) returns, without prometheus_client's formatting cost;
        `names` keeps only the families with those sample names."""
        if self._others:  # a caller registered more collectors: format them all the slow way
            return generate_latest(self if names is None else self.restricted_registry(names))
        return self.collector.render_text(names)


@dataclass
class Exporter:
    registry: ExporterRegistry
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
    collector = GpuCollector(backend, node, const_labels, gpu_indices, options)
    return Exporter(ExporterRegistry(collector), collector)


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

    Port 0 picks a free port; read it back from `.port`. The exporter's own registry is
    served by `metrics_app` (always text format 0.0.4); any other registry by
    prometheus_client's server, as before.
    """
    if not isinstance(registry, ExporterRegistry):
        server, thread = start_http_server(
            port, address, registry, certfile=certfile, keyfile=keyfile
        )
        return MetricsServer(server, thread)

    class Server(_PooledWSGIServer):
        pass

    # Bind IPv6 addresses too (HTTPServer defaults to AF_INET), as prometheus_client does.
    family, _, _, _, sockaddr = socket.getaddrinfo(
        address, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
    )[0]
    Server.address_family = family
    httpd = make_server(
        str(sockaddr[0]), port, metrics_app(registry), Server, handler_class=_SilentHandler
    )
    if certfile and keyfile:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(certfile=certfile, keyfile=keyfile)
        httpd.socket = context.wrap_socket(httpd.socket, server_side=True)
    thread = threading.Thread(target=httpd.serve_forever, name="trainsignals-gpu-http")
    thread.daemon = True
    thread.start()
    return MetricsServer(httpd, thread)


class _PooledWSGIServer(WSGIServer):
    """Requests handled by a few long-lived daemon threads.

    prometheus_client starts a thread per request (ThreadingMixIn); on a busy 2-core VM
    the new thread's first run was delayed by 3-4 ms in ~3 % of scrapes, which alone broke
    the 5 ms p99 goal. Waking an idle worker costs no such delay. Several workers, so one
    stalled client does not hold up the next scrape; `_SilentHandler.timeout` bounds how
    long a stalled client holds its worker.
    """

    workers = 4

    def server_activate(self) -> None:
        super().server_activate()
        self._requests: queue.SimpleQueue[tuple[Any, Any] | None] = queue.SimpleQueue()
        for n in range(self.workers):
            name = f"trainsignals-gpu-http-{n}"
            threading.Thread(target=self._work, name=name, daemon=True).start()

    def process_request(self, request: Any, client_address: Any) -> None:
        self._requests.put((request, client_address))

    def _work(self) -> None:
        while (item := self._requests.get()) is not None:
            request, client_address = item
            try:  # what ThreadingMixIn.process_request_thread does, on a reused thread
                self.finish_request(request, client_address)
            except Exception:
                self.handle_error(request, client_address)
            finally:
                self.shutdown_request(request)

    def handle_error(self, request: Any, client_address: Any) -> None:
        # One line, not socketserver's traceback on stderr: a client that hangs up or
        # stalls past the timeout is not the exporter's fault.
        log.warning("/metrics request from %s failed: %r", client_address[0], sys.exc_info()[1])

    def server_close(self) -> None:
        super().server_close()
        for _ in range(self.workers):
            self._requests.put(None)


class _SilentHandler(WSGIRequestHandler):
    # Socket timeout for a client that connects and stalls (Prometheus' default scrape
    # timeout is 10 s): frees its worker.
    timeout = 30

    def log_message(self, format: str, *args: Any) -> None:
        """No access log: one line per scrape would drown the exporter's own logs."""


def _gzip_accepted(accept_encoding: str) -> bool:
    return any(part.split(";")[0].strip().lower() == "gzip" for part in accept_encoding.split(","))


def metrics_app(registry: ExporterRegistry) -> WsgiApp:
    """The WSGI app of /metrics, with prometheus_client's HTTP behaviour: any path serves
    the metrics, /favicon.ico is empty, OPTIONS and GET only, gzip when accepted, `name[]`
    selects families. The format is always text 0.0.4: Prometheus accepts it whatever its
    Accept header prefers, and the fast writer only writes that format."""

    def app(environ: dict[str, Any], start_response: StartResponse) -> Iterable[bytes]:
        method = environ["REQUEST_METHOD"]
        headers: list[tuple[str, str]] = []
        status, output = "200 OK", b""
        if method == "OPTIONS":
            headers.append(("Allow", "OPTIONS,GET"))
        elif method != "GET":
            status = "405 Method Not Allowed"
            headers.append(("Allow", "OPTIONS,GET"))
            output = f"# HTTP {status}: {method}; use OPTIONS or GET\n".encode()
        elif environ.get("PATH_INFO") != "/favicon.ico":
            names = parse_qs(environ.get("QUERY_STRING", "")).get("name[]")
            output = registry.render_text(set(names) if names else None)
            headers.append(("Content-Type", CONTENT_TYPE))
            if _gzip_accepted(environ.get("HTTP_ACCEPT_ENCODING", "")):
                # Level 1: the text is repetitive enough that it still shrinks ~15x, at a
                # fraction of the default level's CPU.
                output = gzip.compress(output, compresslevel=1)
                headers.append(("Content-Encoding", "gzip"))
        start_response(status, headers)
        return [output]

    return app
