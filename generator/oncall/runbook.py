"""The OncallPageLoadHigh runbook."""

from __future__ import annotations

from trainsignals.generator.oncall.delivered import NOTIFIED
from trainsignals.generator.oncall.policy import ALERT, DASHBOARD_UID, MEANING, NAME, OncallPolicy
from trainsignals.generator.oncall.rules import alert_rule, started_expr
from trainsignals.generator.spec.job import JobSpec, Links


def runbook(policy: OncallPolicy, links: Links, specs: list[JobSpec], header: str) -> str:
    limit, shift = policy.max_pages_per_shift, policy.shift
    dashboard = f"{links.grafana_base_url.rstrip('/')}/d/{DASHBOARD_UID}/{NAME}"
    teams: dict[str, list[JobSpec]] = {}
    for spec in sorted(specs, key=lambda s: s.name):
        teams.setdefault(spec.team, []).append(spec)
    rows = [
        f"| {team} | {', '.join(s.name for s in team_specs)} | "
        f"{', '.join(sorted({s.rotation for s in team_specs if s.rotation})) or '(none)'} |"
        for team, team_specs in sorted(teams.items())
    ]
    return "\n".join(
        [
            header,
            "",
            f"# {ALERT}",
            "",
            f"**Severity:** ticket. **Fires when** a team is paged more than {limit} times in "
            f"any {shift} window (the shift) for {policy.for_}.",
            "",
            "## What it means",
            "",
            MEANING,
            "",
            "A page is one firing episode of one training job's alert (Alertmanager's "
            "notification group: team, severity, training_job, alertname). An alert firing for "
            "hours is one page; eight GPUs failing together are one page; the same alert "
            "resolving and firing again is two. Only what Alertmanager notifies counts: "
            f"`{NOTIFIED}` is `ALERTS` minus what the inhibit rules mute (one incident pages "
            "once); silenced alerts still count.",
            "",
            "## Triage",
            "",
            f"1. Open the [on-call dashboard]({dashboard}) and pick the team.",
            "2. *Top alerts by pages (7d)*: one or two alert names usually carry the load.",
            "3. For each of them, decide:",
            "   - a real fault that keeps recurring: fix its cause (a bad node, a flaky "
            "storage mount), and drain or replace the hardware;",
            "   - not urgent (nobody had to act within the hour): demote it to a ticket in the "
            "job's spec, `alerts: {AlertName: ticket}`, and regenerate;",
            "   - a symptom of another alert that also paged: inhibit it in Alertmanager "
            "while the cause fires, so one fault pages once;",
            "   - too sensitive: raise its threshold or window in the spec's `objectives`.",
            "4. If the load is genuine and lasting, share it: a second rotation or fewer jobs "
            "per team.",
            "",
            "## PromQL",
            "",
            "Episode starts (recorded each step, one sample per episode):",
            "",
            "```promql",
            started_expr(policy),
            "```",
            "",
            f'Pages per shift: `{policy.per_shift_record}{{severity="page"}}`, the sum of '
            f"those starts over {shift}. Alert: `{alert_rule(policy, links)['expr']}`.",
            "",
            "## Teams",
            "",
            "| team | jobs | rotation |",
            "|---|---|---|",
            *rows,
            "",
        ]
    )
