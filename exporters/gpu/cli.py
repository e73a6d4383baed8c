"""`trainsignals-gpu-exporter`: serve Prometheus metrics for every GPU of this node."""

from __future__ import annotations

import logging
import re
import signal
import socket
import sys
import time
from types import FrameType

import click

from trainsignals.exporters.gpu.backend import BackendError, GpuBackend
from trainsignals.exporters.gpu.collector import SEEDED_XIDS, CollectOptions
from trainsignals.exporters.gpu.server import DEFAULT_PORT, build_exporter, serve

log = logging.getLogger("trainsignals.exporters.gpu")

_LABEL_NAME = re.compile(r"^[a-zA-Z_][a-zA-Z0-9_]*$")
_RESERVED = {
    "node",
    "gpu",
    "uuid",
    "model",
    "pci_bus_id",
    "reason",
    "error_type",
    "xid",
    "link",
    "fan",
    "pid",
    "process_name",
    "function",
    "error",
    "version",
    "driver_version",
    "nvml_version",
    "GPU_I_ID",
    "GPU_I_PROFILE",
}

# What an nvmlInit failure most likely means, and what to do about it.
_INIT_HINTS = {
    "library_not_found": "libnvidia-ml.so.1 is not installed or not visible (no NVIDIA driver "
    "here, or a container started without the NVIDIA runtime); install the "
    "driver or run the container with --gpus",
    "driver_not_loaded": "the NVIDIA kernel module is not loaded; check `nvidia-smi` and "
    "`lsmod | grep nvidia`",
    "driver_library_mismatch": "the user-space library and the kernel module differ in version; "
    "reboot or reload the nvidia module after a driver upgrade",
    "no_permission": "this user may not open /dev/nvidia*; run as a user in the video group",
}


def _parse_gpus(
    _ctx: click.Context, _param: click.Parameter, value: str | None
) -> list[int] | None:
    if not value:
        return None
    try:
        return sorted({int(part) for part in value.split(",") if part.strip()})
    except ValueError:
        raise click.BadParameter(f"{value!r}: expected GPU indices like 0,1,3") from None


def _parse_xids(_ctx: click.Context, _param: click.Parameter, value: str | None) -> tuple[int, ...]:
    if not value:
        return ()
    if value == "hardware":
        return SEEDED_XIDS
    try:
        return tuple(sorted({int(part) for part in value.split(",") if part.strip()}))
    except ValueError:
        raise click.BadParameter(
            f"{value!r}: expected XID codes like 48,79 or the word hardware"
        ) from None


def _parse_labels(
    _ctx: click.Context, _param: click.Parameter, values: tuple[str, ...]
) -> dict[str, str]:
    labels: dict[str, str] = {}
    for item in values:
        key, sep, val = item.partition("=")
        if not sep or not _LABEL_NAME.match(key) or key.startswith("__"):
            raise click.BadParameter(
                f"{item!r}: expected key=value with a Prometheus label "
                "name as key, e.g. training_job=llama"
            )
        if key in _RESERVED:
            raise click.BadParameter(f"{item!r}: {key!r} is a label the exporter sets itself")
        labels[key] = val
    return labels


def init_failure_message(err: BackendError) -> str:
    hint = _INIT_HINTS.get(err.code, "NVML could not start")
    return (
        f"trainsignals-gpu-exporter: {err.function} failed ({err.code}): {hint}. "
        "Use --fake N for a demo without GPUs, or --keep-serving-on-init-failure to "
        "serve health metrics (up 0) and retry."
    )


def _backend(fake: int | None) -> GpuBackend:
    if fake is not None:
        from trainsignals.exporters.gpu.fake_backend import FakeBackend, plausible_gpus

        return FakeBackend(plausible_gpus(fake))
    from trainsignals.exporters.gpu.nvml_backend import NvmlBackend

    return NvmlBackend()


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.option(
    "--listen-address", default="0.0.0.0", show_default=True, help="Address to serve /metrics on."
)
@click.option(
    "--port",
    type=click.IntRange(0, 65535),
    default=DEFAULT_PORT,
    show_default=True,
    help="Port to serve /metrics on (0 picks a free one).",
)
@click.option(
    "--node",
    default=socket.gethostname,
    show_default="host name",
    help="Value of the `node` label.",
)
@click.option(
    "--gpus",
    callback=_parse_gpus,
    metavar="0,1,...",
    help="NVML indices of the GPUs to export (default: all).",
)
@click.option(
    "--label",
    "labels",
    multiple=True,
    callback=_parse_labels,
    metavar="KEY=VALUE",
    help="Constant label added to every series; repeatable.",
)
@click.option("--no-processes", is_flag=True, help="Skip per-process GPU memory.")
@click.option("--no-nvlink", is_flag=True, help="Skip NVLink state and error counters.")
@click.option(
    "--no-pcie",
    is_flag=True,
    help="Skip PCIe throughput (NVML samples it for 2 x 20 ms per GPU per scrape).",
)
@click.option("--no-gpm", is_flag=True, help="Skip GPM SM and tensor activity (Hopper on).")
@click.option("--no-mig", is_flag=True, help="Skip MIG GPU instances.")
@click.option(
    "--nvlink-per-link",
    is_flag=True,
    help="State and error counters of every NVLink link (default: only of links that were "
    "down or counted errors; per GPU always links down and all errors summed).",
)
@click.option(
    "--all-throttle-reasons",
    is_flag=True,
    help="One series per throttle reason at 0 or 1 (default: the thermal and power reasons "
    "always, the others only while active).",
)
@click.option(
    "--seed-xids",
    callback=_parse_xids,
    metavar="48,79,...|hardware",
    help="XID codes exported at 0 from the start, one series per GPU each ('hardware': "
    + ",".join(map(str, SEEDED_XIDS))
    + "); default none, a code appears when first seen.",
)
@click.option(
    "--tls-cert",
    type=click.Path(exists=True, dir_okay=False),
    help="PEM certificate: serve HTTPS (needs --tls-key).",
)
@click.option(
    "--tls-key",
    type=click.Path(exists=True, dir_okay=False),
    help="PEM private key for --tls-cert.",
)
@click.option(
    "--keep-serving-on-init-failure",
    is_flag=True,
    help="When NVML cannot start, serve up 0 and the error counter, and retry "
    "nvmlInit every --init-retry-seconds, instead of exiting.",
)
@click.option(
    "--init-retry-seconds",
    type=click.FloatRange(min=1),
    default=60.0,
    show_default=True,
    help="Retry interval for a failed nvmlInit.",
)
@click.option(
    "--fake",
    type=click.IntRange(min=1),
    metavar="N",
    help="Serve N fake GPUs with plausible values (demos without a GPU).",
)
@click.option(
    "--log-level",
    type=click.Choice(["debug", "info", "warning", "error"]),
    default="info",
    show_default=True,
)
def main(
    listen_address: str,
    port: int,
    node: str,
    gpus: list[int] | None,
    labels: dict[str, str],
    no_processes: bool,
    no_nvlink: bool,
    no_pcie: bool,
    no_gpm: bool,
    no_mig: bool,
    nvlink_per_link: bool,
    all_throttle_reasons: bool,
    seed_xids: tuple[int, ...],
    tls_cert: str | None,
    tls_key: str | None,
    keep_serving_on_init_failure: bool,
    init_retry_seconds: float,
    fake: int | None,
    log_level: str,
) -> None:
    """Serve Prometheus metrics for the NVIDIA GPUs of this node (NVML via pynvml)."""
    logging.basicConfig(
        level=log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    if bool(tls_cert) != bool(tls_key):
        raise click.UsageError("--tls-cert and --tls-key go together")
    options = CollectOptions(
        processes=not no_processes,
        nvlink=not no_nvlink,
        pcie=not no_pcie,
        gpm=not no_gpm,
        mig=not no_mig,
        nvlink_per_link=nvlink_per_link,
        all_throttle_reasons=all_throttle_reasons,
        seed_xids=seed_xids,
        init_retry_s=init_retry_seconds,
    )
    exporter = build_exporter(_backend(fake), node, labels, gpus, options)
    err = exporter.collector.init_error
    if err is not None and not keep_serving_on_init_failure:
        click.echo(init_failure_message(err), err=True)
        sys.exit(1)
    if err is not None:
        log.warning("%s", init_failure_message(err))
    try:
        server = serve(exporter.registry, listen_address, port, tls_cert, tls_key)
    except OSError as e:
        click.echo(
            f"trainsignals-gpu-exporter: cannot listen on {listen_address}:{port}: {e}", err=True
        )
        sys.exit(1)
    scheme = "https" if tls_cert else "http"
    log.info("serving %s://%s:%d/metrics", scheme, listen_address, server.port)

    # The handler only flips a flag: Event.set() takes a lock the interrupted main thread
    # may hold inside Event.wait(), and Ctrl-C on a process group followed by the parent's
    # SIGTERM deadlocked the exporter that way (a killed test run left it behind).
    stopping: list[int] = []

    def _on_signal(signum: int, _frame: FrameType | None) -> None:
        stopping.append(signum)

    signal.signal(signal.SIGTERM, _on_signal)
    signal.signal(signal.SIGINT, _on_signal)
    while not stopping:
        time.sleep(0.2)
    server.shutdown()
    exporter.close()
