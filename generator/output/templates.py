"""The jinja2 environment of the generated Markdown (runbooks, meta runbooks): the templates in
generator/templates/, strict about undefined names, with the table-cell and XID helpers."""

from __future__ import annotations

from pathlib import Path

import jinja2

from trainsignals.generator.signals.xid_catalog import action_of, codes_by_action

TEMPLATES = Path(__file__).parent.parent / "templates"


def _cell(value: str) -> str:
    # A pipe would end the Markdown table cell; newlines would end the row.
    return str(value).replace("|", "\\|").replace("\n", " ")


def environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(TEMPLATES),
        undefined=jinja2.StrictUndefined,  # a typo in a template fails the build
        autoescape=False,  # Markdown, not HTML
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )
    env.filters["cell"] = _cell
    env.globals["xid_action"] = lambda code: action_of(code) or "-"  # runbook_xid.md.j2
    env.globals["xid_codes_by_action"] = codes_by_action
    return env
