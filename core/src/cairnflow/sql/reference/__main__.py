"""``python -m cairnflow.sql.reference --types ENGINE [--into DIR]``: render the reference schema.

Without ``--into`` every file is printed. With it, each reference migration
the directory does not hold yet is written there as ``NNN_name.sql``. A
migration is matched by its name, not its number: a driver numbers its own
migrations (``cairnflow-pg8000``'s ``019_byte_order``) among the reference's, so a
new reference migration is numbered after the last file of the directory. A
shipped migration is frozen: one already there is left alone, and reported
(exit status 1) when it differs from the reference.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from .._migrations import MIGRATION_FILE
from . import TYPES, reference_migrations


def render_into(directory: Path, types: str) -> tuple[list[Path], list[Path]]:
    """Write the reference migrations ``directory`` lacks; (files written, files that differ)."""
    shipped: dict[str, Path] = {}
    last = 0
    for path in directory.iterdir():
        match = MIGRATION_FILE.fullmatch(path.name)
        if match is not None:
            shipped[match[2]] = path
            last = max(last, int(match[1]))
    written: list[Path] = []
    differing: list[Path] = []
    for migration in reference_migrations(types):
        target = shipped.get(migration.name)
        if target is None:
            last += 1
            target = directory / f"{last:03d}_{migration.name}.sql"
            target.write_text(migration.text, encoding="utf-8")
            written.append(target)
        elif target.read_text(encoding="utf-8") != migration.text:
            differing.append(target)
    return written, differing


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m cairnflow.sql.reference",
        description="Render the SQL layer's reference schema into a driver's migration files.",
    )
    parser.add_argument("--types", choices=sorted(TYPES), default="postgres")
    parser.add_argument("--into", type=Path, help="the driver's migrations directory")
    args = parser.parse_args(argv)
    if args.into is None:
        for migration in reference_migrations(args.types):
            print(f"-- {migration.label}.sql\n{migration.text}")
        return 0
    if not args.into.is_dir():
        parser.error(f"--into {args.into}: not a directory")
    written, differing = render_into(args.into, args.types)
    for path in written:
        print(f"wrote {path}")
    for path in differing:
        print(f"{path} differs from the reference: a shipped migration is frozen, left alone")
    return 1 if differing else 0


if __name__ == "__main__":
    sys.exit(main())
