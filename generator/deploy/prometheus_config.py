"""A complete `prometheus.yml` for plain Prometheus: `deploy/prometheus/prometheus.yml`.

Every job's scrape configs (generator/deploy/scrape_config.py), every generated rule file, the
Alertmanagers, and the two scrape jobs the meta-monitoring rules read: Prometheus itself and
its Alertmanagers, under the job names of the monitoring settings. Written by hand, those names
drift, and a meta rule that selects `job="prometheus"` on a Prometheus scraped as `prom` never
fires: the pipeline would fail silently, which is what the meta rules exist to prevent.

The Alertmanagers are found by DNS (`dns_sd_configs`, A records of alertmanager_url's host):
an HA pair behind one name (a headless Service, round-robin DNS) is every replica, for sending
alerts and for scraping, with nothing to list by hand.
"""

from __future__ import annotations

from urllib.parse import urlsplit

from trainsignals import __version__
from trainsignals.generator.deploy.scrape_config import scrape_configs
from trainsignals.generator.output.files import GENERATED_MARK
from trainsignals.generator.spec.job import JobSpec
from trainsignals.generator.spec.monitoring import MonitoringSettings

RULES_DIR = "/etc/prometheus/rules"  # where alerts/*.rules.yaml are installed
SCRAPE_INTERVAL = "15s"
# The fast recording group and the alerts run at this interval; bench/bench_fleet_cost.py
# measures their cost against it (the slow group sets its own).
EVALUATION_INTERVAL = "1m"
PATH = "deploy/prometheus/prometheus.yml"


def alertmanager_discovery(settings: MonitoringSettings) -> dict:
    """How every Prometheus of the deployment (the single server, each shard) finds the
    Alertmanagers: DNS service discovery of `alertmanager_url`'s host and port."""
    url = urlsplit(settings.alertmanager_url)
    if not url.hostname:
        raise ValueError(
            f"monitoring settings: alertmanager_url {settings.alertmanager_url!r} has no host; "
            "give it as http://HOST:PORT"
        )
    return {"names": [url.hostname], "type": "A", "port": url.port or 9093}


def prometheus_config(
    specs: list[JobSpec], rule_files: list[str], settings: MonitoringSettings
) -> dict:
    """`rule_files`: the generated rule files' names (alerts/<name>), installed in RULES_DIR."""
    port = urlsplit(settings.prometheus_url).port or 9090
    alertmanagers = alertmanager_discovery(settings)
    own = [
        {
            "job_name": settings.prometheus_job,
            "static_configs": [{"targets": [f"localhost:{port}"]}],
        },
        {"job_name": settings.alertmanager_job, "dns_sd_configs": [alertmanagers]},
    ]
    return {
        "global": {"scrape_interval": SCRAPE_INTERVAL, "evaluation_interval": EVALUATION_INTERVAL},
        "rule_files": [f"{RULES_DIR}/{name}" for name in sorted(rule_files)],
        "alerting": {"alertmanagers": [{"dns_sd_configs": [alertmanagers]}]},
        "scrape_configs": own + [config for spec in specs for config in scrape_configs(spec)],
    }


def file_header(sources: str) -> str:
    return (
        f"# {GENERATED_MARK} {__version__} from {sources} and the monitoring settings.\n"
        "# Do not edit: change the specs or the monitoring settings (--monitoring FILE) and run "
        "`trainsignals generate`.\n"
        "# Plain Prometheus (2.42+): the scrape configs and rules of every job without\n"
        "# deploy.kubernetes, the meta and on-call rules, the Alertmanagers, and the\n"
        f"# self-scrapes the meta rules read. Install alerts/*.rules.yaml in {RULES_DIR}/ and\n"
        "# run with --rules.alert.for-grace-period=1m (README: a restart must not re-page).\n"
    )
