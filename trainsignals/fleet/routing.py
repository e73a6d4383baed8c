"""What the generated Alertmanager configuration makes of the replay's alerts.

A minute-by-minute walk over the firing alerts with the config's own route tree, grouping,
group_wait / group_interval and inhibition rules (Alertmanager 0.25 semantics: an alert never
inhibits itself, `equal` labels must agree, missing labels count as empty; a group opens when
its first alert arrives, muted or not, and inhibition mutes at each flush). A page is one
notification group that gets its first notification: PagerDuty deduplicates by group key, so
later alerts in an open group update the same incident. Alertmanager's clock cannot be
compressed, so this walk stands in for it; the config it reads is the generated file.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import yaml

from trainsignals.generator.spec.durations import parse_duration

from .evaluate import AlertEpisode
from .prom import STEP_S

_MATCHER = re.compile(r'^\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*(=~|!~|!=|=)\s*"?(.*?)"?\s*$')


def _matcher(text: str):
    name, op, value = _MATCHER.match(text).groups()  # type: ignore[union-attr]
    if op in ("=~", "!~"):
        pattern = re.compile(f"^(?:{value})$")
        return lambda labels: bool(pattern.match(labels.get(name, ""))) == (op == "=~")
    return lambda labels: (labels.get(name, "") == value) == (op == "=")


def _all(matchers: list[str]):
    tests = [_matcher(m) for m in matchers]
    return lambda labels: all(t(labels) for t in tests)


@dataclass
class Route:
    receiver: str
    group_by: tuple[str, ...]
    group_wait: int
    group_interval: int
    matches: object
    children: list[Route] = field(default_factory=list)


def _route(node: dict, parent: Route | None) -> Route:
    def inherit(key: str, default: str) -> int:
        if key in node:
            return parse_duration(node[key])
        return getattr(parent, key) if parent else parse_duration(default)

    route = Route(
        receiver=node.get("receiver", parent.receiver if parent else "default"),
        group_by=tuple(node.get("group_by", parent.group_by if parent else ())),
        group_wait=inherit("group_wait", "30s"),
        group_interval=inherit("group_interval", "5m"),
        matches=_all(node.get("matchers", [])),
    )
    route.children = [_route(child, route) for child in node.get("routes", [])]
    return route


def _leaf(route: Route, labels: dict[str, str]) -> Route:
    for child in route.children:
        if child.matches(labels):  # type: ignore[operator]
            return _leaf(child, labels)
    return route


@dataclass
class Notification:
    receiver: str
    severity: str
    alertname: str
    at: int  # first notification of the group
    alerts: list[tuple[int, dict[str, str]]]  # (first delivered, labels) over the group's life
    # Every alert of the group resolved (PagerDuty is told "resolved"); None: open at the end.
    resolved: int | None = None


class Alertmanager:
    def __init__(self, config_text: str) -> None:
        config = yaml.safe_load(config_text)
        self.root = _route(config["route"], None)
        self.inhibit = [
            (
                _all(r.get("source_matchers", [])),
                _all(r.get("target_matchers", [])),
                tuple(r.get("equal", [])),
            )
            for r in config.get("inhibit_rules", [])
        ]

    def inhibited(self, alert: dict[str, str], firing: list[dict[str, str]]) -> bool:
        for source, target, equal in self.inhibit:
            if not target(alert):  # type: ignore[operator]
                continue
            for other in firing:
                if (
                    other is not alert
                    and source(other)
                    and all(  # type: ignore[operator]
                        other.get(e, "") == alert.get(e, "") for e in equal
                    )
                ):
                    return True
        return False

    def replay(self, episodes: list[AlertEpisode], start: int, end: int) -> list[Notification]:
        changes: dict[int, list[tuple[bool, int]]] = {}
        for index, episode in enumerate(episodes):
            for begin, stop in episode.firing:
                changes.setdefault(begin, []).append((True, index))
                changes.setdefault(stop, []).append((False, index))
        active: set[int] = set()
        groups: dict[tuple, dict] = {}
        sent: list[Notification] = []
        for ts in range(start, end + STEP_S, STEP_S):
            for on, index in changes.get(ts, []):
                (active.add if on else active.discard)(index)
            if not active and not groups:
                continue
            firing = [episodes[i].labels for i in sorted(active)]
            by_group: dict[tuple, list[dict[str, str]]] = {}
            routes: dict[tuple, Route] = {}
            for labels in firing:
                route = _leaf(self.root, labels)
                key = (route.receiver, tuple(labels.get(g, "") for g in route.group_by))
                by_group.setdefault(key, []).append(labels)
                routes[key] = route
            for key in list(groups):
                if key not in by_group:  # every alert of the group resolved
                    note = groups.pop(key)["note"]
                    if note is not None:
                        note.resolved = ts
            for key, members in by_group.items():
                live = [a for a in members if not self.inhibited(a, firing)]
                group = groups.get(key)
                if group is None:  # inhibited alerts open their group too: Alertmanager
                    # mutes at flush time, on the group's own group_wait/group_interval clock
                    route = routes[key]
                    group = groups[key] = {
                        "flush": ts + route.group_wait,
                        "note": None,
                        "route": route,
                    }
                # Alerts change only at evaluations: a flush due before the next one sees
                # this evaluation's alerts (group_wait 30s delivers an alert that fired for a
                # single 60s evaluation, as Alertmanager does: the resolve comes a minute later).
                if group["flush"] < ts + STEP_S:
                    at = max(ts, group["flush"])
                    if live:
                        if group["note"] is None:
                            group["note"] = Notification(
                                key[0], live[0].get("severity", ""), live[0]["alertname"], at, []
                            )
                            sent.append(group["note"])
                        delivered = [a for _, a in group["note"].alerts]
                        for alert in live:
                            if alert not in delivered:
                                group["note"].alerts.append((at, alert))
                    group["flush"] += group["route"].group_interval * max(
                        1, (ts - group["flush"]) // group["route"].group_interval + 1
                    )
        return sent
