"""Lemon nodes: hardware incidents per node across jobs and spares, recorded, shown, ticketed.

Modules: `policy` (threshold, windows, shared names), `rules`, `unit_tests` (promtool), and
`files` (all of them for a set of specs, with the runbook). The PromQL primitives are in
generator/signals/node_incidents.py (why the record counts incident starts, not minutes).

Generated files (shared by all jobs, like the on-call files):
- `alerts/nodes.rules.yaml`: the incident starts per node (1m), their 30-day count, kinds and
  last job (slow interval), and the `NodeIncidentsRecurring` ticket for the infra team;
- `alerts/nodes.test.yaml`: promtool tests feeding the hardware alerts' `ALERTS` directly;
- `runbooks/NodeIncidentsRecurring.md`.
The "nodes by incident count" panel is on every job's dashboard (dashboards/suspect_panels.py).
"""
