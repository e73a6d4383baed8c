"""The on-call files for all specs: rules, promtool tests, dashboard and runbook."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from trainsignals import __version__
from trainsignals.generator.artifacts.kind import ArtifactKind, Run
from trainsignals.generator.oncall.dashboard import build_dashboard
from trainsignals.generator.oncall.policy import ALERT, NAME, OncallPolicy
from trainsignals.generator.oncall.rules import rules_document
from trainsignals.generator.oncall.runbook import runbook
from trainsignals.generator.oncall.unit_tests import rule_tests
from trainsignals.generator.output.files import GENERATED_MARK, Options, dashboard_text
from trainsignals.generator.output.yaml import dump
from trainsignals.generator.spec.job import JobSpec, Links


def default_policy(options: Options) -> OncallPolicy:
    """A 12h shift with a budget of two pages, scaled by `options.time_scale`."""
    return OncallPolicy(time_scale=options.time_scale)


def oncall_document(specs: list[tuple[JobSpec, str]], options: Options | None = None) -> dict:
    """The rules document of alerts/oncall.rules.yaml as oncall_files writes it with the
    default policy (the Kubernetes PrometheusRule wraps it)."""
    links = specs[0][0].links if specs else Links()
    return rules_document(default_policy(options or Options()), links)


def oncall_files(
    specs: list[tuple[JobSpec, str]],
    options: Options | None = None,
    policy: OncallPolicy | None = None,
) -> dict[str, str]:
    """The on-call rules, tests, dashboard and runbook for all these specs.

    Links (runbook and Grafana base URLs) come from the first spec; `policy` defaults to a
    12h shift with a budget of two pages, scaled by `options.time_scale`.
    """
    if any(spec.name == NAME for spec, _ in specs):
        raise ValueError(
            f"a job may not be named {NAME!r}: the on-call files use that name; rename the job"
        )
    options = options or Options()
    policy = policy or default_policy(options)
    links = specs[0][0].links if specs else Links()
    sources = ", ".join(source for _, source in specs) or "no spec"
    mark = (
        f"{GENERATED_MARK} {__version__} from {sources} (on-call policy: at most "
        f"{policy.max_pages_per_shift} pages per {policy.shift} shift)."
    )
    header = f"# {mark}\n# Do not edit: change the specs and run `trainsignals generate`.\n"
    files = {f"alerts/{NAME}.rules.yaml": dump(rules_document(policy, links), header)}
    if options.with_tests and policy.time_scale == 1:
        files[f"alerts/{NAME}.test.yaml"] = dump(rule_tests(policy), header)
    if options.with_dashboards:
        dashboard = build_dashboard(
            policy, links, f"Pages and tickets per team. {mark} Do not edit."
        )
        files[f"dashboards/{NAME}.json"] = dashboard_text(dashboard)
    files[f"runbooks/{ALERT}.md"] = runbook(
        policy, links, [spec for spec, _ in specs], f"<!-- {mark} Do not edit. -->"
    )
    return files


class OncallKind(ArtifactKind):
    """The on-call load of all teams: oncall_files."""

    name = "oncall"

    def fleet_files(self, run: Run, parts: Sequence[Any]) -> dict[str, str]:
        return oncall_files(list(run.specs), run.options)
