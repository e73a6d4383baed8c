"""On Kubernetes `node` is the node's name, never a pod's host name (issue 17, item 5).

A real Prometheus scrapes pod-named exporters with the scrape configs the generated
PodMonitors amount to: prometheus-operator turns each podMetricsEndpoint into a
kubernetes_sd job whose targets carry `__meta_kubernetes_pod_node_name`; here static targets
carry the same meta label (and the operator's namespace/pod/container target labels), and the
endpoint's honorLabels, relabelings and metricRelabelings are copied as they are. The
training rank reports gethostname() (its pod's name) as `node`; dcgm-exporter, without
NODE_NAME, reports its pod's name as `Hostname`. The node_exporter PodMonitor of a multi-node
job keeps only the InfiniBand series, labelled for the fabric rules.
"""

from __future__ import annotations

import re
import socket
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
import yaml

from trainsignals.exporters.training.metrics import TrainingMetrics

from .conftest import ROOT
from .dcgm_page import DcgmPages, Gpu
from .live_prometheus import live_prometheus

NODE = "gpu-node-17"  # the Kubernetes node both pods run on
RANK_POD = "llama-8b-finetune-worker-0"  # gethostname() in the training pod
DCGM_POD = "nvidia-dcgm-exporter-x7k2p"  # dcgm-exporter's Hostname without NODE_NAME
WORKLOAD = {"container": "trainer", "namespace": "fm-training", "pod": "gpt-70b-worker-3"}
# A node_exporter page: an InfiniBand port (the fabric alerts' input) and a CPU counter.
NODE_EXPORTER_PAGE = b"""# TYPE node_infiniband_state_id gauge
node_infiniband_state_id{device="mlx5_0",port="1"} 4
# TYPE node_cpu_seconds_total counter
node_cpu_seconds_total{cpu="0",mode="idle"} 12345.6
"""


class _NodeExporter(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/plain; version=0.0.4")
        self.end_headers()
        self.wfile.write(NODE_EXPORTER_PAGE)

    def log_message(self, *args: object) -> None:
        pass


def _monitor(job: str, suffix: str) -> dict:
    text = (ROOT / "deploy" / "kubernetes" / f"{job}.yaml").read_text(encoding="utf-8")
    (found,) = [
        o
        for o in yaml.safe_load_all(text)
        if o["kind"] == "PodMonitor" and o["metadata"]["name"].endswith(f"-{suffix}")
    ]
    return found


def _snake(relabel: dict) -> dict:
    """A prometheus-operator RelabelConfig as Prometheus's relabel_config."""
    return {re.sub(r"[A-Z]", lambda m: "_" + m[0].lower(), k): v for k, v in relabel.items()}


def _scrape_config(name: str, endpoint: dict, target: str, path: str, pod: dict) -> dict:
    """What the operator generates for one endpoint, with a static target for the pod."""
    meta = {
        "__meta_kubernetes_pod_node_name": NODE,
        "__meta_kubernetes_node_label_trainsignals_io_job": "gpt-70b-pretrain",
        **pod,  # the operator's own target labels (namespace, pod, container)
    }
    return {
        "job_name": name,
        "honor_labels": endpoint["honorLabels"],
        "metrics_path": path,
        "static_configs": [{"targets": [target], "labels": meta}],
        "relabel_configs": [_snake(r) for r in endpoint["relabelings"]],
        "metric_relabel_configs": [_snake(r) for r in endpoint.get("metricRelabelings", [])],
    }


@pytest.fixture
def exporters() -> Iterator[tuple[str, str, str]]:
    """(training rank, dcgm-exporter, node_exporter addresses); the first two report pod
    names as hosts."""
    rank = TrainingMetrics(node=RANK_POD, labels={"training_job": "llama-8b-finetune"})
    port = rank.start_http_server(port=0, addr="127.0.0.1")
    rank.set_global_step(10)
    node_exporter = ThreadingHTTPServer(("127.0.0.1", 0), _NodeExporter)
    threading.Thread(target=node_exporter.serve_forever, daemon=True).start()
    with DcgmPages({DCGM_POD: "Hostname"}) as pages:
        pages.set(DCGM_POD, [Gpu(0, pod=WORKLOAD), Gpu(1)])
        yield (
            f"127.0.0.1:{port}",
            pages.address,
            f"127.0.0.1:{node_exporter.server_address[1]}",
        )
    node_exporter.shutdown()
    node_exporter.server_close()
    rank.stop_http_server()


def test_node_is_the_kubernetes_node_not_the_pods_host_name(
    exporters: tuple[str, str, str], tmp_path: Path
) -> None:
    rank_address, dcgm_address, node_address = exporters
    training = _monitor("llama-8b-finetune", "training")["spec"]["podMetricsEndpoints"][0]
    dcgm = _monitor("gpt-70b-pretrain", "gpu")["spec"]["podMetricsEndpoints"][0]
    fabric = _monitor("gpt-70b-pretrain", "node")["spec"]["podMetricsEndpoints"][0]
    node_labels = {"namespace": "fm-monitoring", "pod": "node-exporter-q8f2d", "container": "x"}
    operator_labels = {"namespace": "applied-ml", "pod": RANK_POD, "container": "trainer"}
    dcgm_labels = {"namespace": "gpu-operator", "pod": DCGM_POD, "container": "exporter"}
    config = {
        "global": {"scrape_interval": "1s", "scrape_timeout": "1s"},
        "scrape_configs": [
            _scrape_config("training", training, rank_address, "/metrics", operator_labels),
            _scrape_config("dcgm", dcgm, dcgm_address, f"/{DCGM_POD}", dcgm_labels),
            _scrape_config("node", fabric, node_address, "/metrics", node_labels),
        ],
    }
    (tmp_path / "prometheus.yml").write_text(yaml.safe_dump(config))
    with live_prometheus(tmp_path / "prometheus.yml") as prom:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                steps = prom.query("trainsignals_global_step")
                temps = prom.query("DCGM_FI_DEV_GPU_TEMP")
                ports = prom.query("node_infiniband_state_id")
                if steps and len(temps) == 2 and ports:
                    break
            except OSError:
                pass
            time.sleep(0.2)
        else:
            pytest.fail(f"no samples; {prom.log_tail()}")

        # Training ranks: every series keyed by the node, no pod-named copy left behind.
        nodes = prom.query('count by (node) ({job="trainsignals-training"})')
        assert [r["metric"].get("node") for r in nodes] == [NODE]
        assert prom.query('{job="trainsignals-training", exported_node!=""}') == []
        (step,) = prom.query("trainsignals_global_step")
        assert step["metric"]["training_job"] == "llama-8b-finetune"

        # dcgm-exporter: the generated recording rule's `node` is the node, and the GPU's
        # workload labels (pod/namespace/container of the training pod) are kept.
        rules = yaml.safe_load((ROOT / "alerts" / "gpt-70b-pretrain.rules.yaml").read_text())
        (expr,) = [
            r["expr"]
            for g in rules["groups"]
            for r in g["rules"]
            if r.get("record") == "gpu:trainsignals_gpu_temperature:celsius"
        ]
        assert sorted(r["metric"]["node"] for r in prom.query(expr)) == [NODE, NODE]
        (busy,) = prom.query('DCGM_FI_DEV_GPU_TEMP{gpu="0"}')
        assert {k: busy["metric"][k] for k in WORKLOAD} == WORKLOAD
        assert busy["metric"]["node"] == NODE

        # node_exporter of a multi-node job: only the InfiniBand series, labelled like the
        # plain scrape config's node_exporter job (what the fabric rules and
        # ScrapeTargetsVanished select); `up` stays.
        (ib,) = prom.query("node_infiniband_state_id")
        wanted = {"job": "node", "node": NODE, "training_job": "gpt-70b-pretrain"}
        assert {k: ib["metric"].get(k) for k in wanted} == wanted
        assert prom.query("node_cpu_seconds_total") == []
        (up,) = prom.query('up{job="node"}')
        assert up["metric"]["training_job"] == "gpt-70b-pretrain"


def test_training_metrics_take_node_name_from_the_downward_api(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A pod that sets NODE_NAME (fieldRef spec.nodeName) labels its series with the node
    even before relabeling; the explicit `node` argument still wins."""
    monkeypatch.setenv("NODE_NAME", NODE)
    assert TrainingMetrics().node == NODE
    assert TrainingMetrics(node="n1").node == "n1"
    monkeypatch.delenv("NODE_NAME")
    assert TrainingMetrics().node == socket.gethostname()
