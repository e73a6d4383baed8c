"""The Prometheus collector: asks the backend about every GPU at scrape time.

One scrape calls each backend method at most once per GPU. A GPU that answers gpu_is_lost is
skipped for the rest of the scrape (`up` 0); a method a model lacks is remembered and never
asked again; any other failure drops that metric for that GPU and counts an error.
Concurrent scrapes are serialised by a lock, so NVML sees one collection at a time.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Collection, Iterator
from dataclasses import dataclass
from importlib.metadata import PackageNotFoundError, version
from typing import Any

from prometheus_client.core import Metric
from prometheus_client.registry import Collector

from trainsignals.exporters.gpu.backend import (
    GPU_IS_LOST,
    NVML_FUNCTIONS,
    UNKNOWN,
    UNSUPPORTED_CODES,
    BackendError,
    GpuBackend,
    Identity,
    NvLink,
)
from trainsignals.exporters.gpu.errors import ErrorTracker
from trainsignals.exporters.gpu.exposition import TextWriter
from trainsignals.exporters.gpu.families import Families
from trainsignals.exporters.gpu.xid import XidWatcher
from trainsignals.metrics.gpu_exporter import (
    POWER_THROTTLE_REASONS,
    THERMAL_THROTTLE_REASONS,
    THROTTLE_REASONS,
)

log = logging.getLogger("trainsignals.exporters.gpu")

# A failure of one of these makes `up` 0; others only drop their own metric.
CORE_METHODS = frozenset({"identity", "utilization", "memory", "power", "temperature"})

# Hardware XIDs worth exporting at 0 from the start (`--seed-xids`), so a first occurrence is
# an increase(): double-bit ECC (48), row remapping (63, 64), NVLink (74), fallen off the bus
# (79), contained / uncontained ECC (94, 95), GSP (119). Off by default: each seeded code costs
# a series per GPU, and the recording rules also count a series that is born (see
# generator/signals/gpu_sources.py, `_xid_seen`), so codes appear when first seen.
SEEDED_XIDS = (48, 63, 64, 74, 79, 94, 95, 119)

# Throttle reasons exported at 0 too: alerts and panels take their share of time.
ALWAYS_THROTTLE_REASONS = frozenset(THERMAL_THROTTLE_REASONS + POWER_THROTTLE_REASONS)

NO_IDENTITY = Identity(uuid="", model="", pci_bus_id="")

P = "trainsignals_gpu_"


@dataclass(frozen=True)
class CollectOptions:
    processes: bool = True
    nvlink: bool = True
    pcie: bool = True
    gpm: bool = True
    mig: bool = True
    # Bounded cardinality (30 series per busy H100 GPU): set these for the full detail.
    nvlink_per_link: bool = False  # every link's state and counters, not only faulty links
    all_throttle_reasons: bool = False  # every reason at 0 or 1, not only alerted or active
    seed_xids: tuple[int, ...] = ()  # XID codes exported at 0 from the start
    init_retry_s: float = 60.0  # how often to retry nvmlInit after it failed
    xid_poll_s: float = 0.5


class _Lost(Exception):
    """The GPU answered gpu_is_lost: stop asking it anything this scrape."""


def _package_version() -> str:
    try:
        return version("trainsignals")
    except PackageNotFoundError:
        return "unknown"


class GpuCollector(Collector):
    def __init__(
        self,
        backend: GpuBackend,
        node: str,
        const_labels: dict[str, str] | None = None,
        gpu_indices: list[int] | None = None,
        options: CollectOptions | None = None,
    ) -> None:
        self.backend = backend
        self.node = node
        self.const_labels = dict(const_labels or {})
        self.options = options or CollectOptions()
        self.errors = ErrorTracker()
        self.init_error: BackendError | None = None
        self._requested = list(gpu_indices) if gpu_indices is not None else None
        self._indices: list[int] = []
        self._identities: dict[int, Identity] = {}
        self._versions = ("", "")
        # Read once: importlib.metadata scans sys.path (~0.3 ms), and it cannot change
        # while the process runs.
        self._package_version = _package_version()
        # (node, gpu, uuid, model) per GPU, built when its identity is first read.
        self._gpu_labels: dict[int, tuple[str, str, str, str]] = {}
        self._writer = TextWriter(self.const_labels)
        self._ready = False
        self._last_init = 0.0
        self._lock = threading.Lock()
        self._xid: XidWatcher | None = None
        self._core_failed = False
        self._nvlink_shown: set[tuple[int, int]] = set()  # (GPU, link) once down or erroring
        self._seeded_xids = frozenset(self.options.seed_xids)
        self._init()

    # --- lifecycle -----------------------------------------------------------------------
    def _init(self) -> None:
        """nvmlInit once; after a failure, retried at most every init_retry_s at scrape."""
        self._last_init = time.monotonic()
        try:
            self.backend.init()
            count = self.backend.device_count()
        except BackendError as e:
            self.init_error = e
            self.errors.record("", "init", e)
            return
        wanted = self._requested if self._requested is not None else list(range(count))
        missing = [i for i in wanted if not 0 <= i < count]
        if missing:
            log.error("GPUs %s requested but NVML sees %d GPUs; ignoring them", missing, count)
        self._indices = [i for i in wanted if 0 <= i < count]
        self._versions = (
            self._version(self.backend.driver_version),
            self._version(self.backend.nvml_version),
        )
        self.init_error = None
        self._ready = True
        self._xid = XidWatcher(
            self.backend, lambda e: self.errors.record("", "wait_xid", e), self.options.xid_poll_s
        )
        self._xid.start()
        log.info("NVML ready: driver %s, exporting GPUs %s", self._versions[0], self._indices)

    @staticmethod
    def _version(read: Callable[[], str]) -> str:
        try:
            return read()
        except Exception:  # build info is best effort
            return ""

    @property
    def gpu_indices(self) -> list[int]:
        return list(self._indices)

    def close(self) -> None:
        if self._xid:
            self._xid.stop()
        if self._ready:
            try:
                self.backend.shutdown()
            except Exception:
                log.debug("NVML shutdown failed", exc_info=True)

    # --- scrape --------------------------------------------------------------------------
    def collect(self) -> Iterator[Metric]:
        """prometheus_client's entry point (registry users, `generate_latest`)."""
        yield from self.scrape().metrics()

    def scrape(self) -> Families:
        """One collection: ask the backend about every GPU."""
        with self._lock:
            return self._scrape()

    def render_text(self, names: Collection[str] | None = None) -> bytes:
        """One collection in the Prometheus text format (0.0.4), what /metrics serves;
        `names` keeps only those families (sample names, as `?name[]=` gives them)."""
        with self._lock:  # the writer's series cache is not thread-safe
            return self._writer.write(self._scrape(), names)

    def _scrape(self) -> Families:
        start = time.perf_counter()
        if not self._ready and time.monotonic() - self._last_init >= self.options.init_retry_s:
            self._init()
        fams = Families(self.const_labels)
        if self._ready:
            for index in self._indices:
                self._collect_gpu(index, fams)
            self._collect_xids(fams)
        else:  # no NVML: say so per requested GPU (or once, gpu="")
            for gpu in [str(i) for i in self._requested or []] or [""]:
                fams.add(P + "up", (self.node, gpu, "", ""), 0)
        for (gpu, function, code), n in self.errors.counts():
            fams.add(P + "exporter_nvml_errors_total", (self.node, gpu, function, code), n)
        fams.add(P + "exporter_build_info", (self.node, self._package_version, *self._versions), 1)
        fams.add(P + "exporter_scrape_duration_seconds", (self.node,), time.perf_counter() - start)
        return fams

    def _call(self, index: int, method: str, *, skip: bool = False) -> Any:
        """One backend query; None when it failed or is not supported (metric absent)."""
        gpu = str(index)
        if skip or self.errors.is_unsupported(gpu, method):
            return None
        try:
            value = getattr(self.backend, method)(index)
        except BackendError as e:
            err = e
        except Exception as e:  # never let a backend bug fail the scrape
            err = BackendError(NVML_FUNCTIONS.get(method, method), UNKNOWN, repr(e))
        else:
            self.errors.ok(gpu, method)
            return value
        self.errors.record(gpu, method, err)
        if err.code == GPU_IS_LOST:
            raise _Lost
        if method in CORE_METHODS and err.code not in UNSUPPORTED_CODES:
            self._core_failed = True
        return None

    def _collect_gpu(self, index: int, fams: Families) -> None:
        self._core_failed = False
        ident = self._identities.get(index)
        labels = self._gpu_labels.get(index) or (self.node, str(index), "", "")
        try:
            if ident is None:
                ident = self._call(index, "identity")
                if ident is not None:
                    self._identities[index] = ident
                    self._gpu_labels[index] = (self.node, str(index), ident.uuid, ident.model)
                    labels = self._gpu_labels[index]
            fams.add(P + "info", (*labels, (ident or NO_IDENTITY).pci_bus_id), 1)
            self._collect_values(index, labels, fams)
        except _Lost:
            self._core_failed = True
        fams.add(P + "up", labels, 0 if self._core_failed else 1)

    def _collect_values(
        self, index: int, labels: tuple[str, str, str, str], fams: Families
    ) -> None:
        call, opts = self._call, self.options

        def gauge(name: str, value: float | None, *extra: str) -> None:
            if value is not None:
                fams.add(P + name, (*labels, *extra), value)

        if (util := call(index, "utilization")) is not None:
            gauge("utilization_ratio", util[0])
            gauge("memory_utilization_ratio", util[1])
        if (mem := call(index, "memory")) is not None:
            gauge("memory_used_bytes", mem.used_bytes)
            gauge("memory_total_bytes", mem.total_bytes)
            gauge("memory_reserved_bytes", mem.reserved_bytes)
        gauge("power_watts", call(index, "power"))
        gauge("power_limit_watts", call(index, "power_limit"))
        gauge("energy_joules_total", call(index, "energy"))
        gauge("temperature_celsius", call(index, "temperature"))
        if (clk := call(index, "clocks")) is not None:
            gauge("sm_clock_hertz", clk.sm_hertz)
            gauge("memory_clock_hertz", clk.memory_hertz)
        if (mx := call(index, "max_clocks")) is not None:
            gauge("sm_clock_max_hertz", mx.sm_hertz)
            gauge("memory_clock_max_hertz", mx.memory_hertz)
        if (gpm := call(index, "gpm", skip=not opts.gpm)) is not None:
            gauge("sm_active_ratio", gpm.sm_active)
            gauge("tensor_active_ratio", gpm.tensor_active)
        if (active := call(index, "throttle_reasons")) is not None:
            for reason in THROTTLE_REASONS:
                if reason in active:
                    gauge("throttle_active", 1, reason)
                elif opts.all_throttle_reasons or reason in ALWAYS_THROTTLE_REASONS:
                    gauge("throttle_active", 0, reason)
        if (ecc := call(index, "ecc_errors")) is not None:
            gauge("ecc_errors_total", ecc[0], "corrected")
            gauge("ecc_errors_total", ecc[1], "uncorrected")
        if (rows := call(index, "remapped_rows")) is not None:
            gauge("remapped_rows_pending", int(rows[0]))
            gauge("remapped_rows_failed", int(rows[1]))
        if (pcie := call(index, "pcie_throughput", skip=not opts.pcie)) is not None:
            gauge("pcie_transmit_bytes_per_second", pcie[0])
            gauge("pcie_receive_bytes_per_second", pcie[1])
        if (links := call(index, "nvlink", skip=not opts.nvlink)) is not None:
            self._nvlink(index, links, gauge)
        for fan, ratio in enumerate(call(index, "fan_speeds") or ()):
            gauge("fan_speed_ratio", ratio, str(fan))
        for proc in call(index, "processes", skip=not opts.processes) or ():
            gauge("process_memory_used_bytes", proc.used_bytes, str(proc.pid), proc.name)
        for mig in call(index, "mig_instances", skip=not opts.mig) or ():
            ids = (str(mig.gpu_instance_id), mig.profile)
            gauge("mig_memory_used_bytes", mig.memory_used_bytes, *ids)
            gauge("mig_memory_total_bytes", mig.memory_total_bytes, *ids)
            if mig.activity is not None:
                gauge("mig_sm_active_ratio", mig.activity.sm_active, *ids)
                gauge("mig_tensor_active_ratio", mig.activity.tensor_active, *ids)

    def _nvlink(self, index: int, links: list[NvLink], gauge: Callable[..., None]) -> None:
        """Per GPU: links down and all error counts summed. Per link only for a link that
        has been down or counted errors since start (it stays, so its counters keep a
        history), or for every link with nvlink_per_link: 18 links x 5 series on Hopper."""
        gauge("nvlink_links_down", sum(not link.up for link in links))
        gauge("nvlink_errors_all_links_total", sum(sum(link.errors.values()) for link in links))
        shown = self._nvlink_shown
        for link in links:
            key = (index, link.link)
            if key not in shown and (not link.up or any(link.errors.values())):
                shown.add(key)
            if key in shown or self.options.nvlink_per_link:
                gauge("nvlink_up", int(link.up), str(link.link))
                for error_type, n in link.errors.items():
                    gauge("nvlink_errors_total", n, str(link.link), error_type)

    def _collect_xids(self, fams: Families) -> None:
        seen: dict[int, dict[int, int]] = {}  # GPU -> xid -> count, one pass over the counts
        for (index, xid), n in (self._xid.counts() if self._xid else {}).items():
            seen.setdefault(index, {})[xid] = n
        for index in self._indices:
            labels = self._gpu_labels.get(index) or (self.node, str(index), "", "")
            counts = seen.get(index, {})
            for xid in sorted(self._seeded_xids | counts.keys()):
                fams.add(P + "xid_errors_total", (*labels, str(xid)), counts.get(xid, 0))
