"""The generated routing on a live Alertmanager 0.25, with a new user's own spec (written here,
not the bundled examples): only a page mutes a page."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from trainsignals.generator.loader import load_specs
from trainsignals.generator.routing.alertmanager import alertmanager_config
from trainsignals.generator.spec.job import JobSpec
from trainsignals.generator.spec.pipeline_alerts import (
    ALERTMANAGER_RELOAD_FAILED,
    CONFIG_INCONSISTENT,
    RULE_GROUP_SLOW,
)

from .conftest import STACK_GROUP
from .live_alertmanager import live_alertmanager, wait_until

pytestmark = [pytest.mark.e2e, pytest.mark.xdist_group(STACK_GROUP)]

HOOKS = "http://127.0.0.1:9/hooks"  # never reached: these tests read Alertmanager's state


def user_spec(tmp_path: Path, **extra: object) -> JobSpec:
    """A self-healing job of a new user, written as they would (routing by webhook)."""
    data = {
        "name": "bert-sweep",
        "team": "nlp",
        "owners": ["kim@example.com"],
        "shape": {
            "nodes": 4,
            "gpus_per_node": 8,
            "gpu_model": "H100-SXM",
            "model_flops_per_token": 4.2e10,
        },
        "objectives": {"tokens_per_second_min": 1000},
        "routing": {
            "page": {"kind": "webhook", "target": f"{HOOKS}/nlp-page"},
            "ticket": {"kind": "webhook", "target": f"{HOOKS}/nlp-ticket"},
        },
        "recovery": {
            "mode": "auto_restart",
            "infra_team": "hw",
            "infra_routing": {
                "page": {"kind": "webhook", "target": f"{HOOKS}/hw-page"},
                "ticket": {"kind": "webhook", "target": f"{HOOKS}/hw-ticket"},
            },
        },
        **extra,
    }
    path = tmp_path / "jobs" / "bert-sweep.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    return load_specs([path])[0]


def alert(name: str, severity: str, team: str, **labels: str) -> dict[str, str]:
    return {
        "alertname": name,
        "severity": severity,
        "team": team,
        "training_job": "bert-sweep",
        **labels,
    }


@pytest.mark.parametrize("cause", ["NodeDown", "GpuXidCritical", "GpuLost"])
def test_a_ticket_never_mutes_a_page(tmp_path: Path, cause: str) -> None:
    """auto_restart makes hardware causes infra tickets: they mute tickets, never the owning
    team's throughput page (before: a stale XID ticket muted it for hours)."""
    spec = user_spec(tmp_path)
    config = alertmanager_config([spec], "# test\n")
    with live_alertmanager(config, tmp_path / "am") as am:
        am.post(
            alert(cause, "ticket", "hw", node="node-1", gpu="3"),
            alert("ThroughputBelowFloor", "page", "nlp"),
            alert("DataLoaderStarved", "ticket", "nlp"),
        )
        assert wait_until(lambda: am.inhibited("DataLoaderStarved")), "ticket not muted"
        assert am.inhibited("ThroughputBelowFloor") is False


def test_a_page_still_mutes_its_consequences(tmp_path: Path) -> None:
    spec = user_spec(tmp_path, recovery={"mode": "manual"})
    config = alertmanager_config([spec], "# test\n")
    with live_alertmanager(config, tmp_path / "am") as am:
        am.post(
            alert("NodeDown", "page", "nlp", node="node-1"),
            alert("ThroughputBelowFloor", "page", "nlp"),
        )
        assert wait_until(lambda: am.inhibited("ThroughputBelowFloor"))


def test_a_pipeline_cause_mutes_its_symptom(tmp_path: Path) -> None:
    """The monitoring pipeline's own alerts declare what they explain too (issue 26): a replica
    that failed to reload is why the replicas' configurations differ, one ticket, not two."""
    spec = user_spec(tmp_path)
    config = alertmanager_config([spec], "# test\n")

    def meta(name: str, **labels: str) -> dict[str, str]:
        return {"alertname": name, "severity": "ticket", "team": "monitoring", **labels}

    with live_alertmanager(config, tmp_path / "am") as am:
        am.post(
            meta(ALERTMANAGER_RELOAD_FAILED, job="alertmanager", instance="am-1:9093"),
            meta(CONFIG_INCONSISTENT, job="alertmanager"),
            meta(RULE_GROUP_SLOW, job="prometheus", rule_group="x"),
        )
        assert wait_until(lambda: am.inhibited(CONFIG_INCONSISTENT)), "symptom not muted"
        assert am.inhibited(ALERTMANAGER_RELOAD_FAILED) is False
        assert am.inhibited(RULE_GROUP_SLOW) is False
