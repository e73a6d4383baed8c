"""On-call load: how often each team is paged and ticketed, recorded, shown and alerted on.

Modules: `policy` (shift, page budget, shared names), `rules`, `unit_tests` (promtool),
`dashboard`, `runbook`, and `files` (all of them for a set of specs).

Generated files (shared by all jobs, like the Alertmanager config):
- `alerts/oncall.rules.yaml`: recording rules over Prometheus' own `ALERTS` series and the
  `OncallPageLoadHigh` ticket (a team paged more than `max_pages_per_shift` times per shift);
- `alerts/oncall.test.yaml`: promtool tests feeding `ALERTS` episodes directly;
- `dashboards/oncall.json`: pages and tickets per day, per shift, by team and alert name;
- `runbooks/OncallPageLoadHigh.md`.

What counts as one page. `ALERTS{alertstate="firing"}` has one sample per series and rule
evaluation while an alert fires, so counting samples counts minutes, not pages. A page is one
*episode* of one Alertmanager notification group: Alertmanager routes by team and severity and
groups by (training_job, alertname), so eight GPUs hitting the same XID together are one
notification, one page. An episode starts at the evaluation where the group has a firing
series and had none one step earlier (`unless ... offset <step>`). That onset is recorded once
per evaluation of a group whose interval is pinned to the same step, so every episode yields
exactly one sample of the "started" series; `sum_over_time` over a shift then counts episodes.
Resolved alerts get a staleness marker from Prometheus, so a group that resolves and fires
again more than a step later is a new episode; a group that stays firing is one, however long.

The counts are of what Alertmanager notifies: firing alerts minus those its inhibit rules mute
(generator/oncall/delivered.py applies the same rules to `ALERTS`), so one incident with two
inhibited consequences is one page. Silences still count: a silence is set by a person who was
interrupted.

The shift is a rolling window (default 12h): "more than two pages in any 12 hours" does not
depend on where a team's handovers are, and it never misses a bad shift (it can flag three pages
that straddle a handover, which is still a bad night for somebody).
"""
