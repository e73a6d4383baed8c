"""A node_exporter stand-in per node: the InfiniBand series of its infiniband collector.

Names, labels (`device`, `port`) and state codes as node_exporter's
collector/infiniband_linux.go exports them; the scrape config (file_sd `node.json`) adds `node`
and the job's selector labels, as for the other targets.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from prometheus_client import CollectorRegistry
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

ACTIVE, DOWN = 4, 1  # node_infiniband_state_id
LINK_UP, POLLING = 5, 2  # node_infiniband_physical_state_id
FLAP_PERIOD = 600  # simulated seconds between link-downs of a flapping port
FLAP_DOWN = 30  # simulated seconds each flap stays down
HCAS = 2  # ports per node (mlx5_0 and mlx5_1, port 1 each); the fault hits mlx5_0


@dataclass
class Port:
    state: int = ACTIVE
    physical: int = LINK_UP
    link_downed: int = 0
    link_error_recovery: int = 0
    symbol_errors: int = 0
    errors_received: int = 0

    def go_down(self) -> None:
        if self.state == ACTIVE:
            self.link_downed += 1
        self.state, self.physical = DOWN, POLLING

    def come_up(self) -> None:
        self.state, self.physical = ACTIVE, LINK_UP


class NodeFabric:
    """One node's HCA ports and the registry node_exporter's series are served from."""

    def __init__(self) -> None:
        self.ports = {(f"mlx5_{i}", "1"): Port() for i in range(HCAS)}
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(self)
        self._flaps_seen = 0

    @property
    def faulty(self) -> Port:
        return self.ports[("mlx5_0", "1")]

    def port_down(self) -> None:
        """A pulled cable or a dead switch port: down for good."""
        self.faulty.go_down()

    def flap(self, since_onset: float) -> None:
        """Down for FLAP_DOWN every FLAP_PERIOD, with link-recovery and symbol errors."""
        flaps = int(since_onset // FLAP_PERIOD) + 1
        port = self.faulty
        if flaps > self._flaps_seen:
            self._flaps_seen = flaps
            port.go_down()
            port.link_error_recovery += 3
            port.symbol_errors += 40
            port.errors_received += 5
        if since_onset % FLAP_PERIOD >= FLAP_DOWN:
            port.come_up()

    def collect(self) -> Iterator[Metric]:
        labels = ["device", "port"]
        gauges = {
            "state_id": ("State of the InfiniBand port (4: active)", "state"),
            "physical_state_id": ("Physical state of the port (5: link up)", "physical"),
        }
        counters = {
            "link_downed": ("Times the link went down", "link_downed"),
            "link_error_recovery": ("Times the link recovered from errors", "link_error_recovery"),
            "symbol_error": ("Minor link errors on the lanes", "symbol_errors"),
            "port_errors_received": ("Received packets with an error", "errors_received"),
        }
        for name, (help_, attr) in gauges.items():
            family = GaugeMetricFamily(f"node_infiniband_{name}", help_, labels=labels)
            for (device, port), state in sorted(self.ports.items()):
                family.add_metric([device, port], getattr(state, attr))
            yield family
        for name, (help_, attr) in counters.items():
            family = CounterMetricFamily(f"node_infiniband_{name}", help_, labels=labels)
            for (device, port), state in sorted(self.ports.items()):
                family.add_metric([device, port], getattr(state, attr))
            yield family
