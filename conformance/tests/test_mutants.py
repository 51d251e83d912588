"""The mutation suite still applies: each mutant's text is in the code, exactly once.

``nox -s kit-mutants`` is too long for every CI run, but a mutant whose text
moved would make it fail long after the change that moved it. This check is
instant, so it runs with the kit's self-tests: a change to the SQL layer that
moves a mutant's text fails here, naming the mutant to update.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

HERE = Path(__file__).resolve().parent
SUITE = HERE.parent / "mutants" / "kit_mutants.py"


def _suite() -> ModuleType:
    spec = importlib.util.spec_from_file_location("kit_mutants", SUITE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


kit_mutants = _suite()


@pytest.mark.parametrize("mutant", kit_mutants.MUTANTS, ids=lambda m: m.name)
def test_the_mutant_still_applies_to_the_code(mutant: object) -> None:
    assert kit_mutants._check(kit_mutants.ROOT, mutant) is None


def test_every_mutant_names_a_capability_of_the_vocabulary() -> None:
    import cairnflow as cf

    known = {cap.value for cap in cf.Cap}
    names = [m.name for m in kit_mutants.MUTANTS]
    assert len(names) == len(set(names)), "two mutants share a name"
    assert {m.expect for m in kit_mutants.MUTANTS} <= known
