"""The XID alerts fire on a new XID, never on a stale value (real promtool).

dcgm-exporter's DCGM_FI_DEV_XID_ERRORS keeps the last XID's code until the exporter restarts
(NVIDIA/dcgm-exporter#500): one XID 94 must fire GpuXidCritical once, then resolve, although
the gauge still reads 94 hours later. Spec written here, as a new user would.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import yaml

from trainsignals.generator.loader import load_specs
from trainsignals.generator.output.yaml import dump
from trainsignals.generator.pipeline import Options, generate_job
from trainsignals.generator.signals.promql import matchers
from trainsignals.generator.signals.recording import HARDWARE_FAULT_LABEL

from .conftest import run_tool

JOB = "vit-dcgm"


def dcgm_rules(folder: Path) -> str:
    spec_path = folder / f"{JOB}.yaml"
    spec_path.write_text(
        yaml.safe_dump(
            {
                "name": JOB,
                "team": "vision",
                "shape": {
                    "nodes": 1,
                    "gpus_per_node": 1,
                    "gpu_model": "H100-SXM",
                    "model_flops_per_token": 4.2e10,
                },
                "gpu_metrics": "dcgm",
                "routing": {"notify_nobody": ["page", "ticket"]},
            }
        )
    )
    spec = load_specs([spec_path])[0]
    files = generate_job(spec, "<test>", Options(with_tests=False))
    text = files[f"alerts/{JOB}.rules.yaml"]
    (folder / "rules.yaml").write_text(text)
    return text


def series(name: str, values: str, **extra: str) -> dict:
    labels = {"training_job": JOB, "Hostname": "node-0", "gpu": "0", "UUID": "GPU-0", **extra}
    return {"series": name + matchers(labels), "values": values}


def xid_alert(code: str, eval_time: str, firing: bool) -> dict:
    """GpuXidCritical firing (or not) at `eval_time`, read from ALERTS (labels only)."""
    labels = {
        "alertname": "GpuXidCritical",
        "alertstate": "firing",
        "job": JOB,
        "severity": "page",
        "team": "vision",
        "training_job": JOB,
        "node": "node-0",
        "gpu": "0",
        "uuid": "GPU-0",
        "xid": code,
        "action": "RESTART_BM",  # XID 79 in NVIDIA's catalog
        HARDWARE_FAULT_LABEL[0]: HARDWARE_FAULT_LABEL[1],  # GpuXidCritical is a hardware fault
    }
    return {
        "expr": 'ALERTS{alertname="GpuXidCritical", alertstate="firing"}',
        "eval_time": eval_time,
        "exp_samples": [{"labels": "ALERTS" + matchers(labels), "value": 1}] if firing else [],
    }


def run(folder: Path, input_series: list[dict], cases: list[dict]) -> subprocess.CompletedProcess:
    # The GPU is present and busy throughout, so nothing else fires on it.
    util = series("DCGM_FI_DEV_GPU_UTIL", "90x400")
    suite = {
        "rule_files": ["rules.yaml"],
        "evaluation_interval": "1m",
        "tests": [
            {"interval": "1m", "input_series": [util, *input_series], "promql_expr_test": cases}
        ],
    }
    (folder / "test.yaml").write_text(dump(suite))
    return run_tool("promtool", "test", "rules", "test.yaml", cwd=folder, timeout=120)


def test_stale_xid_gauge_fires_once_then_resolves(tmp_path: Path) -> None:
    dcgm_rules(tmp_path)
    # 0 for 10 minutes, then XID 79 (4.x: the code is also the err_code label), which the
    # gauge keeps for hours; a second XID 79 series appears at 3h (the exporter restarted).
    stale = series("DCGM_FI_DEV_XID_ERRORS", "0x10 79x170 _x200", err_code="79")
    again = series("DCGM_FI_DEV_XID_ERRORS", "_x180 0 79x200", err_code="79", pod="new")
    done = run(
        tmp_path,
        [stale, again],
        [
            xid_alert("79", "14m", True),
            xid_alert("79", "40m", False),  # the same stale 79: over
            xid_alert("79", "2h50m", False),
            xid_alert("79", "3h5m", True),  # a new one after the exporter restart
        ],
    )
    assert done.returncode == 0, done.stdout + done.stderr


def test_old_exporter_without_err_code_label(tmp_path: Path) -> None:
    """Before 4.x the code is only the gauge's value: a change to 79 is a new XID 79."""
    dcgm_rules(tmp_path)
    gauge = series("DCGM_FI_DEV_XID_ERRORS", "0x10 79x300")
    done = run(tmp_path, [gauge], [xid_alert("79", "14m", True), xid_alert("79", "1h", False)])
    assert done.returncode == 0, done.stdout + done.stderr


def test_rule_reads_the_gauge_once_without_a_subquery(tmp_path: Path) -> None:
    rules = yaml.safe_load(dcgm_rules(tmp_path))
    exprs = [r["expr"] for g in rules["groups"] for r in g["rules"] if "record" in r]
    reads = sum(e.count("DCGM_FI_DEV_XID_ERRORS{") for e in exprs)
    assert reads <= 4, reads  # > 0, changes(), unless, offset: one series each
    assert not any("DCGM_FI_DEV_XID_ERRORS" in e and ":1m]" in e for e in exprs)


def test_a_repeat_of_the_same_code_counts_where_the_exporter_counts_xids(tmp_path: Path) -> None:
    """The gauge cannot show a second XID 79 after the first (NVIDIA/dcgm-exporter#190); the
    optional DCGM_EXP_XID_ERRORS_COUNT (per code, within its window) can."""
    dcgm_rules(tmp_path)
    gauge = series("DCGM_FI_DEV_XID_ERRORS", "79x300", err_code="79")  # stale since before
    count = series(
        "DCGM_EXP_XID_ERRORS_COUNT", "0x100 1x5 0x194", xid="79", window_size_in_ms="300000"
    )
    cases = [xid_alert("79", "90m", False), xid_alert("79", "104m", True)]
    cases.append(xid_alert("79", "2h", False))
    done = run(tmp_path, [gauge, count], cases)
    assert done.returncode == 0, done.stdout + done.stderr
