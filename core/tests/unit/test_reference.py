"""The reference schema and its renderer (``python -m cairnflow.sql.reference``)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from cairnflow.sql import load_migrations
from cairnflow.sql.reference import TYPES, reference_migrations
from cairnflow.sql.reference.__main__ import main


def _render(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "cairnflow.sql.reference", *args],
        capture_output=True,
        check=False,
        text=True,
        timeout=60,
    )


def _files(directory: Path) -> list[str]:
    return sorted(path.name for path in directory.iterdir())


def test_an_empty_directory_gets_every_reference_migration(tmp_path: Path) -> None:
    done = _render("--types", "postgres", "--into", str(tmp_path))
    assert done.returncode == 0, done.stderr
    reference = reference_migrations("postgres")
    assert _files(tmp_path) == [f"{m.label}.sql" for m in reference]
    assert done.stdout.count("wrote ") == len(reference)
    # Run again: nothing to write, nothing differs.
    again = _render("--types", "postgres", "--into", str(tmp_path))
    assert (again.returncode, again.stdout) == (0, "")


def test_a_new_reference_migration_is_numbered_after_the_drivers_own(tmp_path: Path) -> None:
    # A driver shipped the reference up to its second-last version, then one of its own under
    # the next number; the last reference version is rendered after it, not beside it.
    reference = reference_migrations("sqlite")
    *shipped, newest = reference
    for migration in shipped:
        (tmp_path / f"{migration.label}.sql").write_text(migration.text, encoding="utf-8")
    own = tmp_path / f"{newest.version:03d}_byte_order.sql"
    own.write_text("SELECT 1;\n", encoding="utf-8")
    assert main(["--types", "sqlite", "--into", str(tmp_path)]) == 0
    assert (tmp_path / f"{newest.version + 1:03d}_{newest.name}.sql").read_text(
        encoding="utf-8"
    ) == newest.text
    assert own.read_text(encoding="utf-8") == "SELECT 1;\n"
    # load_migrations reads the directory as one sequence without gaps.
    package = tmp_path.parent / "rendered_pkg"
    (package / "migrations").mkdir(parents=True)
    (package / "__init__.py").write_text("", encoding="utf-8")
    for path in tmp_path.iterdir():
        (package / "migrations" / path.name).write_bytes(path.read_bytes())
    sys.path.insert(0, str(package.parent))
    try:
        loaded = load_migrations("rendered_pkg")
    finally:
        sys.path.remove(str(package.parent))
    assert [m.name for m in loaded] == [*(m.name for m in shipped), "byte_order", newest.name]


def test_a_shipped_migration_that_differs_is_left_alone_and_reported(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    first = reference_migrations("postgres")[0]
    frozen = tmp_path / f"{first.label}.sql"
    frozen.write_text(first.text + "-- edited\n", encoding="utf-8")
    assert main(["--into", str(tmp_path)]) == 1
    assert frozen.read_text(encoding="utf-8") == first.text + "-- edited\n"
    assert f"{frozen} differs from the reference" in capsys.readouterr().out
    assert len(_files(tmp_path)) == len(reference_migrations("postgres"))


def test_into_must_be_a_directory(tmp_path: Path) -> None:
    done = _render("--into", str(tmp_path / "missing"))
    assert done.returncode == 2
    assert "not a directory" in done.stderr
    assert not (tmp_path / "missing").exists()


def test_without_into_every_file_is_printed() -> None:
    done = _render("--types", "sqlite")
    assert done.returncode == 0, done.stderr
    for migration in reference_migrations("sqlite"):
        assert f"-- {migration.label}.sql\n" in done.stdout


def test_a_mapping_missing_a_type_is_refused_naming_it() -> None:
    partial = {key: value for key, value in TYPES["postgres"].items() if key != "bytes"}
    with pytest.raises(ValueError, match="no type given for bytes"):
        reference_migrations(partial)
