"""docs/recovery.md's table comes from the alert declarations; README carries the same copy."""

from __future__ import annotations

import pytest

from trainsignals.generator.alerts.catalog import ALERTS, BY_NAME
from trainsignals.generator.alerts.definitions.reachability import NODE_DOWN
from trainsignals.generator.alerts.definitions.recovery import (
    TRAINING_CRASH_LOOPING,
    TRAINING_NO_PROGRESS,
)
from trainsignals.generator.alerts.model import MODES
from trainsignals.generator.docs.recovery import (
    BEGIN,
    END,
    KINDS,
    PATH,
    kind_of,
    readme_copy,
    recovery_markdown,
    recovery_table,
)

from .conftest import ROOT


def rows() -> dict[str, list[str]]:
    """{alert: [kind, manual, auto_restart]} from the table's rows (blank kind: the one above)."""
    found, kind = {}, ""
    for line in recovery_table().splitlines()[2:]:
        cells = [c.strip() for c in line.strip("|").split("|")]
        kind = cells[0] or kind
        found[cells[1].split("`")[1]] = [kind, *cells[2:]]
    return found


def test_readme_carries_the_generated_table() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert readme_copy(readme) == recovery_table(), (
        "README's recovery table differs from docs/recovery.md: copy the table between "
        f"{BEGIN!r} and {END!r} from docs/recovery.md (run `trainsignals generate` first)"
    )


def test_the_committed_doc_is_the_generated_one() -> None:
    assert (ROOT / PATH).read_text(encoding="utf-8") == recovery_markdown()


def test_a_changed_readme_copy_is_caught() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    edited = readme.replace("| ticket | **page** |", "| ticket | ticket |", 1)
    assert edited != readme
    assert readme_copy(edited) != recovery_table()
    assert readme_copy("no markers here") is None


def test_every_alert_has_one_row_with_its_declared_severities() -> None:
    table = rows()
    assert sorted(table) == sorted(a.name for a in ALERTS)
    words = dict(KINDS)
    for name, (kind, *cells) in table.items():
        alert = BY_NAME[name]
        assert kind == words[kind_of(alert)], name
        for mode, cell in zip(MODES, cells, strict=True):
            severity = alert.severity_for(mode)
            assert cell.strip("*").split()[0] == ("-" if severity == "off" else severity), name


@pytest.mark.parametrize(
    ("name", "manual", "auto_restart"),
    [
        (TRAINING_NO_PROGRESS, "-", "**page**"),
        (TRAINING_CRASH_LOOPING, "ticket", "**page**"),
        (NODE_DOWN, "**page**", "ticket (infra_team)"),
    ],
)
def test_the_modes_differ_where_the_declarations_say(
    name: str, manual: str, auto_restart: str
) -> None:
    assert rows()[name][1:] == [manual, auto_restart]
