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
RAIL_BYTES = 5e9  # bytes per simulated second each way while the ranks step
RAIL_WAIT = 5e5  # transmit-wait ticks per simulated second meanwhile (a little congestion)
RAIL_RATE = 5e10  # the link rate a port trained at (bytes/s: 4 lanes of NDR, 400 Gb/s)
IDLE_SHARE = 0.001  # what a port still carries in a pause (heartbeats, the rendezvous store)


@dataclass
class Port:
    state: int = ACTIVE
    physical: int = LINK_UP
    link_downed: int = 0
    link_error_recovery: int = 0
    symbol_errors: int = 0
    errors_received: int = 0
    data_transmitted: float = 0.0
    data_received: float = 0.0
    transmit_wait: float = 0.0
    rate: float = RAIL_RATE

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

    def carry(self, seconds: float, busy: bool, slow: tuple[float, float] = (1.0, 1.0)) -> None:
        """`seconds` of traffic on every active port; `slow`: (throughput, transmit wait)
        factors of the faulty port (a degraded link moves less and waits more). A port moving
        less has trained down to the lanes that carry it: half of them, a quarter below 25%."""
        share = 1.0 if busy else IDLE_SHARE
        for key, port in self.ports.items():
            if port.state != ACTIVE:
                continue
            moved, waited = slow if key == ("mlx5_0", "1") else (1.0, 1.0)
            port.rate = RAIL_RATE * (1.0 if moved >= 1 else 0.5 if moved > 0.25 else 0.25)
            data = RAIL_BYTES * share * moved * seconds
            port.data_transmitted += data
            port.data_received += data
            port.transmit_wait += RAIL_WAIT * share * waited * seconds

    def collect(self) -> Iterator[Metric]:
        labels = ["device", "port"]
        gauges = {
            "state_id": ("State of the InfiniBand port (4: active)", "state"),
            "physical_state_id": ("Physical state of the port (5: link up)", "physical"),
            "rate_bytes_per_second": ("Maximum signal transfer rate", "rate"),
        }
        counters = {
            "link_downed": ("Times the link went down", "link_downed"),
            "link_error_recovery": ("Times the link recovered from errors", "link_error_recovery"),
            "symbol_error": ("Minor link errors on the lanes", "symbol_errors"),
            "port_errors_received": ("Received packets with an error", "errors_received"),
            "port_data_transmitted_bytes": ("Data transmitted (bytes)", "data_transmitted"),
            "port_data_received_bytes": ("Data received (bytes)", "data_received"),
            "port_transmit_wait": ("Ticks with data to send but no credits", "transmit_wait"),
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
