"""What a person reads on the dashboards and in the runbooks' links to them (issue 27, item 9):
thresholds as decimals a person would write, descriptions that say each window once, and link
labels that are the titles of the panels they open."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from .conftest import ROOT

DASHBOARDS = sorted((ROOT / "dashboards").glob("*.json"))
JOB_DASHBOARDS = [p for p in DASHBOARDS if p.stem != "oncall"]
# [label](.../d/<uid>/<job>?viewPanel=<id>)
PANEL_LINK = re.compile(r"\[([^\]]+)\]\([^)]*/d/[^/]+/([a-z0-9-]+)\?viewPanel=(\d+)\)")


def _panels(panels: list[dict]) -> Iterator[dict]:
    for panel in panels:
        yield panel
        yield from _panels(panel.get("panels", []))


def _threshold_values(node: object) -> Iterator[float]:
    if isinstance(node, dict):
        if "steps" in node and node.get("mode") == "absolute":
            yield from (s["value"] for s in node["steps"] if s["value"] is not None)
        for value in node.values():
            yield from _threshold_values(value)
    elif isinstance(node, list):
        for value in node:
            yield from _threshold_values(value)


@pytest.mark.parametrize("path", DASHBOARDS, ids=lambda p: p.stem)
def test_thresholds_read_as_written(path: Path) -> None:
    values = list(_threshold_values(json.loads(path.read_text(encoding="utf-8"))))
    assert values
    # No exponent, and small values with at most three decimals: 2.001, never
    # 2.0000000000000004 or 5e-324 (a derived tokens/s floor may keep its digits).
    unreadable = [
        v for v in values if "e" in repr(v) or (abs(v) < 100 and len(repr(v).split(".")[1]) > 3)
    ]
    assert not unreadable, unreadable


@pytest.mark.parametrize("window", ["1h", "1d", "6h"])
def test_restart_windows_are_named_once(window: str) -> None:
    from trainsignals.generator.dashboards.job_panels import _windows

    text = _windows(window)
    assert text.count("1h") + text.count("hour") == 1
    assert text.count("1d") + text.count("day") == 1
    if window == "6h":
        assert text == "hour, day and 6h"


@pytest.mark.parametrize("path", JOB_DASHBOARDS, ids=lambda p: p.stem)
def test_no_description_repeats_a_window(path: Path) -> None:
    dashboard = json.loads(path.read_text(encoding="utf-8"))
    for panel in _panels(dashboard["panels"]):
        description = panel.get("description", "")
        assert "per hour, per day and per 1h" not in description, panel["title"]
        assert "per 1d" not in description or "per day" not in description, panel["title"]


@pytest.mark.parametrize("path", JOB_DASHBOARDS, ids=lambda p: p.stem)
def test_keyed_panels_carry_their_titles(path: Path) -> None:
    from trainsignals.generator.signals.panels import PANEL_IDS, PANEL_TITLES

    titles = {p["id"]: p["title"] for p in _panels(json.loads(path.read_text())["panels"])}
    differing = {
        key: (PANEL_TITLES[key], titles[number])
        for key, number in PANEL_IDS.items()
        if number in titles and key in PANEL_TITLES and titles[number] != PANEL_TITLES[key]
    }
    assert not differing


def test_runbook_links_are_labelled_with_the_panel_title() -> None:
    titles = {
        path.stem: {p["id"]: p["title"] for p in _panels(json.loads(path.read_text())["panels"])}
        for path in JOB_DASHBOARDS
    }
    links = [
        (book.name, label, job, int(number))
        for book in sorted((ROOT / "runbooks").glob("*.md"))
        for label, job, number in PANEL_LINK.findall(book.read_text(encoding="utf-8"))
        if job in titles
    ]
    assert len(links) > 50
    wrong = [link for link in links if link[1] != titles[link[2]][link[3]]]
    assert not wrong, wrong[:5]
