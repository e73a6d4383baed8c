"""Local stand-ins for PagerDuty Events v2 and a Slack incoming webhook, on 127.0.0.1, that
reject what the real services reject, so a notification the real pager would refuse fails here.

PagerDuty Events v2 (developer.pagerduty.com, "Send an Alert Event"): `routing_key` (32
characters) and `event_action` (trigger, acknowledge, resolve) are required; a trigger needs
`payload.summary` (non-empty, at most 1024 characters), `payload.source` and `payload.severity`
(critical, error, warning or info); `dedup_key` at most 255 characters. A refused event gets
400 with `errors`, which Alertmanager does not retry. Slack needs a non-empty message.
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

PD_SEVERITIES = ("critical", "error", "warning", "info")


def pagerduty_errors(event: dict) -> list[str]:
    errors = []
    if len(str(event.get("routing_key", ""))) != 32:
        errors.append("routing_key must be a 32-character integration key")
    action = event.get("event_action")
    if action not in ("trigger", "acknowledge", "resolve"):
        errors.append(f"event_action {action!r} is invalid")
    if len(str(event.get("dedup_key", ""))) > 255:
        errors.append("dedup_key longer than 255 characters")
    if action == "trigger":
        payload = event.get("payload") or {}
        summary = str(payload.get("summary", ""))
        if not summary.strip():
            errors.append("payload.summary is missing or empty")
        if len(summary) > 1024:
            errors.append(f"payload.summary is {len(summary)} characters (at most 1024)")
        if not str(payload.get("source", "")).strip():
            errors.append("payload.source is missing")
        if payload.get("severity") not in PD_SEVERITIES:
            errors.append(f"payload.severity {payload.get('severity')!r} is invalid")
    return errors


def slack_errors(message: dict) -> list[str]:
    parts = [message.get("text", "")] + [
        f"{a.get('title', '')}{a.get('text', '')}" for a in message.get("attachments", [])
    ]
    if not any(str(p).strip() for p in parts):
        return ["no_text"]
    attachment = (message.get("attachments") or [{}])[0]
    errors = []
    if not str(attachment.get("title", "")).strip():
        errors.append("attachment title is empty")
    if not str(attachment.get("text", "")).strip():
        errors.append("attachment text is empty")
    return errors


@dataclass
class Received:
    path: str
    body: dict
    status: int
    errors: list[str] = field(default_factory=list)


class PagerShaped:
    """POST /pagerduty (Events v2) and /slack/...; records every request and its answer.
    Paths starting with one of `failing` are answered 500 (an outage: Alertmanager retries)."""

    def __init__(self) -> None:
        self.received: list[Received] = []
        self.failing: set[str] = set()
        self._lock = threading.Lock()
        shaped = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                raw = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                try:
                    body = json.loads(raw or b"{}")
                except ValueError:
                    body, errors = {}, ["body is not JSON"]
                else:
                    check = pagerduty_errors if self.path.startswith("/pagerduty") else slack_errors
                    errors = check(body)
                status = 400 if errors else 202
                if any(self.path.startswith(prefix) for prefix in shaped.failing):
                    status, errors = 500, ["outage"]
                with shaped._lock:
                    shaped.received.append(Received(self.path, body, status, errors))
                answer = {"status": "invalid event", "errors": errors} if errors else {}
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.end_headers()
                self.wfile.write(json.dumps(answer or {"status": "success"}).encode())

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def snapshot(self) -> list[Received]:
        with self._lock:
            return list(self.received)

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()
