"""The alerts Alertmanager notifies, as PromQL: firing `ALERTS` minus what its inhibit rules mute.

On-call load must count pages that reached a pager. `ALERTS` is recorded before Alertmanager,
so one incident with two inhibited consequences counted three pages. Alertmanager 0.25 does
not tell which alerts it notified per team: `alertmanager_notifications_total` has only an
`integration` label (a `receiver_name` label came in later releases), counts every attempt
(repeats and resolved messages included) and is blind to inhibition per alert. So the rule
applies the same inhibit rules (generator/routing/inhibit.py's INHIBIT_RULES, one definition) to
`ALERTS` with Alertmanager's semantics: a firing source mutes targets whose `equal` labels match
(missing labels count as empty, as `on (...)` does), and a muted source still mutes. Not seen
here: silences (a person decided) and failed deliveries (AlertmanagerNotificationsFailing and
`trainsignals readiness` cover those).
"""

from __future__ import annotations

from trainsignals.generator.routing.inhibit import INHIBIT_RULES

NOTIFIED = "alertname:trainsignals_alerts_notified:firing"
FIRING = 'ALERTS{alertstate="firing"}'


def _selector(matchers: list[str]) -> str:
    return "ALERTS{" + ",".join(['alertstate="firing"', *matchers]) + "}"


def muted_expr() -> str:
    """Firing alerts some inhibit rule mutes: target and on (equal) a firing source."""
    terms = []
    for _, rule in INHIBIT_RULES:
        equal = ", ".join(rule.get("equal", []))
        terms.append(
            f"({_selector(rule['target_matchers'])} and on ({equal}) "
            f"{_selector(rule['source_matchers'])})"
        )
    return " or ".join(terms)


def notified_expr() -> str:
    """Firing alerts that no inhibit rule mutes (what Alertmanager sends, silences aside)."""
    return f"{FIRING} unless ({muted_expr()})"
