"""`trainsignals readiness`: check a live setup before anyone relies on it.

Against a running Prometheus (and optionally Alertmanager), for one job of jobs/: the job's
rule groups are loaded and every rule evaluates without error; every raw series its rules and
panels read is present with the labels the rules match on (naming the broken label when not);
the expected ranks, GPU exporters and GPUs are scraped; each alert routes to the receiver the
spec names (`amtool config routes test`); and every runbook_url is well formed and resolves to
a runbook in runbooks/. Prints a pass/fail checklist with the fix for each failure.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import tempfile
import urllib.parse
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import click
import yaml

from trainsignals.generator.dashboards.kit import panel_queries
from trainsignals.generator.pipeline import Options, generate_job, header
from trainsignals.generator.routing.alertmanager import alertmanager_config, team_receivers
from trainsignals.generator.spec.job import JobSpec
from trainsignals.jobs import jobs_option, load_jobs
from trainsignals.metrics.catalog import BY_NAME
from trainsignals.metrics.optional_series import MIG_INSTANCE_MATCHER, MIG_INSTANCES
from trainsignals.metrics.series_check import (
    EVENT_ONLY,
    Selector,
    dashboard_expr,
    selectors,
)
from trainsignals.metrics.series_check import (
    PANEL_ONLY_COMPONENTS as OPTIONAL,
)
from trainsignals.ops.lint import iter_rules
from trainsignals.ops.readiness.delivery import (
    check_notifications,
    check_secret_files,
    receiver_problems,
)
from trainsignals.ops.readiness.diagnose import PrometheusClient, diagnose
from trainsignals.ops.readiness.model import Check

GPU_COUNT_SERIES = {"trainsignals": "trainsignals_gpu_up", "dcgm": "DCGM_FI_DEV_GPU_UTIL"}


@dataclass(frozen=True)
class Job:
    """A spec and what the generator makes of it: rule document and dashboard."""

    spec: JobSpec
    rules: dict
    dashboard: dict
    all_specs: tuple[JobSpec, ...]

    @classmethod
    def generate(cls, spec: JobSpec, all_specs: list[JobSpec]) -> Job:
        files = generate_job(spec, "<readiness>", Options(with_tests=False))
        return cls(
            spec,
            yaml.safe_load(files[f"alerts/{spec.name}.rules.yaml"]),
            json.loads(files[f"dashboards/{spec.name}.json"]),
            tuple(all_specs),
        )

    def alerts(self) -> list[dict]:
        return [rule.body for rule in iter_rules({"rules": self.rules}) if "alert" in rule.body]


def check_rules(prom: PrometheusClient, job: Job) -> Iterator[Check]:
    wanted = [group["name"] for group in job.rules["groups"]]
    live = {g["name"]: g for g in prom.get("/api/v1/rules")["groups"]}
    loaded = Check(f"rule groups loaded ({len(wanted)})")
    for name in wanted:
        if name not in live:
            loaded.fail(
                f"group {name} is not loaded",
                f"add alerts/{job.spec.name}.rules.yaml to rule_files in prometheus.yml and "
                "reload Prometheus (POST /-/reload or SIGHUP)",
            )
    yield loaded
    rules = [(live[name], rule) for name in wanted if name in live for rule in live[name]["rules"]]
    healthy = Check(f"rules evaluate without error ({len(rules)} rules)")
    for group, rule in rules:
        health = rule.get("health")
        if health == "ok":
            continue
        if health == "unknown":
            # Groups have their own intervals (the slow recording group's is 3m).
            healthy.fail(
                f"{rule['name']} has not been evaluated yet",
                f"wait one interval of its group {group['name']} ({group.get('interval', 0):g}s) "
                "and run readiness again",
            )
        else:
            healthy.fail(
                f"{rule['name']}: {rule.get('lastError') or health}",
                "fix the expression (or the Prometheus version it needs) and regenerate",
            )
    if rules:
        yield healthy


def check_series(prom: PrometheusClient, job: Job) -> Check:
    rules = list(iter_rules({"rules": job.rules}))
    records: dict[str, list[str]] = {}  # a name may be recorded by several rules (per SLO)
    alerts: dict[str, list[str]] = {}
    for rule in rules:
        if "record" in rule.body:
            records.setdefault(str(rule.body["record"]), []).append(rule.expr)
        else:
            alerts.setdefault(str(rule.body["alert"]), []).append(rule.expr)
    panels = [
        (f"panel {panel_id}", dashboard_expr(expr))
        for panel_id, expr in panel_queries(job.dashboard)
    ]
    found = selectors(records, alerts, panels)
    check = Check(f"series the rules and panels read ({len(found)} selectors)")
    # One line per cause: a wrong target label breaks dozens of selectors the same way.
    broken: dict[tuple[str, str], list[Selector]] = {}
    for selector in found:
        missing = diagnose(prom, selector, job.spec.name, job.spec.selector_labels)
        if missing is None:
            continue
        absent = missing.problem.startswith("no series named")
        metric = BY_NAME.get(selector.name)
        if selector.name in EVENT_ONLY:  # no match says nothing about its labels
            check.notes.append(f"{selector.text()} empty: {EVENT_ONLY[selector.name]}")
        elif any((m.label, m.op, m.value) == MIG_INSTANCE_MATCHER for m in selector.matchers):
            check.notes.append(f"{selector.text()} empty: {MIG_INSTANCES}")
        elif absent and not selector.alerts and metric and metric.component in OPTIONAL:
            check.notes.append(f"{selector.name} absent ({metric.component}): panels empty")
        else:
            broken.setdefault((missing.problem, missing.fix), []).append(selector)
    for (problem, fix), group in broken.items():
        names = sorted({s.name for s in group})
        silenced = sorted({a for s in group for a in s.alerts})
        what = f"{len(group)} selector(s) of {_some(names)}"
        if silenced:
            what += f"; alerts that depend on them: {_some(silenced)}"
        check.fail(f"{problem} ({what})", fix)
    return check


def _some(items: list[str], shown: int = 4) -> str:
    more = f" and {len(items) - shown} more" if len(items) > shown else ""
    return ", ".join(items[:shown]) + more


def check_targets(prom: PrometheusClient, job: Job) -> Check:
    spec = job.spec
    labels = ",".join(f'{k}="{v}"' for k, v in spec.selector_labels.items())
    shape = spec.shape
    expected = (
        (f'up{{job="{spec.scrape_jobs.training}",{labels}}} == 1', shape.gpus, "training ranks"),
        (f'up{{job="{spec.scrape_jobs.gpu}",{labels}}} == 1', shape.nodes, "GPU exporters"),
        (f"{GPU_COUNT_SERIES[spec.gpu_metrics]}{{{labels}}}", shape.gpus, "GPUs"),
    )
    check = Check(f"{shape.gpus} ranks and GPUs on {shape.nodes} node(s) scraped")
    for selector, want, what in expected:
        have = prom.count(selector)
        if have != want:
            check.fail(
                f"{have} {what} where the spec says {want} ({selector})",
                f"compare {prom.url}/targets with shape in jobs/{spec.name}.yaml: a target "
                "down, missing from service discovery, or the spec's shape is out of date",
            )
    return check


def _not_ready(base_url: str) -> str | None:
    """Why Prometheus or Alertmanager at `base_url` is not ready (`/-/ready`), None if it is."""
    try:
        with urllib.request.urlopen(f"{base_url.rstrip('/')}/-/ready", timeout=10):
            return None
    except OSError as exc:
        return str(exc)


def check_alertmanager(prom: PrometheusClient, am_url: str) -> Check:
    check = Check(f"Prometheus sends to Alertmanager {am_url}")
    problem = _not_ready(am_url)
    if problem:
        check.fail(f"Alertmanager not ready: {problem}", "start it, or pass its URL")
        return check
    netloc = urllib.parse.urlsplit(am_url).netloc
    active = [a["url"] for a in prom.get("/api/v1/alertmanagers")["activeAlertmanagers"]]
    if not any(urllib.parse.urlsplit(url).netloc == netloc for url in active):
        check.fail(
            f"Prometheus sends alerts to {active or 'no Alertmanager'}, not {netloc}",
            "list it under alerting.alertmanagers in prometheus.yml and reload",
        )
    return check


def _am_config(job: Job, am_url: str | None) -> tuple[str, str]:
    """(config text, where from): the live Alertmanager's, else the generated one."""
    if am_url:
        url = f"{am_url.rstrip('/')}/api/v2/status"
        with urllib.request.urlopen(url, timeout=10) as resp:
            return json.load(resp)["config"]["original"], f"the live config of {am_url}"
    specs = list(job.all_specs)
    text = alertmanager_config(specs, header(job.spec, "<readiness>"))
    return text, "the generated alerts/alertmanager.yaml"


def check_routing(job: Job, am_url: str | None) -> Check:
    """Each alert reaches `<team>-<severity>` of its own team label (the job's team, or the
    infra team that recovery.infra_team names for causes), with the integration kind the
    specs name for it."""
    spec = job.spec
    text, origin = _am_config(job, am_url)
    check = Check(f"each alert routes to the spec's receiver ({origin})")
    amtool = shutil.which("amtool")
    if amtool is None:
        check.fail(
            "amtool not found",
            "install amtool (Debian/Ubuntu: apt-get install prometheus-alertmanager)",
        )
        return check
    config = yaml.safe_load(text) or {}
    receivers = {r.get("name"): r for r in config.get("receivers") or []}
    named = team_receivers(list(job.all_specs))
    used: set[tuple[str, str]] = set()
    with tempfile.TemporaryDirectory(prefix="trainsignals-readiness-") as tmp:
        path = Path(tmp) / "alertmanager.yml"
        path.write_text(text, encoding="utf-8")
        for alert in job.alerts():
            labels = {**spec.selector_labels, **alert["labels"], "alertname": alert["alert"]}
            team, severity = labels["team"], labels["severity"]
            used.add((team, severity))
            want = f"{team}-{severity}"
            argv = [amtool, "config", "routes", "test", f"--config.file={path}"]
            argv += [f"--verify.receivers={want}", *(f"{k}={v}" for k, v in labels.items())]
            result = subprocess.run(argv, capture_output=True, text=True, timeout=30)
            if result.returncode != 0:
                got = result.stdout.strip().splitlines()[:1] or [result.stderr.strip()]
                check.fail(
                    f"{alert['alert']} ({severity}) routes to {got[0]}, not {want}",
                    f"route team={team!r}, severity={severity!r} to {want}: "
                    "regenerate alerts/alertmanager.yaml and load it into Alertmanager",
                )
    for team, severity in sorted(used):
        receiver = named.get(team, {}).get(severity)
        body = receivers.get(f"{team}-{severity}")
        nowhere = receiver_problems(body) if body is not None else None
        if receiver is None and nowhere:
            # Only with an explicit routing.notify_nobody (generation refuses it otherwise).
            check.notes.append(f"{team}-{severity} {nowhere} (routing.notify_nobody)")
        elif nowhere:
            check.fail(
                f"{team}-{severity} {nowhere}",
                "load the generated alerts/alertmanager.yaml into Alertmanager",
            )
        elif receiver is not None and body is not None and not body.get(f"{receiver.kind}_configs"):
            check.fail(
                f"{team}-{severity} has no {receiver.kind} integration, the spec names one",
                "load the generated alerts/alertmanager.yaml into Alertmanager",
            )
    return check


def check_runbooks(job: Job, root: Path) -> Check:
    base = job.spec.links.runbook_base_url.rstrip("/")
    alerts = job.alerts()
    check = Check(f"runbooks resolve ({len(alerts)} alerts)")
    for alert in alerts:
        url = (alert.get("annotations") or {}).get("runbook_url", "")
        parts = urllib.parse.urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            check.fail(
                f"{alert['alert']}: runbook_url {url!r} is not an http(s) URL",
                f"set links.runbook_base_url in jobs/{job.spec.name}.yaml",
            )
            continue
        name = url.rsplit("/", 1)[-1]
        if not url.startswith(base + "/") or not (root / "runbooks" / name).is_file():
            check.fail(
                f"{alert['alert']}: {url} has no runbook runbooks/{name}",
                "run `trainsignals generate` and commit runbooks/ where runbook_base_url points",
            )
    return check


def readiness(
    spec: JobSpec,
    all_specs: list[JobSpec],
    prometheus_url: str,
    alertmanager_url: str | None = None,
    root: Path = Path("."),
) -> list[Check]:
    """Every readiness check of one job against a live Prometheus (and Alertmanager)."""
    prom = PrometheusClient(prometheus_url)
    up = Check(f"Prometheus ready at {prometheus_url}")
    problem = _not_ready(prom.url)
    if problem:
        up.fail(f"no answer: {problem}", "start Prometheus or pass the right --prometheus URL")
        return [up]
    job = Job.generate(spec, all_specs)
    checks = [up, *check_rules(prom, job), check_series(prom, job), check_targets(prom, job)]
    if alertmanager_url:
        checks.append(check_alertmanager(prom, alertmanager_url))
        if not checks[-1].ok and not checks[-1].problems[0][0].startswith("Prometheus"):
            alertmanager_url = None  # unreachable: route on the generated config instead
    checks.append(check_routing(job, alertmanager_url))
    # Routed is not delivered: the credentials must be there and notifications must succeed.
    checks.append(check_secret_files(_am_config(job, alertmanager_url)[0], alertmanager_url))
    if alertmanager_url:
        checks.append(check_notifications(alertmanager_url))
    checks.append(check_runbooks(job, root))
    return checks


def render(job: str, checks: list[Check]) -> str:
    lines = [f"readiness of {job}"]
    for check in checks:
        lines.append(f"  {'PASS' if check.ok else 'FAIL'}  {check.name}")
        for problem, fix in check.problems:
            lines.append(f"        - {problem}")
            lines.append(f"          fix: {fix}")
        lines += [f"        note: {note}" for note in check.notes]
    failed = sum(not c.ok for c in checks)
    lines.append(f"{len(checks)} checks, {failed} failed: {'NOT READY' if failed else 'READY'}")
    return "\n".join(lines)


@click.command("readiness")
@click.option("--job", "job_name", required=True, help="Job name (a spec in --jobs).")
@click.option("--prometheus", "prometheus_url", required=True, help="Prometheus base URL.")
@click.option("--alertmanager", "alertmanager_url", help="Alertmanager base URL (live config).")
@jobs_option()
@click.option(
    "--root",
    type=click.Path(file_okay=False, path_type=Path),
    default=".",
    show_default=True,
    help="Folder holding the generated runbooks/ (the --out of `trainsignals generate`).",
)
def readiness_command(
    job_name: str, prometheus_url: str, alertmanager_url: str | None, jobs_dir: Path, root: Path
) -> None:
    """Check a live setup for JOB before relying on it; exits 1 on any failed check."""
    specs = [spec for spec, _ in load_jobs(jobs_dir)]
    by_name = {spec.name: spec for spec in specs}
    if job_name not in by_name:
        raise click.ClickException(f"no job {job_name!r} in {jobs_dir}; known: {sorted(by_name)}")
    try:
        checks = readiness(by_name[job_name], specs, prometheus_url, alertmanager_url, root)
    except (OSError, RuntimeError, KeyError, ValueError) as exc:  # an answer we cannot read
        raise click.ClickException(
            f"readiness stopped: {exc!r}; check that --prometheus/--alertmanager point at "
            "Prometheus (2.x HTTP API) and Alertmanager (v2 API)"
        ) from None
    click.echo(render(job_name, checks))
    if not all(c.ok for c in checks):
        raise SystemExit(1)
