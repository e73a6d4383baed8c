"""Secrets by reference: literal secrets in a spec are refused with a fix, no secret reaches a
generated or committed file, and a real Alertmanager reads each credential from its file."""

from __future__ import annotations

import json
import secrets
import subprocess
import threading
import time
import urllib.request
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from trainsignals.cli.main import main
from trainsignals.generator.loader import SpecError, load_specs, parse_spec, spec_files
from trainsignals.generator.pipeline import generate_all
from trainsignals.generator.routing.alertmanager import alertmanager_config
from trainsignals.generator.spec.job import JobSpec
from trainsignals.generator.spec.secrets import looks_secret
from trainsignals.stacks import reaper
from trainsignals.stacks.ports import free_port
from trainsignals.stacks.stack import FAST_TIMING

from .conftest import JOBS, ROOT, STACK_GROUP, require_tool

# The literal credentials the example specs held before they referenced Secrets, and the
# kinds of value a user might paste. None may appear in any committed or generated file
# (except this one, which names them to look for them).
EXAMPLE_SECRETS = (
    "applied-ml-routing-key",
    "fm-training-routing-key",
    "hooks.slack.example.com/services/fm-training",
    "hooks.slack.com/services/T0000/B0000/XXXXXXXXXXXXXXXXXXXXXXXX",
    "0123456789abcdef0123456789abcdef",
)
MINIMAL = (JOBS / "minimal.yaml").read_text(encoding="utf-8")


def spec_with(routing: str) -> str:
    return MINIMAL + routing


@pytest.mark.parametrize(
    ("routing", "field", "what"),
    [
        (
            "routing:\n  page: {kind: pagerduty, target: 0123456789abcdef0123456789abcdef}\n",
            "routing.page.target",
            "PagerDuty routing key",
        ),
        (
            "routing:\n  ticket: {kind: webhook, target: "
            "'https://hooks.slack.com/services/T0000/B0000/XXXXXXXXXXXXXXXXXXXXXXXX'}\n",
            "routing.ticket.target",
            "Slack webhook URL",
        ),
        (
            "routing:\n  ticket: {kind: webhook, target: 'https://t.example.com/h?token=abc'}\n",
            "routing.ticket.target",
            "credential in its query",
        ),
        (
            "routing:\n  ticket: {kind: webhook, target: 'https://bot:hunter2@t.example.com/h'}\n",
            "routing.ticket.target",
            "password",
        ),
        (
            "links:\n  grafana_base_url: 'Bearer abcdefgh12345678'\n",
            "links.grafana_base_url",
            "bearer",
        ),
    ],
)
def test_literal_secret_looking_values_are_refused(routing: str, field: str, what: str) -> None:
    with pytest.raises(SpecError) as error:
        parse_spec(Path("jobs/minimal.yaml"), spec_with(routing))
    (line,) = error.value.problems
    assert line.startswith(f"jobs/minimal.yaml: {field}: looks like")
    assert what in line
    assert "secret: {name: <secret>, key: <key>}" in line  # how to reference it


@pytest.mark.parametrize("kind", ["pagerduty", "slack"])
def test_pagerduty_and_slack_take_only_a_secret_reference(kind: str) -> None:
    with pytest.raises(SpecError) as error:
        parse_spec(Path("j.yaml"), spec_with(f"routing:\n  page: {{kind: {kind}, target: x}}\n"))
    (line,) = error.value.problems
    assert line.startswith("j.yaml: routing.page:") and "in plain text" in line
    assert "secret: {name: <secret>, key: <key>}" in line
    assert "x" not in line.split("routing.page:")[1].split("`target`")[0]  # value not echoed


def test_generate_refuses_and_writes_nothing(tmp_path: Path) -> None:
    jobs, out = tmp_path / "jobs", tmp_path / "out"
    jobs.mkdir()
    (jobs / "minimal.yaml").write_text(
        spec_with("routing:\n  page: {kind: pagerduty, target: fm-training-routing-key}\n")
    )
    result = CliRunner().invoke(main, ["generate", "--jobs", str(jobs), "--out", str(out)])
    assert result.exit_code == 1
    assert "routing.page" in result.output and "secret:" in result.output
    assert not out.exists()


def committed_files() -> list[Path]:
    listed = subprocess.run(
        ["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True, timeout=30
    ).stdout.decode()
    return [ROOT / p for p in listed.split("\0") if p and p != "tests/test_secrets.py"]


def test_no_example_secret_in_any_committed_or_generated_file() -> None:
    specs = load_specs(spec_files(JOBS))
    generated = generate_all([(s, f"jobs/{s.name}.yaml") for s in specs])
    texts = {f"generated {p}": text for p, text in generated.items()}
    for path in committed_files():
        if path.is_file():
            texts[str(path.relative_to(ROOT))] = path.read_bytes().decode("utf-8", "replace")
    assert len(texts) > 100
    leaks = [(name, s) for name, text in texts.items() for s in EXAMPLE_SECRETS if s in text]
    assert leaks == []
    # The receivers that need credentials read them from files.
    config = generated["alerts/alertmanager.yaml"]
    assert "routing_key_file:" in config and "api_url_file:" in config
    assert "credentials_file:" in config and "routing_key:" not in config


class Recorder:
    """Local stand-in for PagerDuty, Slack and a ticket webhook: records every POST."""

    def __init__(self) -> None:
        self.posts: list[tuple[str, dict, dict]] = []
        recorder = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                recorder.posts.append((self.path, dict(self.headers), json.loads(body or b"{}")))
                self.send_response(202)
                self.end_headers()
                self.wfile.write(b"{}")

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()


@pytest.fixture
def recorder() -> Iterator[Recorder]:
    found = Recorder()
    yield found
    found.server.shutdown()
    found.server.server_close()


def team_spec(name: str, routing: dict) -> JobSpec:
    data = yaml.safe_load(MINIMAL) | {"name": name, "team": name, "routing": routing}
    return JobSpec.model_validate(data)


@pytest.mark.e2e
@pytest.mark.xdist_group(STACK_GROUP)
def test_alertmanager_reads_every_credential_from_its_file(tmp_path: Path, recorder) -> None:
    values = {
        "pd": secrets.token_hex(16),
        "slack": f"{recorder.url}/slack/{secrets.token_hex(8)}",
        "token": secrets.token_urlsafe(16),
    }
    files = {}
    for key, value in values.items():
        files[key] = tmp_path / "secrets" / key
        files[key].parent.mkdir(exist_ok=True)
        files[key].write_text(value + "\n")  # as `kubectl create secret --from-file` often has
    specs = [
        team_spec(
            "alpha",
            {
                "page": {"kind": "pagerduty", "secret": {"file": str(files["pd"])}},
                "ticket": {
                    "kind": "webhook",
                    "target": f"{recorder.url}/tickets",
                    "secret": {"file": str(files["token"])},
                },
            },
        ),
        team_spec(
            "beta",
            {
                "ticket": {"kind": "slack", "secret": {"file": str(files["slack"])}},
                "notify_nobody": ["page"],
            },
        ),
    ]
    config = alertmanager_config(
        specs,
        "# test\n",
        timing=FAST_TIMING,
        global_config={"pagerduty_url": f"{recorder.url}/pagerduty"},
    )
    assert not any(value in config for value in values.values())
    config_path = tmp_path / "alertmanager.yml"
    config_path.write_text(config)
    checked = subprocess.run(
        [require_tool("amtool"), "check-config", str(config_path)],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr
    port = free_port()
    proc = reaper.spawn(  # dies with the test run, however it ends
        [
            require_tool("prometheus-alertmanager"),
            f"--config.file={config_path}",
            f"--storage.path={tmp_path / 'am'}",
            f"--web.listen-address=127.0.0.1:{port}",
            "--cluster.listen-address=",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        alerts = [
            {
                "labels": {
                    "alertname": f"A{sev}",
                    "team": team,
                    "severity": sev,
                    "training_job": team,
                }
            }
            for team, sev in (("alpha", "page"), ("alpha", "ticket"), ("beta", "ticket"))
        ]
        deadline = time.monotonic() + 30
        while True:
            try:
                request = urllib.request.Request(
                    f"http://127.0.0.1:{port}/api/v2/alerts",
                    data=json.dumps(alerts).encode(),
                    headers={"Content-Type": "application/json"},
                    method="POST",
                )
                urllib.request.urlopen(request, timeout=2).close()
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)
        while len({p for p, _, _ in recorder.posts}) < 3 and time.monotonic() < deadline:
            time.sleep(0.2)
    finally:
        proc.terminate()
        proc.wait(timeout=10)
    by_path = {path.split("/")[1]: (headers, body) for path, headers, body in recorder.posts}
    assert sorted(by_path) == ["pagerduty", "slack", "tickets"]
    assert by_path["pagerduty"][1]["routing_key"] == values["pd"]
    assert by_path["tickets"][0]["Authorization"] == f"Bearer {values['token']}"
    assert any(path == values["slack"].removeprefix(recorder.url) for path, _, _ in recorder.posts)


@pytest.mark.parametrize(
    "value",
    [
        "https://tickets.example.com/hooks/applied-ml",
        "https://github.com/example/trainsignals/blob/" + "0a1b2c3d4e" * 4 + "/runbooks",
        "https://grafana.example.com/d/ts-llama?orgId=1",
        "oncall@example.com",
        "Bearer tokens rotate monthly",
        "/etc/alertmanager/secrets/applied-ml-pagerduty/routing-key",
    ],
)
def test_ordinary_values_are_not_taken_for_secrets(value: str) -> None:
    assert looks_secret(value) is None
