"""The stock dcgm-exporter page the replay test serves: release counters, labels, committed copy."""

from __future__ import annotations

from prometheus_client.parser import text_string_to_metric_families

from tests.dcgm_page import COUNTERS_CSV, Gpu, default_counters, render

SAMPLE = COUNTERS_CSV.parent / "stock-page-node-0.prom"


def sample_page() -> str:
    return render("node-0", [Gpu(0), Gpu(1, xid=79, uncorrectable_rows=2)])


def test_committed_sample_is_what_the_renderer_writes() -> None:
    # Regenerate: python -c "from tests.test_dcgm_page import *; SAMPLE.write_text(sample_page())"
    assert SAMPLE.read_text(encoding="utf-8") == sample_page()


def test_page_has_every_default_counter_with_release_labels() -> None:
    fields = [name for name, kind, _ in default_counters() if kind != "label"]
    assert "DCGM_FI_PROF_GR_ENGINE_ACTIVE" in fields and len(fields) == 25
    families = {f.name: f for f in text_string_to_metric_families(sample_page())}
    # prometheus_client drops a counter's _total suffix from the family name.
    assert sorted(n.removesuffix("_total") for n in fields) == sorted(families)
    xid = families["DCGM_FI_DEV_XID_ERRORS"].samples[1]
    assert xid.labels == {
        "gpu": "1",
        "UUID": Gpu(1).uuid("node-0"),
        "pci_bus_id": "00000000:38:00.0",
        "device": "nvidia1",
        "modelName": "NVIDIA H100 80GB HBM3",
        "Hostname": "node-0",
        "DCGM_FI_DRIVER_VERSION": "570.133.20",
        "err_code": "79",
        "err_msg": "GPU has fallen off the bus",
    }
    assert xid.value == 79
