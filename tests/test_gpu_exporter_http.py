"""The exporter over real HTTP(S) on 127.0.0.1, and the CLI's start-up paths."""

from __future__ import annotations

import os
import socket
import ssl
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pynvml
import pytest
from click.testing import CliRunner
from prometheus_client.parser import text_string_to_metric_families

from trainsignals.exporters.gpu.cli import main
from trainsignals.exporters.gpu.fake_backend import FakeBackend, plausible_gpus
from trainsignals.exporters.gpu.nvml_backend import process_name
from trainsignals.exporters.gpu.server import build_registry, serve
from trainsignals.stacks import reaper


def _nvml_works() -> bool:
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError:
        return False
    pynvml.nvmlShutdown()
    return True


# The no-driver paths can only be exercised where there is no driver (these machines).
no_driver = pytest.mark.skipif(_nvml_works(), reason="an NVIDIA driver is present here")


def _ups(text: str) -> dict[str, float]:
    return {
        s.labels["gpu"]: s.value
        for f in text_string_to_metric_families(text)
        for s in f.samples
        if s.name == "trainsignals_gpu_up"
    }


def test_http_endpoint_serves_parseable_metrics() -> None:
    registry = build_registry(FakeBackend(plausible_gpus(3)), "node-a", {"training_job": "t"})
    server = serve(registry, "127.0.0.1", 0)
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{server.port}/metrics", timeout=5) as r:
            assert r.status == 200
            text = r.read().decode()
    finally:
        server.shutdown()
    assert _ups(text) == {"0": 1.0, "1": 1.0, "2": 1.0}
    names = {f.name for f in text_string_to_metric_families(text)}
    assert "trainsignals_gpu_energy_joules" in names
    assert "process_cpu_seconds" not in names  # own registry, no default collectors


def test_https_endpoint_with_tls_flags(tmp_path: Path) -> None:
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(
        [
            "openssl",
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-days",
            "1",
            "-subj",
            "/CN=127.0.0.1",
            "-keyout",
            str(key),
            "-out",
            str(cert),
        ],
        check=True,
        capture_output=True,
        timeout=60,
    )
    registry = build_registry(FakeBackend(plausible_gpus(1)), "n", {})
    server = serve(registry, "127.0.0.1", 0, certfile=str(cert), keyfile=str(key))
    try:
        ctx = ssl.create_default_context(cafile=str(cert))
        ctx.check_hostname = False
        url = f"https://127.0.0.1:{server.port}/metrics"
        with urllib.request.urlopen(url, context=ctx, timeout=5) as r:
            text = r.read().decode()
    finally:
        server.shutdown()
    assert _ups(text) == {"0": 1.0}


@no_driver
def test_cli_without_driver_exits_with_one_clear_line() -> None:
    result = CliRunner().invoke(main, ["--port", "0"])
    assert result.exit_code == 1
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, lines
    assert "nvmlInit failed (library_not_found)" in lines[0]
    assert "libnvidia-ml.so.1" in lines[0]
    assert "--keep-serving-on-init-failure" in lines[0]


def test_cli_rejects_bad_labels_and_gpus() -> None:
    runner = CliRunner()
    bad_label = runner.invoke(main, ["--fake", "1", "--label", "not a label"])
    assert bad_label.exit_code == 2 and "key=value" in bad_label.output
    reserved = runner.invoke(main, ["--fake", "1", "--label", "gpu=3"])
    assert reserved.exit_code == 2 and "sets itself" in reserved.output
    bad_gpus = runner.invoke(main, ["--fake", "1", "--gpus", "0,x"])
    assert bad_gpus.exit_code == 2 and "GPU indices" in bad_gpus.output


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _scrape_process(args: list[str]) -> str:
    """Start the real console entry point, scrape it once, stop it."""
    port = _free_port()
    proc = reaper.spawn(  # dies with the test run, however it ends
        [
            sys.executable,
            "-c",
            "from trainsignals.exporters.gpu.cli import main; main()",
            "--listen-address",
            "127.0.0.1",
            "--port",
            str(port),
            *args,
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**os.environ},
    )
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                url = f"http://127.0.0.1:{port}/metrics"
                with urllib.request.urlopen(url, timeout=2) as r:
                    return r.read().decode()
            except OSError as e:
                if proc.poll() is not None or time.monotonic() > deadline:
                    proc.terminate()
                    _out, err = proc.communicate(timeout=10)
                    raise AssertionError(err.decode()) from e
                time.sleep(0.1)
    finally:
        proc.terminate()
        proc.wait(10)


@no_driver
def test_cli_keep_serving_reports_health_without_driver() -> None:
    text = _scrape_process(
        ["--keep-serving-on-init-failure", "--gpus", "0,1", "--label", "training_job=llama"]
    )
    assert _ups(text) == {"0": 0.0, "1": 0.0}
    errors = [
        s
        for f in text_string_to_metric_families(text)
        for s in f.samples
        if s.name == "trainsignals_gpu_exporter_nvml_errors_total"
    ]
    assert [
        (s.labels["function"], s.labels["error"], s.labels["training_job"], s.value) for s in errors
    ] == [("nvmlInit", "library_not_found", "llama", 1.0)]


def test_cli_fake_serves_n_gpus() -> None:
    text = _scrape_process(["--fake", "2", "--node", "demo"])
    assert _ups(text) == {"0": 1.0, "1": 1.0}
    assert 'node="demo"' in text


def test_process_names_come_from_proc() -> None:
    assert process_name(os.getpid()) == Path(f"/proc/{os.getpid()}/comm").read_text().strip()
    assert process_name(2**22 + 1) == "unknown"  # above pid_max: never a process


def test_cli_detail_flags_reach_the_exporter() -> None:
    runner = CliRunner()
    bad = runner.invoke(main, ["--fake", "1", "--seed-xids", "79,x"])
    assert bad.exit_code == 2 and "XID codes" in bad.output
    reserved = runner.invoke(main, ["--fake", "1", "--label", "GPU_I_ID=3"])
    assert reserved.exit_code == 2 and "sets itself" in reserved.output
    text = _scrape_process(
        ["--fake", "1", "--nvlink-per-link", "--all-throttle-reasons", "--seed-xids", "hardware"]
    )
    names = [s.name for f in text_string_to_metric_families(text) for s in f.samples]
    assert names.count("trainsignals_gpu_nvlink_up") == 18
    assert names.count("trainsignals_gpu_throttle_active") == 9
    assert names.count("trainsignals_gpu_xid_errors_total") == 8
    default = _scrape_process(["--fake", "1", "--no-gpm"])
    assert "trainsignals_gpu_nvlink_up" not in default
    assert "trainsignals_gpu_xid_errors_total" not in default
    assert "trainsignals_gpu_nvlink_links_down" in default
