"""Readiness checks that a page can actually be delivered, not only routed.

A route to the right receiver proves nothing if that receiver's credentials file is missing or
every notification it sends fails: the page never arrives and the checklist said PASS. These
checks read the Alertmanager config the routing check uses and Alertmanager's own counters.
"""

from __future__ import annotations

import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import yaml

from trainsignals.ops.readiness.model import Check

LOCAL_HOSTS = ("127.0.0.1", "localhost", "::1", "")
_INTEGRATIONS = ("pagerduty", "slack", "webhook", "email", "opsgenie", "victorops", "pushover")


def _file_fields(data: object, where: str) -> Iterator[tuple[str, str]]:
    """(field path, file) for every `*_file` (routing_key_file, api_url_file,
    credentials_file...) under `data`."""
    if isinstance(data, dict):
        for key, value in data.items():
            path = f"{where}.{key}" if where else str(key)
            if str(key).endswith("_file") and isinstance(value, str):
                yield path, value
            else:
                yield from _file_fields(value, path)
    elif isinstance(data, list):
        for i, value in enumerate(data):
            yield from _file_fields(value, f"{where}[{i}]")


def check_secret_files(config_text: str, am_url: str | None) -> Check:
    """Every credentials file the Alertmanager config references exists and is not empty.

    Checked on this host: with a remote --alertmanager the files live on its host, so a missing
    one is a note there (the notification check below catches it once a page is sent)."""
    config = yaml.safe_load(config_text) or {}
    found = sorted(set(_file_fields(config, "")))
    check = Check(f"secret files the Alertmanager config reads exist ({len(found)})")
    remote = am_url is not None and urllib.parse.urlsplit(am_url).hostname not in LOCAL_HOSTS
    for field, name in found:
        path = Path(name)
        problem = None
        if not path.is_file():
            problem = f"{field}: {name} does not exist"
        elif not path.read_text(encoding="utf-8", errors="replace").strip():
            problem = f"{field}: {name} is empty"
        if problem is None:
            continue
        if remote:
            check.notes.append(f"{problem} on this host (Alertmanager runs elsewhere)")
        else:
            check.fail(
                problem + ": Alertmanager cannot send these notifications",
                "write the credential there (or mount the Kubernetes Secret the spec names); "
                "the spec only references it",
            )
    return check


def _metric_samples(text: str, name: str) -> Iterator[tuple[dict[str, str], float]]:
    for line in text.splitlines():
        if not line.startswith(name):
            continue
        head, _, value = line.rpartition(" ")
        labels: dict[str, str] = {}
        if "{" in head:
            for pair in head[head.index("{") + 1 : head.rindex("}")].split(","):
                if "=" in pair:
                    key, raw = pair.split("=", 1)
                    labels[key.strip()] = raw.strip().strip('"')
        elif head != name:
            continue
        yield labels, float(value)


def check_notifications(am_url: str) -> Check:
    """Alertmanager's own counters: no notification has failed since it started.

    alertmanager_notifications_failed_total{integration} counts every failed attempt (a
    rejected payload, an unreadable key file, a refused connection); in 0.25 it has no receiver
    label, so the integration kind is what we can name."""
    check = Check(f"notifications are not failing ({am_url})")
    with urllib.request.urlopen(f"{am_url.rstrip('/')}/metrics", timeout=10) as resp:
        text = resp.read().decode()
    sent = {
        labels.get("integration", ""): value
        for labels, value in _metric_samples(text, "alertmanager_notifications_total")
    }
    for labels, failed in _metric_samples(text, "alertmanager_notifications_failed_total"):
        integration = labels.get("integration", "?")
        if failed > 0:
            check.fail(
                f"{failed:g} of {sent.get(integration, 0):g} {integration} notifications failed "
                "since Alertmanager started",
                f'read Alertmanager\'s log (`msg="Notify for alerts failed"`, '
                f"integration={integration}): a missing or wrong key file, a URL it cannot "
                "reach, or a payload the service refused",
            )
    check.detail = ", ".join(f"{k}: {v:g} sent" for k, v in sorted(sent.items()) if v)
    return check


def receiver_problems(body: dict) -> str | None:
    """Why a receiver of the config reaches no one, or None."""
    integrations = [k for k in body if k.endswith("_configs") and body[k]]
    if not integrations:
        return "has no integration: its alerts reach no one"
    hooks = [h.get("url", "") for h in body.get("webhook_configs") or []]
    if len(integrations) == 1 and hooks:
        local = [u for u in hooks if urllib.parse.urlsplit(u).hostname in LOCAL_HOSTS[:3]]
        if local == hooks:
            return f"posts only to {', '.join(local)} on the Alertmanager host (a placeholder?)"
    return None
