"""``python -m cairnflow.sql.reference --types ENGINE [--into DIR]``: render the reference schema.

Without ``--into`` every file is printed. With it each is written to ``DIR``
as ``NNN_name.sql`` unless a file of that name is there already: a shipped
migration is frozen, so an existing file is left alone and reported when it
differs from the reference.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from . import TYPES, reference_migrations

parser = argparse.ArgumentParser(
    prog="python -m cairnflow.sql.reference",
    description="Render the SQL layer's reference schema into a driver's migration files.",
)
parser.add_argument("--types", choices=sorted(TYPES), default="postgres")
parser.add_argument("--into", type=Path, help="the driver's migrations directory")
args = parser.parse_args()
status = 0
for migration in reference_migrations(args.types):
    if args.into is None:
        print(f"-- {migration.label}.sql\n{migration.text}")
        continue
    target = args.into / f"{migration.label}.sql"
    if not target.exists():
        target.write_text(migration.text, encoding="utf-8")
        print(f"wrote {target}")
    elif target.read_text(encoding="utf-8") != migration.text:
        print(f"{target} differs from the reference: a shipped migration is frozen, left alone")
        status = 1
sys.exit(status)
