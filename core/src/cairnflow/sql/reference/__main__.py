"""``python -m cairnflow.sql.reference [--types ENGINE]``: print the rendered reference schema."""

from __future__ import annotations

import argparse

from . import TYPES, reference_schema

parser = argparse.ArgumentParser(
    prog="python -m cairnflow.sql.reference",
    description="Print the SQL layer's reference schema, for a driver's migrations/001_init.sql.",
)
parser.add_argument("--types", choices=sorted(TYPES), default="postgres")
print(reference_schema(parser.parse_args().types), end="")
