"""A stock dcgm-exporter /metrics page, rendered the way release 4.5.3-4.8.2 renders it.

Fields: every uncommented row of its `etc/default-counters.csv` (copied into
tests/fixtures/dcgm-exporter/); `DCGM_FI_DRIVER_VERSION` is a label there, not a metric.
Format: its `internal/pkg/rendermetrics/render_metrics.go` template, labels in its order
(gpu, UUID, pci_bus_id, device, modelName, Hostname, then the label fields and the attributes,
each sorted): `err_code`/`err_msg` on DCGM_FI_DEV_XID_ERRORS (`gpu_collector.go`; messages
from `xid_errors.go`), `pod`/`namespace`/`container` when it maps GPUs to Kubernetes pods.
Values: integer fields as `%d`, DOUBLE fields (power, the PROF ratios) as Go's `%f`.
After NVIDIA/dcgm-exporter#655 (not in a release yet) the host label is `hostname`.
MIG: a GPU with instances is rendered per GPU instance only (as NVIDIA/dcgm-exporter#561
reports), GPU_I_PROFILE and GPU_I_ID after modelName as the template places them; GPU-wide
fields repeat the GPU's value on every instance, DCGM_FI_DEV_GPU_UTIL is absent (NVML has no
utilization in MIG mode), framebuffer and PROF_* fields are the instance's own.
"""

from __future__ import annotations

import csv
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

COUNTERS_CSV = Path(__file__).parent / "fixtures" / "dcgm-exporter" / "default-counters.csv"
DRIVER = "570.133.20"
MODEL = "NVIDIA H100 80GB HBM3"
FB_TOTAL_MIB = 81559
FB_RESERVED_MIB = 559
# dcgm-exporter's err_msg for the codes used here (internal/pkg/collector/xid_errors.go).
XID_MESSAGES = {
    0: "No Error",
    13: "Graphics Engine Exception",
    48: "Double Bit ECC Error",
    79: "GPU has fallen off the bus",
}
# DCGM field types (dcgm_fields.h): these are DOUBLE, the others INT64.
DOUBLE_FIELDS = frozenset(
    {
        "DCGM_FI_DEV_POWER_USAGE",
        "DCGM_FI_PROF_GR_ENGINE_ACTIVE",
        "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE",
        "DCGM_FI_PROF_DRAM_ACTIVE",
    }
)


def default_counters() -> list[tuple[str, str, str]]:
    """(field, Prometheus type, help) of every uncommented row, in file order."""
    rows = []
    with COUNTERS_CSV.open(encoding="utf-8") as f:
        for row in csv.reader(f, skipinitialspace=True):
            if not row or row[0].lstrip().startswith("#"):
                continue
            name, kind, help_ = (c.strip() for c in (row[0], row[1], ",".join(row[2:])))
            rows.append((name, kind, help_))
    return rows


@dataclass
class MigInstance:
    """One MIG GPU instance's own readings (MiB, ratios)."""

    gpu_instance_id: int
    profile: str
    fb_used: int
    fb_free: int
    gr_active: float
    tensor_active: float = 0.0

    def values(self) -> dict[str, float]:
        return {
            "DCGM_FI_DEV_FB_USED": self.fb_used,
            "DCGM_FI_DEV_FB_FREE": self.fb_free,
            "DCGM_FI_DEV_FB_RESERVED": 0,
            "DCGM_FI_PROF_GR_ENGINE_ACTIVE": self.gr_active,
            "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE": self.tensor_active,
            "DCGM_FI_PROF_DRAM_ACTIVE": 0.0,
        }


@dataclass
class Gpu:
    """One GPU's readings, in dcgm-exporter's units (percent, MiB, MHz, W, C, ratios)."""

    index: int
    util: int = 97
    fb_used: int = 62000
    temp: int = 64
    memory_temp: int = 58
    sm_clock: int = 1980
    power: float = 612.5
    gr_active: float = 0.93
    tensor_active: float = 0.41
    dram_active: float = 0.37
    xid: int = 0
    uncorrectable_rows: int = 0
    correctable_rows: int = 0
    row_remap_failure: int = 0
    pod: dict[str, str] = field(default_factory=dict)  # pod/namespace/container on Kubernetes
    mig: list[MigInstance] = field(default_factory=list)  # non-empty: MIG mode on

    def uuid(self, node: str) -> str:
        seed = sum(map(ord, node)) * 131 + self.index
        return f"GPU-{seed:08x}-1f2e-4d3c-8b9a-{seed * 7919:012x}"

    def values(self) -> dict[str, float]:
        return {
            "DCGM_FI_DEV_SM_CLOCK": self.sm_clock,
            "DCGM_FI_DEV_MEM_CLOCK": 2619,
            "DCGM_FI_DEV_MEMORY_TEMP": self.memory_temp,
            "DCGM_FI_DEV_GPU_TEMP": self.temp,
            "DCGM_FI_DEV_POWER_USAGE": self.power,
            "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION": 912_345_678_901 + self.index,
            "DCGM_FI_DEV_PCIE_REPLAY_COUNTER": 0,
            "DCGM_FI_DEV_GPU_UTIL": self.util,
            "DCGM_FI_DEV_MEM_COPY_UTIL": 38,
            "DCGM_FI_DEV_ENC_UTIL": 0,
            "DCGM_FI_DEV_DEC_UTIL": 0,
            "DCGM_FI_DEV_XID_ERRORS": self.xid,
            "DCGM_FI_DEV_FB_FREE": FB_TOTAL_MIB - FB_RESERVED_MIB - self.fb_used,
            "DCGM_FI_DEV_FB_USED": self.fb_used,
            "DCGM_FI_DEV_FB_RESERVED": FB_RESERVED_MIB,
            "DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL": 48_213_904_117 + self.index,
            "DCGM_FI_DEV_VGPU_LICENSE_STATUS": 0,
            "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS": self.uncorrectable_rows,
            "DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS": self.correctable_rows,
            "DCGM_FI_DEV_ROW_REMAP_FAILURE": self.row_remap_failure,
            "DCGM_FI_PROF_GR_ENGINE_ACTIVE": self.gr_active,
            "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE": self.tensor_active,
            "DCGM_FI_PROF_DRAM_ACTIVE": self.dram_active,
            "DCGM_FI_PROF_PCIE_TX_BYTES": 1_204_331_008,
            "DCGM_FI_PROF_PCIE_RX_BYTES": 2_311_004_160,
        }


def _labels(
    node: str, gpu: Gpu, field_name: str, host_label: str, mig: MigInstance | None = None
) -> str:
    parts = [
        ("gpu", str(gpu.index)),
        ("UUID", gpu.uuid(node)),
        ("pci_bus_id", f"00000000:{0x18 + 0x20 * gpu.index:02X}:00.0"),
        ("device", f"nvidia{gpu.index}"),
        ("modelName", MODEL),
    ]
    if mig is not None:
        parts += [("GPU_I_PROFILE", mig.profile), ("GPU_I_ID", str(mig.gpu_instance_id))]
    parts += [(host_label, node), ("DCGM_FI_DRIVER_VERSION", DRIVER)]
    attributes = dict(gpu.pod)
    if field_name == "DCGM_FI_DEV_XID_ERRORS":
        attributes |= {"err_code": str(gpu.xid), "err_msg": XID_MESSAGES[gpu.xid]}
    parts += sorted(attributes.items())
    return ",".join(f'{k}="{v}"' for k, v in parts)


def render(node: str, gpus: list[Gpu], host_label: str = "Hostname") -> str:
    """The node's page: HELP and TYPE per field, then one line per GPU."""
    lines = []
    for name, kind, help_ in default_counters():
        if kind == "label":
            continue
        lines += [f"# HELP {name} {help_}", f"# TYPE {name} {kind}"]
        for gpu in gpus:
            instances: list[MigInstance | None] = list(gpu.mig) or [None]
            for mig in instances:
                if mig is not None and name == "DCGM_FI_DEV_GPU_UTIL":
                    continue
                value = (mig.values() if mig else {}).get(name, gpu.values()[name])
                text = f"{value:f}" if name in DOUBLE_FIELDS else f"{int(value)}"
                lines.append(f"{name}{{{_labels(node, gpu, name, host_label, mig)}}} {text}")
    return "\n".join(lines) + "\n"


class DcgmPages:
    """Serves each node's current page at /<node> on 127.0.0.1 (dcgm-exporter serves
    /metrics; one path per node lets one server play several); `set()` swaps a node's GPUs.
    `host_labels` names each node's host label (dcgm-exporter releases differ)."""

    def __init__(self, host_labels: dict[str, str]) -> None:
        self.host_labels = host_labels
        self.gpus: dict[str, list[Gpu]] = {}
        self._lock = threading.Lock()
        pages = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                node = self.path.strip("/").split("/")[0]
                with pages._lock:
                    body = render(node, pages.gpus[node], pages.host_labels[node]).encode()
                try:
                    self.send_response(200)
                    self.send_header("Content-Type", "text/plain; version=0.0.4")
                    self.end_headers()
                    self.wfile.write(body)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # Prometheus stopped mid-scrape at teardown

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.address = f"127.0.0.1:{self.server.server_address[1]}"
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def set(self, node: str, gpus: list[Gpu]) -> None:
        with self._lock:
            self.gpus[node] = gpus

    def __enter__(self) -> DcgmPages:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()
