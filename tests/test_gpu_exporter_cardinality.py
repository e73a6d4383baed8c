"""Bounded cardinality: at most 30 series per GPU by default, without losing a series that a
generated rule or panel reads, and the full detail behind flags."""

from __future__ import annotations

import collections
import re
import time
from pathlib import Path

from trainsignals.exporters.gpu.collector import SEEDED_XIDS, CollectOptions
from trainsignals.exporters.gpu.fake_backend import FakeBackend, FakeMigInstance, plausible_gpus
from trainsignals.exporters.gpu.server import Exporter, build_exporter
from trainsignals.metrics.gpu_exporter import THROTTLE_REASONS

from .gpu_samples import Samples, scrape, value

ROOT = Path(__file__).resolve().parents[1]
MAX_SERIES_PER_GPU = 30

# Raw exporter series (not `gpu:...` recordings) in what the generator wrote.
_RAW = re.compile(r"(?<![:\w])(trainsignals_gpu_[a-z_]+)(\{[^}]*\})?")
# Series born with an event (an XID, a failed NVML call): present once it happened.
EVENT_BORN = {"trainsignals_gpu_xid_errors_total", "trainsignals_gpu_exporter_nvml_errors_total"}
# Series of MIG GPU instances: only on a GPU in MIG mode.
MIG_ONLY = {
    "trainsignals_gpu_mig_memory_used_bytes",
    "trainsignals_gpu_mig_memory_total_bytes",
    "trainsignals_gpu_mig_sm_active_ratio",
    "trainsignals_gpu_mig_tensor_active_ratio",
}


def node(gpus: int = 8, **options: object) -> tuple[FakeBackend, Exporter]:
    backend = FakeBackend(plausible_gpus(gpus))
    return backend, build_exporter(
        backend, "n", {"training_job": "t"}, options=CollectOptions(**options)
    )


def per_gpu(samples: Samples) -> dict[str, int]:
    counts: collections.Counter[str] = collections.Counter()
    for _name, labels in samples:
        gpu = dict(labels).get("gpu")
        if gpu:
            counts[gpu] += 1
    return dict(counts)


def generated_reads() -> dict[str, set[str]]:
    """Raw exporter series name -> label matchers, over every generated rule file and
    dashboard (promtool test inputs excluded: they are what the rules read, not readers)."""
    reads: dict[str, set[str]] = collections.defaultdict(set)
    files = [*ROOT.glob("alerts/*.rules.yaml"), *ROOT.glob("dashboards/*.json")]
    assert files, "generated files missing"
    for path in files:
        for name, matchers in _RAW.findall(path.read_text().replace('\\"', '"')):
            reads[name].add(matchers)
    return reads


def test_an_8_gpu_node_has_at_most_30_series_per_gpu() -> None:
    _backend, ex = node()
    try:
        scrape(ex)  # GPM activity counts from the second scrape on
        s = scrape(ex)
    finally:
        ex.close()
    counts = per_gpu(s)
    assert len(counts) == 8
    assert max(counts.values()) <= MAX_SERIES_PER_GPU, counts
    assert len(s) - sum(counts.values()) <= 3  # node-level: build info, scrape duration


def test_every_series_a_rule_or_panel_reads_is_served() -> None:
    reads = generated_reads()
    assert "trainsignals_gpu_throttle_active" in reads  # the scan finds what it should
    backend, ex = node(gpus=2)
    try:
        scrape(ex)
        healthy = scrape(ex)
        backend.gpus[1].failing["power"] = "timeout"
        backend.inject_xid(1, 79)
        for _ in range(200):  # the XID thread delivers the event (10 s at most)
            faulty = scrape(ex)
            if value(faulty, "trainsignals_gpu_xid_errors_total", gpu="1", xid="79"):
                break
            time.sleep(0.05)
        backend.gpus[0].mig = [FakeMigInstance(1, "3g.40gb", 40 * 2**30, 2**30, 0.5, 0.25)]
        scrape(ex)  # GPM activity counts from the second scrape on
        mig = scrape(ex)
    finally:
        ex.close()
    served = {n for n, _ in healthy}
    assert set(reads) - EVENT_BORN - MIG_ONLY <= served, set(reads) - EVENT_BORN - MIG_ONLY - served
    assert set(reads) >= MIG_ONLY  # the MIG panels read every one of them
    assert {n for n, _ in mig} >= MIG_ONLY
    assert {n for n, _ in faulty} >= EVENT_BORN
    # Label values the rules select on are there too, on a GPU that is not throttled.
    for matchers in reads["trainsignals_gpu_throttle_active"]:
        if m := re.search(r'reason=~"([^"]+)"', matchers):
            for reason in m.group(1).split("|"):
                assert (
                    value(healthy, "trainsignals_gpu_throttle_active", gpu="0", reason=reason) == 0
                )


def test_a_faulty_nvlink_gets_its_own_series_and_keeps_them() -> None:
    backend, ex = node(gpus=1)
    try:
        s = scrape(ex)
        assert value(s, "trainsignals_gpu_nvlink_links_down", gpu="0") == 0
        assert value(s, "trainsignals_gpu_nvlink_errors_all_links_total", gpu="0") == 0
        assert not [n for n, _ in s if n == "trainsignals_gpu_nvlink_up"]
        backend.gpus[0].nvlink_up[7] = False
        backend.gpus[0].nvlink_errors[(3, "replay")] = 4
        s = scrape(ex)
        assert value(s, "trainsignals_gpu_nvlink_links_down", gpu="0") == 1
        assert value(s, "trainsignals_gpu_nvlink_errors_all_links_total", gpu="0") == 4
        assert value(s, "trainsignals_gpu_nvlink_up", gpu="0", link="7") == 0
        assert value(s, "trainsignals_gpu_nvlink_up", gpu="0", link="3") == 1
        assert value(s, "trainsignals_gpu_nvlink_errors_total", link="3", error_type="replay") == 4
        backend.gpus[0].nvlink_up[7] = True  # it came back: its series stay, now 1
        s = scrape(ex)
    finally:
        ex.close()
    assert value(s, "trainsignals_gpu_nvlink_up", gpu="0", link="7") == 1
    assert value(s, "trainsignals_gpu_nvlink_links_down", gpu="0") == 0
    assert len([n for n, _ in s if n == "trainsignals_gpu_nvlink_up"]) == 2


def test_flags_bring_back_the_full_detail() -> None:
    _backend, ex = node(
        gpus=1, nvlink_per_link=True, all_throttle_reasons=True, seed_xids=SEEDED_XIDS
    )
    try:
        s = scrape(ex)
    finally:
        ex.close()
    names = collections.Counter(n for n, _ in s)
    assert names["trainsignals_gpu_nvlink_up"] == 18
    assert names["trainsignals_gpu_throttle_active"] == len(THROTTLE_REASONS)
    assert names["trainsignals_gpu_xid_errors_total"] == len(SEEDED_XIDS)
    assert value(s, "trainsignals_gpu_xid_errors_total", xid="79") == 0
    assert per_gpu(s)["0"] > 50
