"""`python -m trainsignals.demo`: the simulator, Prometheus, Alertmanager and a webhook printer.

The job runs healthy, then the chosen fault starts after a minute of real time (with
`--scenario healthy`, nothing happens). Pages and tickets are printed as they reach the
webhook. Grafana provisioning files for the demo Prometheus and the job's dashboard are written
under `--out` (default `./trainsignals-demo/`); nothing else is written outside a temporary
folder. Ctrl-C stops everything, or `--duration` after that many seconds.
"""

from __future__ import annotations

import argparse
import signal
import tempfile
import threading
import time
from pathlib import Path

from trainsignals.generator.loader import load_specs
from trainsignals.generator.output.yaml import dump
from trainsignals.generator.routing.alertmanager import team_receivers
from trainsignals.generator.spec.job import JobSpec
from trainsignals.simulator.job import Simulation, effective_spec
from trainsignals.simulator.scenarios import SCENARIOS
from trainsignals.stacks import reaper
from trainsignals.stacks.stack import Notification, Stack, job_files

FAULT_AFTER_REAL_SECONDS = 60
# The spec the demo runs without --spec: the smallest useful one (the repository's
# jobs/minimal.yaml), built in so that an installed wheel has it too.
DEMO_SPEC = """\
name: minimal
team: ml-research
owners: [alice@example.com]
shape: {nodes: 1, gpus_per_node: 8, gpu_model: H100-SXM, model_flops_per_token: 4.2e10}
routing:
  page: {kind: pagerduty, secret: {file: /etc/alertmanager/secrets/ml-research-pagerduty}}
  ticket: {kind: slack, secret: {file: /etc/alertmanager/secrets/ml-research-slack}}
"""


def write_grafana_provisioning(
    directory: Path, prometheus_url: str, dashboards: dict[str, str]
) -> list[Path]:
    """datasources/prometheus.yaml and dashboards/trainsignals.yaml under `directory`, and the
    `dashboards` ({file name: JSON}) in `directory`/../dashboards/, where the provider looks."""
    folder = directory.parent / "dashboards"
    folder.mkdir(parents=True, exist_ok=True)
    for name, text in dashboards.items():
        (folder / name).write_text(text, encoding="utf-8")
    datasource = {
        "apiVersion": 1,
        "datasources": [
            {
                "name": "Prometheus",
                "type": "prometheus",
                "access": "proxy",
                "url": prometheus_url,
                "isDefault": True,
            }
        ],
    }
    provider = {
        "apiVersion": 1,
        "providers": [
            {
                "name": "trainsignals",
                "type": "file",
                "disableDeletion": False,
                "options": {"path": str(folder.resolve())},
            }
        ],
    }
    written = []
    for relative, content in (
        ("datasources/prometheus.yaml", datasource),
        ("dashboards/trainsignals.yaml", provider),
    ):
        path = directory / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(dump(content), encoding="utf-8")
        written.append(path)
    return written


def destinations(specs: list[JobSpec]) -> dict[str, str]:
    """{"/<team>/<severity>": what the real config would notify}: the demo's Alertmanager
    posts every receiver to its local printer instead (stack.py), so no page is lost to a
    key file that does not exist here, and each line says where it would have gone."""
    found = {}
    for team, by_severity in team_receivers(specs).items():
        for severity, receiver in by_severity.items():
            found[f"/{team}/{severity}"] = (
                f"{team}-{severity}: {receiver.describe}"
                if receiver
                else f"{team}-{severity}: no one"
            )
    return found


def print_notification(n: Notification, would_go: dict[str, str] | None = None) -> None:
    kind = n.severity.upper() if n.severity else "NOTIFY"
    where = ", ".join(
        f"{k}={v}" for k, v in sorted(n.labels.items()) if k in ("node", "rank", "gpu")
    )
    stamp = time.strftime("%H:%M:%S", time.localtime(n.arrived_wall))
    target = (would_go or {}).get(n.path, n.path)
    print(
        f"{stamp} {kind:<6} {n.status:<8} {n.alertname} {n.labels.get('training_job', '')}"
        + (f" ({where})" if where else "")
        + f" -> {target}",
        flush=True,
    )
    # A hang's page names the ranks that differ from their peers, or says no single suspect.
    suspects = n.annotations.get("suspects", "").strip().rstrip(";")
    if suspects and n.status == "firing":
        print(f"{'':9}suspects: {suspects}", flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m trainsignals.demo", description=__doc__)
    parser.add_argument("--scenario", default="healthy", choices=sorted(SCENARIOS))
    parser.add_argument("--time-scale", type=float, default=60.0)
    parser.add_argument("--spec", type=Path, default=None, help="Default: a built-in minimal job.")
    parser.add_argument(
        "--out",
        type=Path,
        default=Path("trainsignals-demo"),
        help="Folder for the Grafana provisioning and the job's dashboard (default: %(default)s).",
    )
    parser.add_argument(
        "--fault-after",
        type=float,
        default=FAULT_AFTER_REAL_SECONDS,
        help="Real seconds of healthy running before the fault (default: %(default)s).",
    )
    parser.add_argument(
        "--duration",
        type=float,
        default=None,
        help="Stop after this many real seconds (default: run until Ctrl-C).",
    )
    parser.add_argument("--nodes", type=int, default=2)
    parser.add_argument("--gpus-per-node", type=int, default=2)
    args = parser.parse_args(argv)
    reaper.raise_on_sigterm()  # `kill` stops the stack like Ctrl-C does

    scenario = SCENARIOS[args.scenario]
    # Healthy first: the fault starts `--fault-after` real seconds in, whatever the scenario says.
    fault_at = args.fault_after * args.time_scale
    with tempfile.TemporaryDirectory(prefix="trainsignals-demo-") as tmp:
        work = Path(tmp)
        source = args.spec
        if source is None:
            source = work / "minimal.yaml"
            source.write_text(DEMO_SPEC, encoding="utf-8")
        spec = effective_spec(load_specs([source])[0], args.nodes, args.gpus_per_node)
        files = job_files(spec, args.time_scale)
        rules = work / f"{spec.name}.rules.yaml"
        rules.write_text(files[f"alerts/{spec.name}.rules.yaml"], encoding="utf-8")
        sd = work / "sd"
        would_go = destinations([spec])
        stack = Stack(
            work / "stack",
            [spec],
            [sd],
            [rules],
            on_notify=lambda n: print_notification(n, would_go),
            defer_rules=True,
        )
        with stack:
            dashboard = f"{spec.name}.json"
            provisioning = write_grafana_provisioning(
                args.out / "grafana" / "provisioning",
                stack.prometheus_url,
                {dashboard: files[f"dashboards/{dashboard}"]},
            )
            with Simulation(
                spec,
                scenario,
                time_scale=args.time_scale,
                nodes=args.nodes,
                gpus_per_node=args.gpus_per_node,
                fault_at=fault_at,
                targets_dir=sd,
            ) as sim:
                sim.start()
                stack.wait_for_targets(len(sim.targets()))
                stack.load_rules()  # after the first scrapes: no "targets down" at startup
                print(
                    f"job          {spec.name}: {args.nodes} x {args.gpus_per_node} GPUs, "
                    f"time scale {args.time_scale:g}"
                )
                print(
                    f"scenario     {scenario.name}"
                    + ("" if scenario.name == "healthy" else f" (fault in {args.fault_after:g} s)")
                )
                print(f"prometheus   {stack.prometheus_url}")
                print(f"alertmanager {stack.alertmanager_url}")
                print(
                    f"webhook      {stack.receiver.url if stack.receiver else '-'}: every "
                    "page and ticket is printed here, with where the real config sends it"
                )
                for target in sim.targets()[:1] + sim.targets()[-1:]:
                    print(f"{target.kind + ' metrics':<12} http://{target.address}/metrics")
                print(f"grafana      provisioning in {provisioning[0].parent.parent}")
                print("Ctrl-C stops everything.", flush=True)
                try:
                    threading.Event().wait(args.duration)
                except KeyboardInterrupt:
                    signal.signal(signal.SIGINT, signal.SIG_IGN)  # let the shutdown finish
                    print("\nstopping", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
