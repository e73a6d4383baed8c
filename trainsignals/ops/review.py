"""`trainsignals diff`: what a change does to alerts, recording rules and dashboards.

Reviewers of a spec change see a diff of the spec and of thousands of generated lines; this
turns the generated side into a short Markdown summary (a pull-request comment) that leads
with what wakes people up: every page added, removed, promoted or changed.
"""

from __future__ import annotations

import json
import re
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

import click
import yaml

GENERATED = re.compile(r"^(alerts/(?P<rules>[^/]+)\.rules\.yaml|dashboards/(?P<dash>[^/]+)\.json)$")
# Quoted strings, identifiers (metric names may hold digits and colons), numbers with an
# optional duration unit, then any other single character.
EXPR_TOKEN = re.compile(r'"[^"]*"|[A-Za-z_:][\w:]*|\d+(?:\.\d+)?(?:e[+-]?\d+)?[a-z]*|\S')
NO_ALERT_CHANGES = "No alert changes."


# --- reading the generated files of a revision ------------------------------------------


def git(repo: Path, *args: str) -> str:
    result = subprocess.run(
        ["git", "-C", str(repo), *args], capture_output=True, text=True, check=False
    )
    if result.returncode != 0:
        raise click.ClickException(f"git {' '.join(args)}: {result.stderr.strip()}")
    return result.stdout


def git_root(repo: Path) -> Path:
    """The checkout holding `repo`; outside one, an error that says what to do instead."""
    try:
        result = subprocess.run(
            ["git", "-C", str(repo), "rev-parse", "--show-toplevel"],
            capture_output=True, text=True, check=False,
        )  # fmt: skip
    except FileNotFoundError:
        result = None
    if result is None or result.returncode != 0:
        raise click.ClickException(
            f"{repo}: not inside a git checkout, so there are no revisions to compare. Run it "
            "in the repository that commits the generated alerts/ and dashboards/ (or pass "
            "--repo), or compare two output folders: `trainsignals diff OLD_DIR NEW_DIR` "
            "(each written by `trainsignals generate --out DIR`)."
        )
    return Path(result.stdout.strip())


def default_base(repo: Path) -> str:
    """Where this branch left main; HEAD itself when there is no main to compare with."""
    result = subprocess.run(
        ["git", "-C", str(repo), "merge-base", "HEAD", "main"], capture_output=True, text=True
    )
    return result.stdout.strip() if result.returncode == 0 else "HEAD"


def revision_files(repo: Path, rev: str | None) -> dict[str, str]:
    """Generated rules and dashboards at `rev` ({path: content}); None reads the work tree."""
    if rev is None:
        paths = [
            p.relative_to(repo).as_posix()
            for d in ("alerts", "dashboards")
            for p in (repo / d).glob("*")
        ]
        return {
            p: (repo / p).read_text(encoding="utf-8") for p in sorted(paths) if GENERATED.match(p)
        }
    listed = git(repo, "ls-tree", "-r", "--name-only", rev, "--", "alerts", "dashboards")
    paths = [p for p in listed.splitlines() if GENERATED.match(p)]
    return {p: git(repo, "show", f"{rev}:{p}") for p in paths}


def revision_label(repo: Path, rev: str | None) -> str:
    if rev is None:
        return "work tree"
    short = git(repo, "rev-parse", "--short", rev).strip()
    return short if rev.startswith(short) or rev == short else f"{rev} ({short})"


# --- parsed snapshot per job ----------------------------------------------------------------


@dataclass
class JobSnapshot:
    alerts: dict[str, dict] = field(default_factory=dict)
    records: dict[str, dict] = field(default_factory=dict)
    dashboard: dict | None = None


def parse_snapshot(files: dict[str, str]) -> dict[str, JobSnapshot]:
    jobs: dict[str, JobSnapshot] = {}
    for path, content in files.items():
        match = GENERATED.match(path)
        if not match:
            continue
        job = jobs.setdefault(match["rules"] or match["dash"], JobSnapshot())
        try:
            if match["dash"]:
                job.dashboard = json.loads(content)
                continue
            document = yaml.safe_load(content) or {}
        except (ValueError, yaml.YAMLError) as exc:
            raise click.ClickException(f"{path}: cannot parse: {exc}") from None
        for group in document.get("groups") or []:
            for rule in group.get("rules") or []:
                if "alert" in rule:
                    job.alerts[rule["alert"]] = rule
                elif "record" in rule:
                    # One series name may be recorded with different labels: key by both.
                    key = rule["record"]
                    if key in job.records:
                        key = f"{key} {json.dumps(rule.get('labels') or {}, sort_keys=True)}"
                    job.records[key] = rule
    return jobs


# --- comparing ------------------------------------------------------------------------------


def code(text: object) -> str:
    """Inline Markdown code that survives backticks and newlines in the value."""
    value = " ".join(str(text).split())
    fence = "``" if "`" in value else "`"
    return f"{fence}{value}{fence}" if value else "(none)"


def arrow(old: object, new: object) -> str:
    return f"{code('' if old is None else old)} → {code('' if new is None else new)}"


def expr_changes(old: str, new: str) -> list[str]:
    """Threshold/window changes when only numbers differ, else the whole expr."""
    a, b = EXPR_TOKEN.findall(old), EXPR_TOKEN.findall(new)
    diffs = [(x, y) for x, y in zip(a, b, strict=False) if x != y]
    if len(a) != len(b) or not all(x[0].isdigit() and y[0].isdigit() for x, y in diffs):
        return [f"expr: {arrow(old, new)}"]
    lines = []
    for x, y in diffs:
        kind = "threshold" if x[-1].isdigit() and y[-1].isdigit() else "window"
        line = f"{kind}: {arrow(x, y)}"
        if line not in lines:  # one limit read in two places is one change
            lines.append(line)
    return lines


def severity_of(rule: dict | None) -> str | None:
    return (rule or {}).get("labels", {}).get("severity")


@dataclass
class AlertChange:
    name: str
    old: dict
    new: dict
    lines: list[str]  # what changed, for the job section

    @property
    def page_relevant(self) -> list[str]:
        """The changes that matter to whoever is paged: severity, expr, `for`."""
        return [
            line
            for line in self.lines
            if line.split(":", 1)[0] in ("severity", "expr", "threshold", "window", "for")
        ]


def compare_alert(name: str, old: dict, new: dict) -> AlertChange | None:
    lines: list[str] = []
    if old.get("expr") != new.get("expr"):
        lines += expr_changes(str(old.get("expr", "")), str(new.get("expr", "")))
    if old.get("for") != new.get("for"):
        lines.append(f"for: {arrow(old.get('for'), new.get('for'))}")
    if severity_of(old) != severity_of(new):
        lines.append(f"severity: {arrow(severity_of(old), severity_of(new))}")
    lines += _mapping_changes(
        "label", old.get("labels") or {}, new.get("labels") or {}, {"severity"}
    )
    lines += _mapping_changes("", old.get("annotations") or {}, new.get("annotations") or {}, set())
    return AlertChange(name, old, new, lines) if lines else None


def _mapping_changes(prefix: str, old: dict, new: dict, skip: set[str]) -> list[str]:
    lead = f"{prefix} " if prefix else ""
    return [
        f"{lead}{key}: {arrow(old.get(key), new.get(key))}"
        for key in sorted(set(old) | set(new))
        if key not in skip and old.get(key) != new.get(key)
    ]


def flat_panels(dashboard: dict | None) -> dict[object, dict]:
    """Panels by id, rows' nested (collapsed) panels included."""
    panels: dict[object, dict] = {}
    for panel in (dashboard or {}).get("panels") or []:
        for p in (panel, *(panel.get("panels") or [])):
            panels[p.get("id", p.get("title"))] = p
    return panels


def panel_name(panel: dict) -> str:
    return f"{panel.get('title', '?')} (#{panel.get('id', '?')})"


# --- the review -----------------------------------------------------------------------------


@dataclass
class Review:
    markdown: str
    pages: list[str]  # one line per page added, removed or changed

    @property
    def page_changed(self) -> bool:
        return bool(self.pages)


def page_lines(job: str, added: dict, removed: dict, changed: list[AlertChange]) -> list[str]:
    lines = [f"- **{job}** `{n}`: new page" for n, r in added.items() if severity_of(r) == "page"]
    lines += [
        f"- **{job}** `{n}`: page removed" for n, r in removed.items() if severity_of(r) == "page"
    ]
    for change in changed:
        old, new = severity_of(change.old), severity_of(change.new)
        if "page" not in (old, new) or not change.page_relevant:
            continue
        what = {
            ("ticket", "page"): "promoted ticket → page",
            ("page", "ticket"): "demoted page → ticket",
        }
        head = what.get((old, new), "page changed")
        rest = [line for line in change.page_relevant if not line.startswith("severity")]
        lines.append(f"- **{job}** `{change.name}`: {'; '.join([head, *rest])}")
    return lines


def job_section(
    job: str, base: JobSnapshot, head: JobSnapshot, pages: list[str]
) -> tuple[list[str], bool]:
    """Markdown lines of one job (empty when nothing changed) and whether alerts changed."""
    added = {n: r for n, r in head.alerts.items() if n not in base.alerts}
    removed = {n: r for n, r in base.alerts.items() if n not in head.alerts}
    changed = [
        c
        for n in base.alerts
        if n in head.alerts and (c := compare_alert(n, base.alerts[n], head.alerts[n]))
    ]
    pages += page_lines(job, added, removed, changed)
    blocks: list[list[str]] = []  # Markdown paragraphs, blank lines between them
    if added:
        blocks.append(["**Alerts added:** " + _alert_list(added)])
    if removed:
        blocks.append(["**Alerts removed:** " + _alert_list(removed)])
    if changed:
        block = ["**Alerts changed:**", ""]
        for c in changed:
            block.append(f"- `{c.name}` ({severity_of(c.new)})")
            block += [f"  - {line}" for line in c.lines]
        blocks.append(block)
    alerts_changed = bool(blocks)
    blocks += [
        b
        for b in (
            record_lines(base.records, head.records),
            dashboard_lines(base.dashboard, head.dashboard),
        )
        if b
    ]
    if not blocks:
        return [], False
    return [f"### {job}", "", *(line for b in blocks for line in (*b, ""))], alerts_changed


def _alert_list(alerts: dict[str, dict]) -> str:
    return ", ".join(f"`{n}` ({severity_of(r)})" for n, r in alerts.items())


def record_lines(base: dict[str, dict], head: dict[str, dict]) -> list[str]:
    added = [n for n in head if n not in base]
    removed = [n for n in base if n not in head]
    changed = [n for n in base if n in head and base[n] != head[n]]
    if not (added or removed or changed):
        return []
    out = ["**Recording rules:**", ""]
    out += [f"- added `{n}`: {code(head[n].get('expr'))}" for n in added]
    out += [f"- removed `{n}`" for n in removed]
    for n in changed:
        details = []
        if base[n].get("expr") != head[n].get("expr"):
            details += expr_changes(str(base[n].get("expr", "")), str(head[n].get("expr", "")))
        details += _mapping_changes(
            "label", base[n].get("labels") or {}, head[n].get("labels") or {}, set()
        )
        out.append(f"- changed `{n}`: {'; '.join(details)}")
    return out


def dashboard_lines(base: dict | None, head: dict | None) -> list[str]:
    if base == head:
        return []
    if base is None or head is None:
        return [f"**Dashboard:** {'added' if base is None else 'removed'}"]
    old, new = flat_panels(base), flat_panels(head)
    parts = [f"{len(old)} → {len(new)} panels" if len(old) != len(new) else f"{len(new)} panels"]
    for verb, keys, panels in (
        ("added", [k for k in new if k not in old], new),
        ("removed", [k for k in old if k not in new], old),
        ("changed", [k for k in old if k in new and old[k] != new[k]], new),
    ):
        if keys:
            parts.append(f"{verb}: " + ", ".join(panel_name(panels[k]) for k in keys))
    settings = sorted(
        k for k in set(base) | set(head) if k != "panels" and base.get(k) != head.get(k)
    )
    if settings:
        parts.append("settings changed: " + ", ".join(settings))
    return ["**Dashboard:** " + "; ".join(parts)]


def review(
    base_files: dict[str, str], head_files: dict[str, str], base_label: str, head_label: str
) -> Review:
    base, head = parse_snapshot(base_files), parse_snapshot(head_files)
    pages: list[str] = []
    sections: list[str] = []
    any_alert_change = False
    for job in sorted(set(base) | set(head)):
        lines, alerts_changed = job_section(
            job, base.get(job, JobSnapshot()), head.get(job, JobSnapshot()), pages
        )
        sections += lines
        any_alert_change |= alerts_changed
    out = [f"## trainsignals review: `{base_label}` → `{head_label}`", ""]
    if pages:
        out += ["### ⚠ Pages", "", *pages, ""]
    if not any_alert_change:
        out += [NO_ALERT_CHANGES, ""]
    out += sections
    return Review("\n".join(out).rstrip() + "\n", pages)


@click.command("diff")
@click.argument("base", required=False)
@click.argument("head", required=False)
@click.option(
    "--repo",
    type=click.Path(file_okay=False, path_type=Path),
    default=".",
    show_default=True,
    help="A folder inside the git repository whose alerts/ and dashboards/ to compare.",
)
@click.option(
    "--fail-on-page-change",
    is_flag=True,
    help="Exit 2 when a page is added, removed, promoted or changed (a CI gate).",
)
def diff_command(base: str | None, head: str | None, repo: Path, fail_on_page_change: bool) -> None:
    """Markdown review of generated alerts, recording rules and dashboards from BASE to HEAD.

    BASE defaults to `git merge-base HEAD main` (HEAD when there is no main); HEAD defaults
    to the work tree. BASE and HEAD may also be two output folders of `trainsignals generate
    --out`: then no git checkout is needed.
    """
    folders = [Path(rev) for rev in (base, head) if rev is not None and Path(rev).is_dir()]
    if base is not None and head is not None and len(folders) == 2:
        # Two output folders (`trainsignals generate --out`): no git needed.
        old, new = folders
        result = review(revision_files(old, None), revision_files(new, None), str(base), str(head))
    else:
        root = git_root(repo)
        base = base or default_base(root)
        result = review(
            revision_files(root, base),
            revision_files(root, head),
            revision_label(root, base),
            revision_label(root, head),
        )
    click.echo(result.markdown, nl=False)
    if fail_on_page_change and result.page_changed:
        raise SystemExit(2)
