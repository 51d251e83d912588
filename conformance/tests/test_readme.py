"""The README's capability table is the kit's: a proof added or removed must show there."""

from __future__ import annotations

from pathlib import Path

import pytest

from cairnflow_conformance.table import BEGIN, END, capability_table, replace_table

README = Path(__file__).resolve().parents[1] / "README.md"


def test_the_readme_table_is_rendered_from_the_kit() -> None:
    text = README.read_text(encoding="utf-8")
    assert replace_table(text, capability_table()) == text, (
        "conformance/README.md's capability table disagrees with the kit: run "
        "`python -m cairnflow_conformance.table --write conformance/README.md`"
    )


def test_every_proven_capability_has_a_row() -> None:
    table = capability_table()
    for line in ("| `LEASE` |", "| `NOTIFY` |", "| `TRANSACTIONAL_ENQUEUE` |", "| `CRON` |"):
        assert line in table


def test_the_markers_must_be_there_in_order() -> None:
    with pytest.raises(ValueError, match="markers"):
        replace_table(f"{END}\n{BEGIN}\n", "table")
