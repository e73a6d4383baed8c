"""Promtool tests of the node incident record, fed with the hardware alerts' `ALERTS` directly.

Near the threshold (threshold - 1 against threshold incidents), one incident firing for hours
on eight GPUs and the node at once, a flapping fault, the same node in two jobs and a spare, a
restart of the job while its node's fault fires, and incidents older than 30 days. Tickets
(non-fatal evidence): a healthy node's two stay quiet, a node one ticket short of the score
stays quiet and one more flags it (a lemon before its second incident), tickets beside an
incident are that incident's, and tickets older than 30 days are forgotten.
"""

from __future__ import annotations

from trainsignals.generator.nodes.policy import (
    ALERT,
    NAME,
    NodesPolicy,
    hardware_faults,
    hardware_tickets,
)
from trainsignals.generator.nodes.rules import alert_rule
from trainsignals.generator.signals.node_incidents import (
    FAULTS,
    INCIDENTS,
    LAST_JOB,
    MERGE_SECONDS,
    SCORE,
    TICKETS,
    WINDOW_SECONDS,
)
from trainsignals.generator.signals.promql import matchers
from trainsignals.generator.spec.job import Links
from trainsignals.generator.testkit.series_notation import STALE, encode

START = 30  # minute of the first incident in every test
APART = 60  # minutes between separate incidents (more than the merge window)
SPARE = "spare-pool"  # the job label a spare node's exporter is scraped under
LONG_STEP_MINUTES = 5  # the 30-day test's evaluation interval


def episodes(minutes: int, spans: list[tuple[int, int]]) -> str:
    """promtool values of an `ALERTS` series firing during [start, end) minute spans, with the
    staleness marker Prometheus writes when an alert resolves."""
    values: list[float | str | None] = []
    for m in range(minutes + 1):
        if any(start <= m < end for start, end in spans):
            values.append(1.0)
        elif values and values[-1] == 1.0:
            values.append(STALE)
        else:
            values.append(None)
    return encode(values)


def _alert(alertname: str, node: str, job: str, severity: str = "page", **extra: str) -> str:
    labels = {
        "alertname": alertname,
        "alertstate": "firing",
        "job": job,
        "node": node,
        "severity": severity,
        "team": "some-team",
        "training_job": job,
        **extra,
    }
    return "ALERTS" + matchers(labels)


def _test(
    name: str,
    minutes: int,
    series: list[tuple[str, list[tuple[int, int]]]],
    checks: list[dict],
    step: int = 1,
) -> dict:
    """`minutes` and the spans are in steps of `step` minutes (the input series' interval)."""
    return {
        "name": name,
        "interval": f"{step}m",
        "input_series": [{"series": s, "values": episodes(minutes, spans)} for s, spans in series],
        **checks_by_kind(checks),
    }


def checks_by_kind(checks: list[dict]) -> dict:
    alerts = [c for c in checks if "alertname" in c]
    exprs = [c for c in checks if "expr" in c]
    return {
        **({"alert_rule_test": alerts} if alerts else {}),
        **({"promql_expr_test": exprs} if exprs else {}),
    }


def _count(record: str, minute: int, expected: dict[str, float], **labels: str) -> dict:
    """`record` (filtered by `labels`) at `minute`: {node or node,alertname...: value}."""
    return {
        "expr": record + (matchers(labels) if labels else ""),
        "eval_time": f"{minute}m",
        "exp_samples": [
            {"labels": record + matchers(dict(pairs)), "value": value}
            for pairs, value in sorted((tuple(sorted(k.items())), v) for k, v in _keys(expected))
        ],
    }


def _keys(expected: dict[str, float]) -> list[tuple[dict[str, str], float]]:
    """ "node-1" -> {node: node-1}; "node-1/GpuLost" -> {node, alertname}."""
    out = []
    for key, value in expected.items():
        node, _, alertname = key.partition("/")
        labels = {"node": node, **({"alertname": alertname} if alertname else {})}
        out.append((labels, value))
    return out


class NodeTests:
    """The suite for one policy and the infra teams of the specs ({team: jobs})."""

    def __init__(
        self, policy: NodesPolicy, links: Links, teams: dict[str, tuple[str, ...]]
    ) -> None:
        self.policy, self.links = policy, links
        self.teams = teams or {"": ("job-a",)}
        first = next(iter(self.teams))
        self.team, self.job = first, self.teams[first][0]
        # A second job: of another infra team where there is one (the ticket follows it).
        other = [(t, jobs[0]) for t, jobs in self.teams.items() if t != first]
        self.other_team, self.other_job = other[0] if other else (first, "job-b")
        self.faults = hardware_faults()
        self.tickets = hardware_tickets()
        self.dashboard_url = alert_rule(policy, links, teams)["annotations"]["dashboard_url"]

    def _ticket(
        self,
        minute: int,
        node: str,
        count: int,
        kinds: dict[str, int],
        last: str,
        team: str,
        tickets: int = 0,
    ) -> dict:
        history = "".join(f"{name} x{n}; " for name, n in sorted(kinds.items()))
        labels = {"job": NAME, "node": node, "severity": "ticket"}
        if team:
            labels["team"] = team
        threshold, per = self.policy.threshold, self.policy.tickets_per_incident
        score = "%.2g" % (count + tickets / per)
        return {
            "alertname": ALERT,
            "eval_time": f"{minute}m",
            "exp_alerts": [
                {
                    "exp_labels": labels,
                    "exp_annotations": {
                        "summary": f"Node {node}: {count} hardware incidents and {tickets} "
                        f"hardware tickets in 30 days (a lemon at {threshold})",
                        "description": f"Node {node} had {count} hardware incidents that "
                        f"killed a job and {tickets} non-fatal hardware tickets in 30 days, "
                        f"across jobs and spares: score {score} ({per} tickets weigh one "
                        f"incident; a lemon at {threshold}). By kind: {history}last job with a "
                        f"fault or ticket there: {last}. Drain it and run the vendor's "
                        "diagnostics before it kills another job.",
                        "runbook_url": f"{self.links.runbook_base_url.rstrip('/')}/{ALERT}.md",
                        "dashboard_url": self.dashboard_url,
                    },
                }
            ],
        }

    def _quiet(self, minute: int) -> dict:
        return {"alertname": ALERT, "eval_time": f"{minute}m", "exp_alerts": []}

    def near_threshold(self) -> dict:
        """threshold - 1 incidents: recorded, no ticket; threshold: the ticket, with history."""
        n = self.policy.threshold
        down, lost = self.faults[0], self.faults[1]
        spans = [(START + i * APART, START + i * APART + 20) for i in range(n)]
        end = spans[-1][1] + 10
        series = [
            (_alert(down, "node-1", self.job), spans[: n - 1]),
            (_alert(down, "node-2", self.job), spans[: n - 1]),
            (_alert(lost, "node-2", self.job, gpu="3"), spans[n - 1 :]),
        ]
        before = spans[-1][0] - 1
        return _test(
            f"{ALERT}: {n - 1} incidents of a node are recorded, {n} ticket infra",
            end,
            series,
            [
                _count(INCIDENTS, before, {"node-1": n - 1, "node-2": n - 1}),
                self._quiet(before),
                _count(INCIDENTS, end, {"node-1": n - 1, "node-2": n}),
                _count(FAULTS, end, {"node-2/" + down: n - 1, "node-2/" + lost: 1}, node="node-2"),
                self._ticket(end, "node-2", n, {lost: 1, down: n - 1}, self.job, self.team),
            ],
        )

    def long_incident(self) -> dict:
        """A fault firing for hours on eight GPUs, with the node down too, and a fault that flaps
        (resolves and returns within the merge window): one incident each, however long."""
        xid, down = self.faults[-1], self.faults[0]
        merge = MERGE_SECONDS // 60
        end = START + 6 * 60
        series = [
            (_alert(xid, "node-1", self.job, gpu=str(gpu)), [(START + gpu, end)])
            for gpu in range(8)
        ]
        series.append((_alert(down, "node-1", self.job), [(START + 5, START + 90)]))
        flaps = [(START + i * (merge - 2), START + i * (merge - 2) + 3) for i in range(5)]
        series.append((_alert(down, "node-2", self.job), flaps))
        return _test(
            f"{ALERT}: a fault firing for hours, or flapping, is one incident",
            end + 10,
            series,
            [
                _count(INCIDENTS, end + 10, {"node-1": 1, "node-2": 1}),
                _count(FAULTS, end + 10, {"node-1/" + xid: 1, "node-1/" + down: 1}, node="node-1"),
                self._quiet(end + 10),
            ],
        )

    def across_jobs(self) -> dict:
        """The same node failing in two jobs and as a spare: one history; the ticket goes to
        the infra team of the job that last saw a fault there."""
        n = self.policy.threshold
        down = self.faults[0]
        jobs = [self.job, SPARE, *[self.other_job] * (n - 2)]
        spans = [(START + i * APART, START + i * APART + 15) for i in range(n)]
        by_job: dict[str, list[tuple[int, int]]] = {}
        for job, span in zip(jobs, spans, strict=True):
            by_job.setdefault(job, []).append(span)
        series = [(_alert(down, "node-7", job), job_spans) for job, job_spans in by_job.items()]
        end = spans[-1][1] + 5
        team = self.other_team if jobs[-1] == self.other_job else self.team
        return _test(
            f"{ALERT}: one node's incidents add up across jobs and spares",
            end,
            series,
            [
                _count(INCIDENTS, end, {"node-7": n}),
                {
                    "expr": LAST_JOB,
                    "eval_time": f"{end}m",
                    "exp_samples": [
                        {
                            "labels": LAST_JOB
                            + matchers({"node": "node-7", "training_job": jobs[-1]}),
                            "value": spans[-1][0] * 60,
                        }
                    ],
                },
                self._ticket(end, "node-7", n, {down: n}, jobs[-1], team),
            ],
        )

    def job_restart(self) -> dict:
        """The job restarts while its node's fault fires: the alert resolves with the old
        ranks and fires again from the new ones (other instance labels) a few minutes later.
        One incident, not two; a fault an hour later is the second."""
        down = self.faults[0]
        restart = START + 40
        series = [
            (_alert(down, "node-3", self.job, instance="old:9400"), [(START, restart)]),
            (
                _alert(down, "node-3", self.job, instance="new:9400"),
                [(restart + 4, restart + 30), (START + 3 * APART, START + 200)],
            ),
        ]
        return _test(
            f"{ALERT}: a restart of the job during a fault is the same incident",
            START + 210,
            series,
            [
                _count(INCIDENTS, restart + 20, {"node-3": 1}),
                _count(INCIDENTS, START + 210, {"node-3": 2}),
            ],
        )

    def aged_out(self) -> dict:
        """Incidents and tickets older than 30 days no longer count: two incidents then, one
        now; tickets one short of the threshold then, one now; no ticket. Run at a 5m
        evaluation interval (31 days at 1m cost promtool ~40 s of CPU): the start rules hold
        at any interval up to the merge window."""
        n, step = self.policy.threshold, LONG_STEP_MINUTES
        down, kind = self.faults[0], self.tickets[0]
        window = WINDOW_SECONDS // 60 // step
        apart, start = APART // step, START // step
        old = [(start + i * apart, start + i * apart + 2) for i in range(n - 1)]
        short = n * self.policy.tickets_per_incident - 1
        old_tickets = [(start + i * apart, start + i * apart + 2) for i in range(short)]
        late = start + window + short * apart
        end = late + 4
        early = (start + window - apart) * step
        return _test(
            f"{ALERT}: incidents and tickets older than 30 days are forgotten",
            end,
            [
                (_alert(down, "node-9", self.job), [*old, (late, late + 2)]),
                (_alert(kind, "node-8", self.job, "ticket"), [*old_tickets, (late, late + 2)]),
            ],
            [
                _count(INCIDENTS, early, {"node-9": n - 1}),
                _count(TICKETS, early, {"node-8": short}),
                _count(INCIDENTS, end * step, {"node-9": 1}),
                _count(TICKETS, end * step, {"node-8": 1}),
                self._quiet(end * step),
            ],
            step,
        )

    def tickets_near_threshold(self) -> dict:
        """Tickets (non-fatal evidence) add 1/tickets_per_incident each. A healthy node with two
        tickets, and one with an incident and one ticket short of the threshold, stay quiet;
        one more ticket flags the lemon before its second incident. Every ticket kind takes a
        turn, on GPU 0 or the node."""
        n, per = self.policy.threshold, self.policy.tickets_per_incident
        down = self.faults[0]
        short = (n - 1) * per - 1  # tickets that leave node-1 just under the threshold
        spans = [(START + APART * (i + 1), START + APART * (i + 1) + 15) for i in range(short + 1)]
        end = spans[-1][1] + 10
        series: list[tuple[str, list[tuple[int, int]]]] = [
            (_alert(down, node, self.job), [(START, START + 20)]) for node in ("node-1", "node-2")
        ]
        kinds: dict[str, int] = {}
        for i, span in enumerate(spans):
            kind = self.tickets[i % len(self.tickets)]
            for node in ("node-1", "node-2") if i < short else ("node-2",):
                series.append((_alert(kind, node, self.job, "ticket", gpu="0"), [span]))
            kinds[kind] = kinds.get(kind, 0) + 1
        healthy = self.tickets[:2]
        for i, kind in enumerate(healthy):
            series.append((_alert(kind, "node-3", self.job, "ticket"), [spans[i]]))
        before = spans[-1][0] - 1
        return _test(
            f"{ALERT}: 1 incident and {short} tickets stay quiet, {short + 1} ticket infra; a "
            "healthy node's 2 tickets stay quiet",
            end,
            series,
            [
                _count(TICKETS, before, {"node-1": short, "node-2": short, "node-3": 2}),
                self._quiet(before),
                _count(TICKETS, end, {"node-1": short, "node-2": short + 1, "node-3": 2}),
                _count(
                    SCORE,
                    end,
                    {"node-1": 1 + short / per, "node-2": 1 + (short + 1) / per, "node-3": 2 / per},
                ),
                self._ticket(
                    end, "node-2", 1, {down: 1, **kinds}, self.job, self.team, tickets=short + 1
                ),
            ],
        )

    def tickets_of_an_incident(self) -> dict:
        """Tickets firing with a hardware fault, or within the merge window after it, are that
        incident's: none is counted. One firing an hour later is."""
        down, xid = self.faults[0], self.faults[-1]
        merge = MERGE_SECONDS // 60
        first, second = self.tickets[0], self.tickets[-1]
        later = START + 2 * APART
        series = [
            (_alert(down, "node-4", self.job), [(START, START + 30)]),
            (_alert(first, "node-4", self.job, "ticket"), [(START + 2, START + 40)]),
            (_alert(xid, "node-5", self.job, gpu="1"), [(START, START + 30)]),
            (
                _alert(second, "node-5", self.job, "ticket", gpu="1"),
                [(START + 30 + merge - 3, START + 50), (later, later + 20)],
            ),
        ]
        return _test(
            f"{ALERT}: tickets beside a hardware fault are its incident's",
            later + 30,
            series,
            [
                _count(INCIDENTS, START + 90, {"node-4": 1, "node-5": 1}),
                _count(TICKETS, START + 90, {}),
                _count(TICKETS, later + 30, {"node-5": 1}),
            ],
        )

    def suite(self) -> list[dict]:
        return [
            self.near_threshold(),
            self.long_incident(),
            self.across_jobs(),
            self.job_restart(),
            self.tickets_near_threshold(),
            self.tickets_of_an_incident(),
        ]


def rule_tests(
    policy: NodesPolicy, links: Links, teams: dict[str, tuple[str, ...]], rules_file: str
) -> dict:
    return {
        "rule_files": [rules_file],
        "evaluation_interval": "1m",
        "tests": NodeTests(policy, links, teams).suite(),
    }


def long_tests(
    policy: NodesPolicy, links: Links, teams: dict[str, tuple[str, ...]], rules_file: str
) -> dict:
    """The 30-day test, in its own file at a 5m evaluation interval."""
    return {
        "rule_files": [rules_file],
        "evaluation_interval": f"{LONG_STEP_MINUTES}m",
        "tests": [NodeTests(policy, links, teams).aged_out()],
    }
