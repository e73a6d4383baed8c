"""The exporter's own text writer says exactly what prometheus_client's generate_latest says.

`/metrics` is written by exposition.TextWriter (cached series prefixes) instead of
prometheus_client; these tests hold it to generate_latest for the same samples, parsed with
prometheus_client's parser (families, types, help, samples, labels, values) and byte for
byte, across fault states and label values that need escaping.
"""

from __future__ import annotations

import gzip
import math
import random
import socket
import urllib.error
import urllib.request
from collections.abc import Iterator

import pytest
from prometheus_client import CollectorRegistry, Gauge, generate_latest
from prometheus_client.core import Metric
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.utils import floatToGoString

from trainsignals.exporters.gpu.collector import CollectOptions
from trainsignals.exporters.gpu.exposition import CONTENT_TYPE, TextWriter, format_value
from trainsignals.exporters.gpu.fake_backend import FakeBackend, FakeGpu
from trainsignals.exporters.gpu.families import Families
from trainsignals.exporters.gpu.server import (
    Exporter,
    ExporterRegistry,
    build_exporter,
    build_registry,
    serve,
)

NASTY = 'py"th\\on\nworker ü'  # quote, backslash, newline and non-ASCII in one label value
CONST = {"training_job": 'llama "70b"\\run\n2', "cluster": "a"}


class _Fixed:
    """A collector that yields one scrape's families, so both writers see the same state."""

    def __init__(self, fams: Families) -> None:
        self.fams = fams

    def collect(self) -> Iterator[Metric]:
        return self.fams.metrics()


def parsed(text: str) -> list[tuple[object, ...]]:
    """Everything the parser reads, in order; NaN as a string so that it equals itself."""
    return [
        (
            fam.name,
            fam.type,
            fam.documentation,
            [
                (s.name, s.labels, "NaN" if math.isnan(s.value) else s.value, s.timestamp)
                for s in fam.samples
            ],
        )
        for fam in text_string_to_metric_families(text)
    ]


def assert_same(fast: bytes, reference: bytes) -> None:
    assert parsed(fast.decode()) == parsed(reference.decode())
    assert fast == reference  # stronger still: the same bytes


def gpu_with_everything(index: int) -> FakeGpu:
    return FakeGpu(
        index=index,
        model='NVIDIA H100 80GB HBM3 \\ "SXM"',
        utilization_ratio=0.93,
        memory_utilization_ratio=0.1 + 0.2,  # 0.30000000000000004: repr, not str rounding
        memory_used_bytes=71 * 2**30,  # large integers: Go-style exponent (8.589934592e+10)
        power_watts=612.25,
        energy_joules=3.6e6,
        temperature_celsius=61.0,
        throttle_reasons={"sw_power_cap"},
        ecc_corrected_total=2**60 + 1,  # beyond float precision, as generate_latest rounds
        nvlink_up=[True, False, True],
        nvlink_errors={(1, "replay"): 7, (1, "crc_flit"): 2, (2, "recovery"): 1},
        fan_speed_ratios=[0.3, 1e-7],
        processes=[(4000, NASTY, 70 * 2**30), (4001, "\\", 0), (4002, "", 1)],
    )


@pytest.fixture
def exporter() -> Iterator[Exporter]:
    backend = FakeBackend([gpu_with_everything(i) for i in range(4)], driver_version='5"6\\0')
    ex = build_exporter(
        backend,
        'node "a"\\b',
        CONST,
        options=CollectOptions(init_retry_s=0.0, xid_poll_s=0.05),
    )
    yield ex
    ex.close()


def _mutations(backend: FakeBackend) -> Iterator[str]:
    """Fault states, one after another on the same exporter (so prefix caches carry over)."""
    g = backend.gpus
    yield "healthy"
    g[0].utilization_ratio = math.nan
    g[0].power_watts = math.inf
    g[0].temperature_celsius = -math.inf
    g[0].memory_reserved_bytes = -1
    g[1].energy_joules = 1e22
    yield "NaN and infinities"
    g[1].lost = True
    yield "GPU 1 lost (identity known, metrics absent, errors counted)"
    g[2].failing = {"utilization": "timeout", "fan_speeds": "not_supported"}
    g[3].failing = {"processes": "no_permission", "nvlink": "unknown"}
    yield "core query times out, fans not supported, other queries fail"
    g[0].processes = [(5000, 'new "proc"\n', 1), (4000, NASTY, 2)]
    g[3].processes = []
    g[3].failing = {}
    yield "processes come and go"
    g[1].lost = False
    g[2].failing = {}
    backend.inject_xid(0, 79)
    backend.inject_xid(2, 13)  # an unseeded XID appears when first seen
    yield "GPU 1 back, XIDs"


def test_format_value_is_float_to_go_string() -> None:
    values: list[float] = [
        0, 0.0, -0.0, 1, True, False, -1, 0.5, 1e-7, 5e-324, 1e16, 1e22, 123456.7,
        1234567.0, 12345678.9, -12345678.9, 2**53 + 1, 2**64, 80 * 2**30, 1.98e9,
        math.inf, -math.inf, math.nan, 1.7976931348623157e308,
    ]  # fmt: skip
    rng = random.Random(7)
    values += [rng.uniform(-1e12, 1e12) for _ in range(2000)]
    values += [10 ** rng.uniform(-12, 20) for _ in range(2000)]
    values += [rng.randrange(0, 2**63) for _ in range(500)]
    for v in values:
        assert format_value(v) == floatToGoString(v), v


def test_fast_writer_equals_generate_latest_across_fault_states(exporter: Exporter) -> None:
    backend = exporter.collector.backend
    assert isinstance(backend, FakeBackend)
    writer = TextWriter(exporter.collector.const_labels)  # one writer: caches carry over
    for state in _mutations(backend):
        for _ in range(2):  # the second scrape of a state is served from the prefix cache
            fams = exporter.collector.scrape()
            fast, reference = writer.write(fams), generate_latest(_Fixed(fams))
            assert_same(fast, reference)
        text = fast.decode()
        assert "trainsignals_gpu_up" in text, state
    # the states above did reach the text: escaped label values, NaN, lost GPU, errors
    assert 'process_name="new \\"proc\\"\\n"' in text
    assert 'training_job="llama \\"70b\\"\\\\run\\n2"' in text
    samples = {
        (s.name, s.labels.get("gpu"), s.labels.get("xid")): s.value
        for fam in text_string_to_metric_families(text)
        for s in fam.samples
    }
    assert samples["trainsignals_gpu_xid_errors_total", "2", "13"] == 1
    assert math.isnan(samples["trainsignals_gpu_utilization_ratio", "0", None])


def test_lost_gpu_state_is_exposed_identically(exporter: Exporter) -> None:
    backend = exporter.collector.backend
    assert isinstance(backend, FakeBackend)
    backend.gpus[3].lost = True  # lost before its identity was ever read: empty uuid/model
    fams = exporter.collector.scrape()
    fast = TextWriter(exporter.collector.const_labels).write(fams)
    assert_same(fast, generate_latest(_Fixed(fams)))
    assert b'gpu="3",model="",node="node \\"a\\"\\\\b",training_job=' in fast


def test_no_driver_state_is_exposed_identically() -> None:
    backend = FakeBackend([], init_error="library_not_found")
    ex = build_exporter(backend, "n", {"training_job": "x"}, gpu_indices=[0, 1])
    try:
        fams = ex.collector.scrape()
        assert_same(
            TextWriter(ex.collector.const_labels).write(fams), generate_latest(_Fixed(fams))
        )
    finally:
        ex.close()


def test_registry_render_text_equals_generate_latest_end_to_end(exporter: Exporter) -> None:
    # Two scrapes differ only in the scrape duration, which is therefore zeroed here.
    def steady(text: bytes) -> list[tuple[object, ...]]:
        return [
            f
            for f in parsed(text.decode())
            if f[0] != "trainsignals_gpu_exporter_scrape_duration_seconds"
        ]

    assert isinstance(exporter.registry, ExporterRegistry)
    exporter.registry.render_text()  # GPM activity is there from the second scrape on
    assert steady(exporter.registry.render_text()) == steady(generate_latest(exporter.registry))


def test_series_cache_forgets_series_that_went_away(exporter: Exporter) -> None:
    backend = exporter.collector.backend
    assert isinstance(backend, FakeBackend)
    name = "trainsignals_gpu_process_memory_used_bytes"
    for pid in range(100):  # short-lived processes, one per scrape
        backend.gpus[0].processes = [(pid, "p", 1)]
        exporter.registry.render_text()
    # private, but the point of the test: the cache holds the latest scrape's series only
    prefixes = exporter.collector._writer._families[name].prefixes
    assert len(prefixes) == 1 + 3 * 3  # GPU 0's last process, GPUs 1-3 three each


def _get(url: str, **headers: str) -> tuple[int, dict[str, str], bytes]:
    request = urllib.request.Request(url, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=5) as r:
            return r.status, dict(r.headers), r.read()
    except urllib.error.HTTPError as e:
        return e.code, dict(e.headers), e.read()


def test_http_serves_the_fast_writer_with_the_text_content_type(exporter: Exporter) -> None:
    server = serve(exporter.registry, "127.0.0.1", 0)
    base = f"http://127.0.0.1:{server.port}"
    try:
        # Prometheus prefers OpenMetrics; the exporter answers in text 0.0.4, which it takes.
        accept = "application/openmetrics-text;version=1.0.0;q=0.5,text/plain;version=0.0.4;q=0.3"
        status, headers, body = _get(f"{base}/metrics", Accept=accept)
        assert status == 200
        assert headers["Content-Type"] == CONTENT_TYPE == "text/plain; version=0.0.4; charset=utf-8"
        assert "# EOF" not in body.decode()
        status, headers, zipped = _get(f"{base}/metrics", **{"Accept-Encoding": "gzip"})
        assert headers["Content-Encoding"] == "gzip"
        assert parsed(gzip.decompress(zipped).decode())[0][:3] == parsed(body.decode())[0][:3]
        query = "name[]=trainsignals_gpu_up&name[]=trainsignals_gpu_energy_joules_total"
        _, _, only = _get(f"{base}/metrics?{query}")  # sample names, as prometheus_client
        names = {f[0] for f in parsed(only.decode())}
        assert names == {"trainsignals_gpu_up", "trainsignals_gpu_energy_joules"}
        assert _get(f"{base}/favicon.ico")[2] == b""
        post = urllib.request.Request(f"{base}/metrics", data=b"", method="POST")
        with pytest.raises(urllib.error.HTTPError) as err:
            urllib.request.urlopen(post, timeout=5)
        assert err.value.code == 405
    finally:
        server.shutdown()


def test_a_stalled_client_does_not_block_the_next_scrape(exporter: Exporter) -> None:
    server = serve(exporter.registry, "127.0.0.1", 0)
    try:
        # connects and never sends a request: holds one worker until its socket timeout
        with socket.create_connection(("127.0.0.1", server.port)):
            status, _, body = _get(f"http://127.0.0.1:{server.port}/metrics")
    finally:
        server.shutdown()
    assert status == 200 and b"trainsignals_gpu_up" in body


def test_other_collectors_in_the_registry_are_still_served() -> None:
    registry = build_registry(FakeBackend([FakeGpu(0)]), "n", {})
    assert isinstance(registry, CollectorRegistry)
    Gauge("extra_gauge", "A collector a caller added.", registry=registry).set(3)
    server = serve(registry, "127.0.0.1", 0)
    try:
        _, _, body = _get(f"http://127.0.0.1:{server.port}/metrics")
    finally:
        server.shutdown()
    names = {f[0] for f in parsed(body.decode())}
    assert {"extra_gauge", "trainsignals_gpu_up"} <= names


def test_plain_registries_are_served_by_prometheus_client() -> None:
    registry = CollectorRegistry()
    Gauge("plain_gauge", "Not the exporter's.", registry=registry).set(1)
    server = serve(registry, "127.0.0.1", 0)
    try:
        _, _, body = _get(f"http://127.0.0.1:{server.port}/metrics")
    finally:
        server.shutdown()
    assert body == generate_latest(registry)
