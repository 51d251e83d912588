"""``python -m cairnflow`` runs the ``cairn`` command line."""

from .cli import run

run()
