"""The alert model: relations between alerts are declared once, on the definitions
(`explains=`, `incident=`, `hardware_fault=`), and everything else derives from them."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from trainsignals.generator.alerts.catalog import BY_NAME
from trainsignals.generator.alerts.model import (
    PROGRESS_INCIDENT,
    Explains,
    hardware_fault_alerts,
    incident_alerts,
)
from trainsignals.generator.routing.alertmanager import alertmanager_config
from trainsignals.generator.signals.recording import HARDWARE_FAULT_LABEL

from .test_alertmanager import HEADER, example_specs

REPO = Path(__file__).resolve().parents[1]


def _rules() -> list[dict]:
    return yaml.safe_load(alertmanager_config(example_specs(), HEADER))["inhibit_rules"]


def _names(matcher: str) -> set[str]:
    return set(matcher.split('"')[1].split("|"))


def _mutes(source: str, target: str, severity: str = "page", **labels: str) -> list[dict]:
    """The inhibit rules by which a `severity` `source` mutes a page (or ticket) `target`."""
    found = []
    for rule in _rules():
        src, tgt = rule["source_matchers"], rule["target_matchers"]
        if not src[0].startswith("alertname") or source not in _names(src[0]):
            continue
        if any(m.startswith("severity=") and m != f'severity="{severity}"' for m in src):
            continue
        if target not in _names(tgt[0]):
            continue
        extra = dict(re.fullmatch(r'(\w+)=~?"(.*)"', m).groups() for m in tgt[1:])
        wanted = {**labels, "severity": severity}
        if all(re.fullmatch(extra.get(k, re.escape(v)), v) for k, v in wanted.items()):
            found.append(rule)
    return found


@pytest.mark.parametrize(
    ("source", "target", "labels", "equal"),
    [
        # A crash loop explains the no-progress that follows (a page mutes the page).
        ("TrainingCrashLooping", "TrainingNoProgress", {}, ["training_job"]),
        # A GPU off the bus explains its XID 79, on the same node and GPU only.
        ("GpuLost", "GpuXidCritical", {"xid": "79"}, ["training_job", "node", "gpu"]),
        # An uncorrectable ECC error explains its XID 48 (double bit) or 95 (uncontained, A100+).
        (
            "GpuUncorrectableEccErrors",
            "GpuXidCritical",
            {"xid": "48"},
            ["training_job", "node", "gpu"],
        ),
        (
            "GpuUncorrectableEccErrors",
            "GpuXidCritical",
            {"xid": "95"},
            ["training_job", "node", "gpu"],
        ),
        # ... and the contained one (94), a ticket unless the spec pages on it.
        (
            "GpuUncorrectableEccErrors",
            "GpuXidError",
            {"xid": "94"},
            ["training_job", "node", "gpu"],
        ),
        # A dead node explains its GPUs.
        ("NodeDown", "GpuLost", {}, ["training_job", "node"]),
        ("NodeDown", "GpuXidCritical", {}, ["training_job", "node"]),
    ],
)
def test_declared_relations_are_inhibit_rules(
    source: str, target: str, labels: dict[str, str], equal: list[str]
) -> None:
    rules = _mutes(source, target, **labels)
    assert [r["equal"] for r in rules] == [equal], rules


def test_an_xid_the_cause_does_not_log_still_pages() -> None:
    assert not _mutes("GpuLost", "GpuXidCritical", xid="48")
    assert not _mutes("GpuUncorrectableEccErrors", "GpuXidCritical", xid="79")


def test_only_a_page_inhibits_a_page() -> None:
    for rule in _rules():
        if 'severity="ticket"' in rule["source_matchers"]:
            assert 'severity="ticket"' in rule["target_matchers"], rule
        else:
            assert 'severity="page"' in rule["source_matchers"], rule


def test_incident_and_hardware_lists_come_from_the_declarations() -> None:
    progress = incident_alerts(PROGRESS_INCIDENT)
    assert {"TrainingNoProgress", "TrainingCrashLooping", "NodeDown"} <= set(progress)
    assert all(BY_NAME[n].incident == PROGRESS_INCIDENT for n in progress)
    # recording.py sits below the alerts and keeps no list of their names: it selects the
    # hardware faults by the label their declarations give them, and only they carry it.
    key, value = HARDWARE_FAULT_LABEL
    labelled, recording = set(), ""
    for path in sorted((REPO / "alerts").glob("*.rules.yaml")):
        for group in yaml.safe_load(path.read_text())["groups"]:
            for rule in group["rules"]:
                if rule.get("labels", {}).get(key) == value:
                    labelled.add(rule["alert"])
                if rule.get("record") == "node:trainsignals_hardware_fault:bool":
                    recording = rule["expr"]
    assert labelled == set(hardware_fault_alerts())
    assert f'{key}="{value}"' in recording and "alertname" not in recording


def test_a_declaration_names_a_role_that_exists() -> None:
    with pytest.raises(ValueError, match="unknown roles"):
        Explains("why", roles=("node_scopd",))
    with pytest.raises(ValueError, match="names no alert"):
        Explains("why")


def test_runbooks_show_the_declared_relations() -> None:
    from trainsignals.generator.runbooks.render import related_text

    xid = related_text("GpuXidCritical")
    assert '[GpuLost](GpuLost.md) (same `node`, `gpu`; `xid=~"79|119"`)' in xid
    assert "**Explains**" in related_text("NodeDown")
    assert related_text("LossPlateau") == ""


def test_alerts_that_explain_each_other_are_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    """Both firing, each would mute the other and nothing would page."""
    from dataclasses import replace

    from trainsignals.generator.alerts import catalog

    looped = replace(
        BY_NAME["TrainingStalled"],
        explains=(Explains("loop", alerts=("NodeDown",)),),
    )
    alerts = tuple(looped if a.name == looped.name else a for a in catalog.ALERTS)
    monkeypatch.setattr(catalog, "ALERTS", alerts)
    monkeypatch.setattr(catalog, "BY_NAME", {a.name: a for a in alerts})
    with pytest.raises(ValueError, match="explain each other"):
        catalog.cause_depth()
