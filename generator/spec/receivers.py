"""Where a team's notifications go: the `routing` section of a spec.

Credentials are references (generator/spec/secrets.py): a PagerDuty routing key and a Slack webhook
URL are secrets in full, so those kinds take only `secret`; a plain webhook has a non-secret
`target` URL plus an optional bearer token by `secret`.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from trainsignals.generator.spec.secrets import HOW_TO_REFERENCE, SecretRef, looks_secret

_SECRET_MEANING = {
    "pagerduty": "the PagerDuty routing key",
    "slack": "the Slack incoming-webhook URL",
    "webhook": "a bearer token sent in the Authorization header (optional)",
}


class Receiver(BaseModel):
    """webhook: `target` URL (+ optional bearer token `secret`); email: `target` address;
    pagerduty: `secret` holds the routing key; slack: `secret` holds the webhook URL."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: Literal["webhook", "slack", "pagerduty", "email"] = Field(
        "webhook", description="What kind of receiver; decides which of target and secret it takes."
    )
    target: str | None = Field(
        None, description="webhook: the URL (no credentials in it); email: the address."
    )
    secret: SecretRef | None = Field(
        None,
        description="pagerduty: the routing key; slack: the webhook URL; webhook: an optional "
        "bearer token. A reference, never the value.",
    )

    @model_validator(mode="after")
    def _fields_for_kind(self) -> Receiver:
        if self.kind in ("pagerduty", "slack"):
            if self.target is not None:
                raise ValueError(
                    f"`target` of a {self.kind} receiver would be {_SECRET_MEANING[self.kind]} "
                    f"in plain text; remove it and {HOW_TO_REFERENCE}"
                )
            if self.secret is None:
                raise ValueError(
                    f"a {self.kind} receiver needs `secret` ({_SECRET_MEANING[self.kind]}): "
                    f"{HOW_TO_REFERENCE}"
                )
            return self
        if not self.target:
            what = "URL" if self.kind == "webhook" else "address"
            raise ValueError(f"a {self.kind} receiver needs `target` (the {what})")
        if self.kind == "email" and self.secret is not None:
            raise ValueError(
                "an email receiver takes no `secret`: SMTP credentials are Alertmanager's "
                "global settings"
            )
        what = looks_secret(self.target)
        if what:
            raise ValueError(
                f"`target` looks like {what}; use a URL without credentials and put the token "
                f"in `secret` (sent as a bearer token): {HOW_TO_REFERENCE}"
            )
        return self

    @property
    def describe(self) -> str:
        """For error messages: never the secret itself, only where it lives."""
        where = self.target if self.secret is None else f"secret {self.secret.path}"
        if self.target and self.secret:
            where = f"{self.target} + {where}"
        return f"{self.kind} {where}"


Severity = Literal["page", "ticket"]


class Routing(BaseModel):
    """A team's receivers per severity. A severity the team's alerts can have needs a receiver
    (generation fails otherwise) unless `notify_nobody` lists it:
    the explicit opt-in for alerts that reach no one (e.g. a sandbox job)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    page: Receiver | None = Field(None, description="Where the team's pages go.")
    ticket: Receiver | None = Field(None, description="Where the team's tickets go.")
    notify_nobody: tuple[Severity, ...] = Field(
        (),
        description="Severities that may reach no one (e.g. a sandbox job): the explicit "
        "opt-out of the routing check.",
    )

    @model_validator(mode="after")
    def _nobody_means_no_receiver(self) -> Routing:
        for severity in self.notify_nobody:
            if getattr(self, severity) is not None:
                raise ValueError(
                    f"notify_nobody lists {severity} but routing.{severity} names a receiver; "
                    "remove one of them"
                )
        return self
