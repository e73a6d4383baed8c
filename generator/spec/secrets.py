"""Secrets by reference: a spec names where a secret lives, never the secret itself.

Routing keys, chat webhook URLs and tokens would otherwise land in committed, generated files.
A `SecretRef` names a Kubernetes Secret (name, key) and/or a file; the Alertmanager config reads
the file (`routing_key_file`, `api_url_file`, `credentials_file`) and the prometheus-operator
objects reference the Secret. Alertmanager 0.25 does not expand environment variables in its
config, so a file is the one reference that works everywhere.

`secret_problems` finds literal secret-looking strings anywhere in a spec, so a pasted key is
refused before anything is written.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Annotated
from urllib.parse import parse_qsl, urlsplit

from pydantic import BaseModel, ConfigDict, Field, model_validator

# Where prometheus-operator mounts the Secrets listed in an Alertmanager's `spec.secrets`
# (/etc/alertmanager/secrets/<name>/<key>); a plain Alertmanager host uses the same layout.
SECRETS_DIR = "/etc/alertmanager/secrets"

K8S_NAME = r"^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$"
SECRET_KEY = r"^[-._a-zA-Z0-9]{1,253}$"

HOW_TO_REFERENCE = (
    "put the value in a Kubernetes Secret or a file readable by Alertmanager and reference it: "
    "`secret: {name: <secret>, key: <key>}` (read from "
    f"{SECRETS_DIR}/<secret>/<key>) or `secret: {{file: /path/to/file}}`"
)


class SecretRef(BaseModel):
    """Where a secret lives: a Kubernetes Secret (name, key), a file, or both."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: Annotated[str, Field(pattern=K8S_NAME)] | None = Field(
        None, description="Kubernetes Secret holding the value (with key)."
    )
    key: Annotated[str, Field(pattern=SECRET_KEY)] | None = Field(
        None, description="Key of the value in the Secret."
    )
    file: Annotated[str, Field(pattern=r"^/")] | None = Field(
        None,
        description=f"Absolute path Alertmanager reads the value from "
        f"(default: {SECRETS_DIR}/<name>/<key>).",
    )

    @model_validator(mode="after")
    def _complete(self) -> SecretRef:
        if (self.name is None) != (self.key is None):
            raise ValueError("a Secret reference needs both `name` and `key`")
        if self.name is None and self.file is None:
            raise ValueError(f"name the secret: {HOW_TO_REFERENCE}")
        return self

    @property
    def path(self) -> str:
        """The file Alertmanager reads the value from."""
        return self.file or f"{SECRETS_DIR}/{self.name}/{self.key}"


# Known token formats and webhook endpoints whose URL is the credential.
_TOKEN_PATTERNS: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"hooks\.slack\.com/(services|workflows|triggers)/"), "a Slack webhook URL"),
    (re.compile(r"\bxox[abposr]-[A-Za-z0-9-]{8,}"), "a Slack token"),
    (re.compile(r"discord(app)?\.com/api/webhooks/"), "a Discord webhook URL"),
    (re.compile(r"\.webhook\.office\.com/|outlook\.office\.com/webhook"), "a Teams webhook URL"),
    (re.compile(r"events\.pagerduty\.com/integration/"), "a PagerDuty integration URL"),
    (re.compile(r"\b(gh[pousr]_[A-Za-z0-9]{20,}|github_pat_\w{20,})"), "a GitHub token"),
    (re.compile(r"\bAKIA[0-9A-Z]{16}\b"), "an AWS access key"),
    (re.compile(r"\bglpat-[A-Za-z0-9_-]{20,}"), "a GitLab token"),
    (re.compile(r"(?i)\bbearer\s+\S{8,}"), "a bearer token"),
    (re.compile(r"-----BEGIN [A-Z ]*PRIVATE KEY-----"), "a private key"),
    (re.compile(r"^[0-9a-f]{32}$"), "a PagerDuty routing key (32 hex digits)"),
)
_SECRET_PARAM = re.compile(r"(?i)(token|secret|passw|api[_-]?key|apikey|sig|auth|code|key)")
# A long run of letters and digits (both) in a URL path is a credential in practice.
_RANDOM_SEGMENT = re.compile(r"^(?=.*[0-9])(?=.*[A-Za-z])[A-Za-z0-9_-]{24,}$")
_COMMIT = re.compile(r"^([0-9a-f]{40}|[0-9a-f]{64})$")  # a git commit in a runbook link


def looks_secret(value: str) -> str | None:
    """What secret `value` looks like, or None when it looks harmless."""
    for pattern, what in _TOKEN_PATTERNS:
        if pattern.search(value):
            return what
    if "://" not in value:
        return None
    try:
        url = urlsplit(value.strip())
    except ValueError:
        return None
    if url.password:
        return "a URL with a password"
    for name, _ in parse_qsl(url.query, keep_blank_values=True):
        if _SECRET_PARAM.search(name):
            return f"a URL with a credential in its query ({name}=...)"
    for segment in url.path.split("/"):
        if _RANDOM_SEGMENT.match(segment) and not _COMMIT.match(segment):
            return "a URL with a token-like path segment"
    return None


def _strings(data: object, path: str) -> Iterator[tuple[str, str]]:
    if isinstance(data, dict):
        for key, value in data.items():
            yield from _strings(value, f"{path}.{key}" if path else str(key))
    elif isinstance(data, list | tuple):
        for i, value in enumerate(data):
            yield from _strings(value, f"{path}[{i}]")
    elif isinstance(data, str):
        yield path, data


def secret_problems(data: object) -> list[str]:
    """One line per literal secret-looking string in a raw spec: 'field: what; fix'."""
    return [
        f"{field}: looks like {what} written in the spec; secrets never go into specs or "
        f"generated files: {HOW_TO_REFERENCE}"
        for field, value in _strings(data, "")
        if (what := looks_secret(value))
    ]
