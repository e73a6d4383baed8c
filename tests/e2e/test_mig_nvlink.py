"""MIG GPU instances and NVLink errors through real Prometheus, from both GPU sources.

One node per source, two GPUs each: GPU 0 whole, GPU 1 in MIG mode with two GPU instances.
The own exporter runs on the fake backend (which models MIG as NVML reports it); dcgm-exporter
is a stock page (tests/dcgm_page.py) where the MIG GPU appears only as its instances. The
dashboard's MIG panels must return one series per instance with that instance's ratios, and
the whole-GPU series must count each GPU once (no instance mixed in, the MIG GPU still
present). NVLink: errors counted on one GPU of the own exporter show on the NVLink panel.
"""

from __future__ import annotations

import json
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.conftest import JOBS, TOPOLOGY_GROUP, require_tool
from tests.dcgm_page import DcgmPages, Gpu, MigInstance
from trainsignals.exporters.gpu.fake_backend import FakeBackend, FakeGpu, FakeMigInstance
from trainsignals.exporters.gpu.server import build_exporter, serve
from trainsignals.generator.dashboards.kit import panel_queries
from trainsignals.generator.loader import load_specs
from trainsignals.generator.signals.panels import PANEL_IDS
from trainsignals.generator.spec.job import JobSpec
from trainsignals.simulator.job import effective_spec
from trainsignals.stacks.stack import Stack, job_files

pytestmark = [pytest.mark.e2e, pytest.mark.xdist_group(TOPOLOGY_GROUP)]

SCALE = 60  # the NVLink rate's 5m window becomes 5 s
GIB = 2**30
OWN, DCGM = "e2e-mig", "e2e-mig-dcgm"
# (GPU_I_ID, GPU_I_PROFILE) -> memory used ratio, busy, tensor
OWN_INSTANCES = {("5", "3g.40gb"): (0.75, 0.5, 0.25), ("13", "1g.10gb"): (0.1, 0.125, 0.0)}
DCGM_INSTANCES = {("1", "3g.40gb"): (0.75, 0.6, 0.3), ("2", "4g.40gb"): (0.125, 0.2, 0.1)}


def spec_for(name: str, source: str) -> JobSpec:
    base = load_specs([JOBS / "minimal.yaml"])[0]
    return effective_spec(base.model_copy(update={"name": name, "gpu_metrics": source}), 1, 2)


def own_backend() -> FakeBackend:
    return FakeBackend(
        [
            FakeGpu(
                0,
                utilization_ratio=0.9,
                memory_used_bytes=40 * GIB,
                nvlink_up=[True] * 4,
            ),
            FakeGpu(
                1,
                memory_used_bytes=31 * GIB,  # NVML's whole-GPU memory: both instances
                nvlink_up=[True] * 4,
                mig=[
                    FakeMigInstance(5, "3g.40gb", 40 * GIB, 30 * GIB, 0.5, 0.25),
                    FakeMigInstance(13, "1g.10gb", 10 * GIB, 1 * GIB, 0.125, 0.0),
                ],
            ),
        ]
    )


def dcgm_gpus() -> list[Gpu]:
    return [
        Gpu(index=0, fb_used=60000, gr_active=0.9),
        Gpu(
            index=1,
            temp=71,
            mig=[
                MigInstance(
                    1, "3g.40gb", fb_used=30000, fb_free=10000, gr_active=0.6, tensor_active=0.3
                ),
                MigInstance(
                    2, "4g.40gb", fb_used=5000, fb_free=35000, gr_active=0.2, tensor_active=0.1
                ),
            ],
        ),
    ]


def write_targets(
    folder: Path, spec: JobSpec, node: str, address: str, path: str = "/metrics"
) -> None:
    folder.mkdir()
    (folder / "training.json").write_text("[]", encoding="utf-8")
    labels = {**spec.selector_labels, "node": node, "__metrics_path__": path}
    group = {"targets": [address], "labels": labels}
    (folder / "gpu.json").write_text(json.dumps([group]), encoding="utf-8")


@pytest.fixture(scope="module")
def stack() -> Iterator[tuple[Stack, FakeBackend, dict[str, dict]]]:
    require_tool("prometheus")
    require_tool("prometheus-alertmanager")
    specs = [spec_for(OWN, "trainsignals"), spec_for(DCGM, "dcgm")]
    files = {s.name: job_files(s, SCALE) for s in specs}
    backend = own_backend()
    exporter = build_exporter(backend, "own-node", {})
    server = serve(exporter.registry, "127.0.0.1", 0)
    try:
        with (
            tempfile.TemporaryDirectory(prefix="trainsignals-mig-") as tmp,
            DcgmPages({"dcgm-node": "Hostname"}) as page,
        ):
            page.set("dcgm-node", dcgm_gpus())
            work = Path(tmp)
            write_targets(work / "sd-own", specs[0], "own-node", f"127.0.0.1:{server.port}")
            write_targets(work / "sd-dcgm", specs[1], "dcgm-node", page.address, "/dcgm-node")
            rule_paths = []
            for s in specs:
                path = work / f"{s.name}.rules.yaml"
                path.write_text(files[s.name][f"alerts/{s.name}.rules.yaml"], encoding="utf-8")
                rule_paths.append(path)
            sds = [work / "sd-own", work / "sd-dcgm"]
            with Stack(work / "stack", specs, sds, rule_paths, defer_rules=True) as st:
                st.wait_for_targets(2)
                st.load_rules()
                dashboards = {
                    s.name: json.loads(files[s.name][f"dashboards/{s.name}.json"]) for s in specs
                }
                yield st, backend, dashboards
    finally:
        server.shutdown()
        exporter.close()


def panel(dashboard: dict, key: str) -> list[str]:
    """The panel's queries, for every node and GPU."""
    exprs = [e for pid, e in panel_queries(dashboard) if pid == PANEL_IDS[key]]
    assert exprs, key
    return [e.replace("$node", ".*").replace("$gpu", ".*") for e in exprs]


def by_instance(result: list[dict]) -> dict[tuple[str, str, str, str], float]:
    return {
        (m["node"], m["gpu"], m["GPU_I_ID"], m["GPU_I_PROFILE"]): float(r["value"][1])
        for r in result
        for m in [r["metric"]]
    }


def by_gpu(st: Stack, name: str, job: str) -> dict[tuple[str, str], float]:
    result = st.query(f'{name}{{training_job="{job}"}}')
    return {(r["metric"]["node"], r["metric"]["gpu"]): float(r["value"][1]) for r in result}


def wait_until(check: Callable[[], list[str]], timeout: float) -> list[str]:
    deadline = time.monotonic() + timeout
    problems = check()
    while problems and time.monotonic() < deadline:
        time.sleep(0.5)
        problems = check()
    return problems


def close(a: float, b: float) -> bool:
    return abs(a - b) <= 1e-6 * max(1.0, abs(b))


def instance_problems(st: Stack, dashboard: dict, node: str, want: dict) -> list[str]:
    problems = []
    memory, activity = panel(dashboard, "gpu_mig_memory"), panel(dashboard, "gpu_mig_activity")
    assert len(memory) == 1 and len(activity) == 2, (memory, activity)
    for i, expr in enumerate([*memory, *activity]):
        got = by_instance(st.query(expr))
        expected = {(node, "1", *k): v[i] for k, v in want.items()}
        if got.keys() != expected.keys() or not all(close(got[k], expected[k]) for k in expected):
            problems.append(f"{expr}: want {expected}, got {got}")
    return problems


def test_mig_panels_one_series_per_instance_from_either_source(stack) -> None:
    st, _, dashboards = stack
    problems = wait_until(
        lambda: (
            instance_problems(st, dashboards[OWN], "own-node", OWN_INSTANCES)
            + instance_problems(st, dashboards[DCGM], "dcgm-node", DCGM_INSTANCES)
        ),
        timeout=30,
    )
    assert problems == []


def test_whole_gpu_series_count_each_gpu_once(stack) -> None:
    st, _, _ = stack
    wanted = {
        # The own exporter's whole-GPU memory is NVML's for the board, MIG or not.
        (OWN, "gpu:trainsignals_gpu_memory_used:ratio"): {
            ("own-node", "0"): 0.5,
            ("own-node", "1"): 31 / 80,
        },
        (OWN, "gpu:trainsignals_gpu_up:value"): {("own-node", "0"): 1, ("own-node", "1"): 1},
        # dcgm: the MIG GPU has only instance series: present, its memory the instances' sum,
        # its GPU-wide temperature once, no busy value made of one instance.
        (DCGM, "gpu:trainsignals_gpu_memory_used:ratio"): {
            ("dcgm-node", "0"): 60000 / 81000,
            ("dcgm-node", "1"): 35000 / 80000,
        },
        (DCGM, "gpu:trainsignals_gpu_memory_used:bytes"): {
            ("dcgm-node", "0"): 60000 * 2**20,
            ("dcgm-node", "1"): 35000 * 2**20,
        },
        (DCGM, "gpu:trainsignals_gpu_up:value"): {("dcgm-node", "0"): 1, ("dcgm-node", "1"): 1},
        (DCGM, "node:trainsignals_gpus:count"): {},  # checked below: labelled by node only
        (DCGM, "gpu:trainsignals_gpu_temperature:celsius"): {
            ("dcgm-node", "0"): 64,
            ("dcgm-node", "1"): 71,
        },
        (DCGM, "gpu:trainsignals_gpu_busy:ratio"): {("dcgm-node", "0"): 0.9},
    }

    def problems() -> list[str]:
        found = []
        for (job, name), want in wanted.items():
            if name.startswith("node:"):
                got = st.query(f'{name}{{training_job="{job}"}}')
                if [float(r["value"][1]) for r in got] != [2.0]:
                    found.append(f"{job} {name}: want 2 GPUs, got {got}")
                continue
            got = by_gpu(st, name, job)
            if got.keys() != want.keys() or not all(close(got[k], want[k]) for k in want):
                found.append(f"{job} {name}: want {want}, got {got}")
        return found

    assert wait_until(problems, timeout=30) == []
    # Every GPU keeps its UUID for per-GPU tickets, the MIG GPU too.
    uuids = by_gpu(st, "gpu:trainsignals_gpu_uuid:info", DCGM)
    assert sorted(uuids) == [("dcgm-node", "0"), ("dcgm-node", "1")]


def test_nvlink_errors_panel(stack) -> None:
    st, backend, dashboards = stack
    (expr,) = panel(dashboards[OWN], "gpu_nvlink")

    def rates() -> dict[tuple[str, str], float]:
        return {
            (r["metric"]["node"], r["metric"]["gpu"]): float(r["value"][1]) for r in st.query(expr)
        }

    assert (
        wait_until(
            lambda: (
                [] if rates() == {("own-node", "0"): 0.0, ("own-node", "1"): 0.0} else [rates()]
            ),
            timeout=30,
        )
        == []
    ), "no errors yet: 0 per GPU"
    # Replays on one link of GPU 1, counted while Prometheus scrapes every second.
    for n in range(1, 9):
        backend.gpus[1].nvlink_errors[(2, "replay")] = 100 * n
        time.sleep(0.5)
    got = rates()
    assert got[("own-node", "0")] == 0.0
    assert got[("own-node", "1")] > 0, got
    # The dcgm node has no NVLink error counters (not in the default counters): no series.
    (dcgm_expr,) = panel(dashboards[DCGM], "gpu_nvlink")
    assert st.query(dcgm_expr) == []
