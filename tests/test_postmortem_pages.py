"""The postmortem's pages are the notifications that reached a pager, on a live stack.

Real Prometheus evaluates four always-firing alerts of one job (and records its throughput);
a real Alertmanager with the job's generated routing inhibits TrainingTargetsDown under NodeDown
(one fault, one page), and a silence mutes a ticket. The draft must list as pages exactly the
page notifications the webhook receiver got, and name what suppressed the rest; with `--to`
ahead of now, nothing is read past the newest sample.
"""

from __future__ import annotations

import json
import tempfile
import time
import urllib.request
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from tests.conftest import JOBS, STACK_GROUP, require_tool
from trainsignals.cli.main import main
from trainsignals.generator.loader import load_specs
from trainsignals.ops.postmortem.delivery import from_alertmanager, mark_delivery
from trainsignals.ops.postmortem.timeline import build_timeline
from trainsignals.stacks.stack import Stack

pytestmark = [pytest.mark.e2e, pytest.mark.xdist_group(STACK_GROUP)]
JOB = "pm-pages"


def _rules(team: str) -> dict:
    def rule(name: str, severity: str, **extra: str) -> dict:
        labels = {"severity": severity, "team": team, "training_job": JOB, "job": JOB, **extra}
        # Fire once Prometheus has discovered Alertmanager (its discovery updates every 5 s;
        # an alert sent before is dropped and resent only a minute later).
        return {"alert": name, "expr": "vector(1)", "for": "6s", "labels": labels}

    # Two groups, as a generated rule file has at least (Stack.load_rules waits for them).
    return {
        "groups": [
            {
                "name": "pm-pages-node",
                "rules": [
                    rule("NodeDown", "page", node="node-0"),
                    rule("TrainingTargetsDown", "page"),  # inhibited by NodeDown
                ],
            },
            {
                "name": "pm-pages-job",
                "rules": [
                    rule("NonFiniteLoss", "page"),  # reaches the pager
                    rule("LossPlateau", "ticket"),  # silenced
                    # A job still running: a sample every evaluation, up to now.
                    {
                        "record": "job:trainsignals_tokens:rate5m",
                        "expr": "vector(1000)",
                        "labels": {"training_job": JOB},
                    },
                ],
            },
        ]
    }


def _silence(url: str, alertname: str) -> None:
    now = datetime.now(UTC)
    body = {
        "matchers": [{"name": "alertname", "value": alertname, "isRegex": False}],
        "startsAt": (now - timedelta(minutes=1)).isoformat(),
        "endsAt": (now + timedelta(hours=1)).isoformat(),
        "createdBy": "test",
        "comment": "known plateau",
    }
    request = urllib.request.Request(
        f"{url}/api/v2/silences",
        json.dumps(body).encode(),
        {"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=5) as resp:
        assert resp.status == 200


def test_pages_are_what_reached_a_pager(tmp_path: Path) -> None:
    require_tool("prometheus")
    require_tool("prometheus-alertmanager")
    base = load_specs([JOBS / "minimal.yaml"])[0]
    spec = base.model_copy(update={"name": JOB})
    with tempfile.TemporaryDirectory(prefix="trainsignals-pm-pages-") as tmp:
        work = Path(tmp)
        rules = work / "rules.yaml"
        rules.write_text(yaml.safe_dump(_rules(spec.team)), encoding="utf-8")
        with Stack(work / "stack", [spec], [work / "sd"], [rules]) as stack:
            _silence(stack.alertmanager_url, "LossPlateau")
            start = time.time()
            receiver = stack.receiver
            assert receiver is not None
            deadline = time.monotonic() + 30
            while not (receiver.delivered("NodeDown") and receiver.delivered("NonFiniteLoss")):
                assert time.monotonic() < deadline, receiver.snapshot()
                time.sleep(0.2)
            time.sleep(3)  # a few more evaluations and group flushes
            delivered = {n.alertname for n in receiver.snapshot() if n.status == "firing"}
            out = tmp_path / "pm.md"
            args = ["postmortem", "--job", JOB, "--prometheus", stack.prometheus_url]
            args += ["--alertmanager", stack.alertmanager_url, "--out", str(out)]
            # --to a minute ahead: Prometheus would repeat the newest sample there.
            args += ["--from", f"{start - 5:.3f}", "--to", f"{time.time() + 60:.3f}"]
            args += ["--jobs", str(tmp_path / "no-jobs")]
            result = CliRunner().invoke(main, args)
            assert result.exit_code == 0, result.output
            # The replay agrees with Alertmanager's own verdict on the same alerts.
            suppression = from_alertmanager(stack.alertmanager_url)
            alerts = stack.query(f'ALERTS{{training_job="{JOB}",alertstate="firing"}}')
            now = time.time()
            matrix = [{"metric": a["metric"], "values": [[now, "1"]]} for a in alerts]
            events = mark_delivery(build_timeline(matrix, now - 1, now, 1.0), suppression)
            with urllib.request.urlopen(f"{stack.alertmanager_url}/api/v2/alerts") as resp:
                states = {a["labels"]["alertname"]: a["status"]["state"] for a in json.load(resp)}

    assert delivered == {"NodeDown", "NonFiniteLoss"}, delivered  # what Alertmanager sent
    assert {e.alertname: e.first_delivered is not None for e in events} == {
        name: state == "active" for name, state in states.items()
    }, states
    text = out.read_text(encoding="utf-8")
    pages = next(line for line in text.splitlines() if line.startswith("| Pages that reached"))
    assert set(pages.split(" | ")[1].removesuffix(" |").split(", ")) == delivered, (
        pages
    )  # the webhook's pages
    held = next(line for line in text.splitlines() if line.startswith("| Pages Alertmanager held"))
    assert held.split(" | ")[1].removesuffix(" |") == "TrainingTargetsDown", (
        held
    )  # a row of its own
    assert "inhibited by NodeDown, reached no pager" in text
    assert "silenced (known plateau), reached no pager" in text
    assert "TrainingTargetsDown fired as a page but reached no pager" in text
    # No data past the newest sample: during has the job's 1000 tokens/s, after has nothing.
    row = next(line for line in text.splitlines() if line.startswith("| Throughput (tokens/s) |"))
    during, after = (c.strip() for c in row.split("|")[3:5])
    assert during == "1,000.0" and after.startswith("no data"), row
