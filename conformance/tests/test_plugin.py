"""The plugin's rules, run on small projects in a fresh pytest process each (pytester).

Every project tests a memory store that declares a few capabilities only, so a
full run of the kit stays short; subprocesses keep the projects' monkeying
(a kit function marked in place, say) out of this session.
"""

from __future__ import annotations

import contextlib
import fnmatch
import io
import json
import textwrap
from typing import Any

import pytest

from cairnflow import Cap
from cairnflow_conformance import proving_tests
from cairnflow_conformance.report import main as report_command

BARE = ("RESULT", "RUN_QUERY", "SNOOZE")
"""What the bare store of most projects declares: few tests, and SNOOZE has one."""


def project(
    pytester: pytest.Pytester,
    *,
    caps: tuple[str, ...] = BARE,
    suite: str = "pass",
    store: str = "",
    conftest_extra: str = "",
    target: bool = True,
) -> None:
    """Write a driver's conftest (a MemoryStore declaring ``caps``) and a suite subclass."""
    declared = ", ".join(f"cf.Cap.{c}" for c in caps)
    fixture = (
        textwrap.dedent(
            """
            @pytest.fixture(scope="session")
            def cairnflow_target():
                return StoreTarget(factory=lambda namespace: BareStore())
            """
        )
        if target
        else ""
    )
    header = textwrap.dedent(
        f"""
        import pytest
        import cairnflow as cf
        from cairnflow.store import MemoryStore
        from cairnflow_conformance import StoreTarget

        pytest_plugins = ["cairnflow_conformance.plugin"]

        class BareStore(MemoryStore):
            capabilities = frozenset({{{declared}}})
        """
    )
    methods = textwrap.indent(textwrap.dedent(store), "    ")
    pytester.makeconftest(header + methods + fixture + textwrap.dedent(conftest_extra))
    pytester.makepyfile(
        test_kit=textwrap.dedent(
            """
            import pytest
            from cairnflow_conformance import ConformanceSuite, Kit

            class TestBare(ConformanceSuite):
            """
        )
        + textwrap.indent(textwrap.dedent(suite), "    ")
    )


def run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    """Run the project in a fresh interpreter, writing report.json."""
    return pytester.runpytest_subprocess(
        "-p", "no:cacheprovider", "-rs", "--conformance-report=report.json", *args
    )


def report(pytester: pytest.Pytester) -> dict[str, Any]:
    """The JSON report the run wrote."""
    data: dict[str, Any] = json.loads((pytester.path / "report.json").read_text())
    return data


def xfail_overrides(cap: Cap, reason: str = "removed for this test") -> str:
    """A suite body overriding every kit test proving ``cap`` with an xfail that fails."""
    names = proving_tests()[cap]
    return "\n".join(
        textwrap.dedent(
            f"""
            @pytest.mark.xfail(reason={reason!r}, strict=True)
            def {name}(self, cairnflow_kit: Kit) -> None:
                raise AssertionError("not run: the test is removed")
            """
        )
        for name in names
    )


# -- the proof gate -------------------------------------------------------------------------
def test_a_full_run_passes_and_reports_declared_equal_to_proven(pytester: pytest.Pytester) -> None:
    project(pytester)
    result = run(pytester)
    assert result.ret == 0, result.stdout.str()
    result.stdout.fnmatch_lines(
        [
            "*cairnflow conformance*",
            "*3 declared, 3 proven*",
            "*proof gate passed*",
        ]
    )
    result.stdout.fnmatch_lines(["*the store does not declare SLEEP*"])
    data = report(pytester)
    assert data["kit"]["distribution"] == "cairnflow-conformance"
    assert data["core"]["spi_version"] == data["spi_version"] == "1.0"
    assert data["driver"]["name"] == "memory"
    assert data["driver"]["distribution"] == "cairnflow"
    assert "server" in data
    assert data["declared"] == ["result", "run_query", "snooze"]
    assert sorted(data["proven"]) == data["declared"]
    assert data["unproven"] == []
    assert data["gate"] == "passed"
    assert data["subset"] == []
    assert data["exit_status"] == 0
    snooze_tests = data["proven"]["snooze"]
    assert snooze_tests
    assert all(t.startswith("test_kit.py::TestBare::test_") for t in snooze_tests)
    # Undeclared capabilities: their proofs skipped, their refusals checked.
    assert {"sleep", "signal", "lease", "durable"} <= set(data["skipped"])
    assert {"sleep", "signal", "closure", "cancel", "transactional_enqueue"} <= set(data["refused"])
    assert data["failed"] == {}
    assert data["baseline"]["passed"]
    tests = {t["id"]: t for t in data["tests"]}
    assert all(tests[t]["outcome"] == "passed" for ids in data["proven"].values() for t in ids)


def test_removing_a_capabilitys_only_test_fails_the_session_naming_it(
    pytester: pytest.Pytester,
) -> None:
    project(pytester, suite=xfail_overrides(Cap.SNOOZE))
    result = run(pytester)
    assert result.ret == 1, result.stdout.str()
    outcomes = result.parseoutcomes()
    assert "failed" not in outcomes
    assert "errors" not in outcomes
    assert outcomes["xfailed"] == len(proving_tests()[Cap.SNOOZE])
    result.stdout.fnmatch_lines(
        [
            "*UNPROVEN: snooze (* kit tests on this store did not pass: * xfailed)*",
            "*TestBare::test_snooze_*: xfailed: overridden by the driver (removed for this test)*",
            "*proof gate FAILED: declared but unproven: snooze*",
        ]
    )
    data = report(pytester)
    assert data["gate"] == "failed"
    assert data["unproven"] == ["snooze"]
    assert data["exit_status"] == 1
    assert "snooze" in data["xfailed"]
    assert "snooze" not in data["proven"]


def test_the_gate_holds_under_xdist(pytester: pytest.Pytester) -> None:
    pytest.importorskip("xdist")
    project(pytester, suite=xfail_overrides(Cap.SNOOZE))
    result = run(pytester, "-n", "2")
    assert result.ret == 1, result.stdout.str()
    result.stdout.fnmatch_lines(["*proof gate FAILED: declared but unproven: snooze*"])
    data = report(pytester)
    assert (data["gate"], data["unproven"]) == ("failed", ["snooze"])
    assert sorted(data["proven"]) == ["result", "run_query"]


def test_a_declared_capability_no_kit_test_proves_fails_the_session(
    pytester: pytest.Pytester,
) -> None:
    # A capability the vocabulary names before cairnflow builds it: no facet carries it
    # (TENANT stands for it, its facet unregistered in the driver's conftest) and no kit test
    # proves it (its proofs overridden by plain tests). cairnflow refuses to build a client on
    # a store declaring it, so the kit tests of the other capabilities fail too and are named.
    unbuilt = f"""
    from cairnflow.store import _facets
    from cairnflow_conformance import ConformanceSuite
    _facets._BY_CAP.pop(cf.Cap.TENANT, None)
    for cls in ConformanceSuite.__mro__:  # the kit as it was before TENANT's tests
        for name in {sorted(proving_tests()[Cap.TENANT])!r}:
            if name in vars(cls):
                delattr(cls, name)
    """
    project(pytester, caps=("RESULT", "RUN_QUERY", "TENANT"), conftest_extra=unbuilt)
    result = run(pytester)
    assert result.ret == 1, result.stdout.str()
    result.stdout.fnmatch_lines(["*UNPROVEN: tenant (no kit test proves it yet)*"])
    # ...and check_store refuses the store itself: no facet of the SPI carries TENANT.
    result.stdout.fnmatch_lines(["*StoreContractError*tenant has no store facet*"])
    data = report(pytester)
    assert data["untested"] == ["tenant"]
    assert "tenant" in data["unproven"]
    assert data["why_unproven"]["tenant"] == {
        "reason": "no kit test proves it yet",
        "tests": [],
    }


def test_a_failing_proof_leaves_its_capability_unproven(pytester: pytest.Pytester) -> None:
    broken = """
    def finish(self, token, outcome, now):
        # A broken store: a snoozed step is due at once.
        from cairnflow.store import Snoozed
        if isinstance(outcome, Snoozed):
            outcome = Snoozed(until=now)
        return super().finish(token, outcome, now)
    """
    project(pytester, store=broken)
    result = run(pytester)
    assert result.ret == 1
    result.stdout.fnmatch_lines(["*TestBare.test_snooze_*", "*UNPROVEN: snooze*"])
    data = report(pytester)
    assert list(data["failed"]) == ["snooze"]
    assert data["unproven"] == ["snooze"]


# One kit test of RESULT (of five) is held back; the other four pass.
HELD_BACK = "test_several_last_steps_make_a_dict_result"
MANGLES_ONE_OUTPUT = """
def finish(self, token, outcome, now):
    # A broken store: one output of one kit test is lost.
    from cairnflow.store import Succeeded
    if isinstance(outcome, Succeeded) and outcome.output == b'"c:7"':
        outcome = Succeeded(b'"lost"')
    return super().finish(token, outcome, now)
"""
SKIPS_ONE_TEST = f"""
@pytest.fixture(autouse=True)
def _driver_skips(request, _cairnflow_capability_gate):
    if request.node.name == {HELD_BACK!r}:
        pytest.skip("forks are not merged on this store yet")
"""


def overrides(mark: str, body: str = "super().{name}(cairnflow_kit)") -> str:
    """A suite body overriding the held-back kit test with ``mark``."""
    call = body.format(name=HELD_BACK)
    return f"""
    @pytest.mark.{mark}
    def {HELD_BACK}(self, cairnflow_kit: Kit) -> None:
        {call}
    """


def assert_held_back(pytester: pytest.Pytester, result: pytest.RunResult, how: str) -> None:
    """RESULT unproven because of the held-back test only: in the summary, report and command."""
    assert result.ret == 1, result.stdout.str()
    test_id = f"test_kit.py::TestBare::{HELD_BACK}"
    outcome = how.partition(":")[0]
    result.stdout.fnmatch_lines(
        [
            "*3 declared, 2 proven*",
            f"*UNPROVEN: result (1 of its * kit tests on this store did not pass: 1 {outcome})*",
            f"*{test_id}: {how}*",
            "*proof gate FAILED: declared but unproven: result*",
        ]
    )
    assert "proof gate passed" not in result.stdout.str()
    data = report(pytester)
    assert (data["gate"], data["unproven"], data["exit_status"]) == ("failed", ["result"], 1)
    assert sorted(data["proven"]) == ["run_query", "snooze"]
    (held,) = data["why_unproven"]["result"]["tests"]
    assert held["id"] == test_id
    assert fnmatch.fnmatch(f"{held['outcome']}: {held['reason']}", how)
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        assert report_command([str(pytester.path / "report.json")]) == 1
    assert f"  {test_id}: {held['outcome']}: {held['reason']}" in printed.getvalue()
    assert printed.getvalue().splitlines()[-1] == (
        f"exit status 1: NOT ACCEPTED: {data['target']}: unproven result (tests: {HELD_BACK})"
    )


@pytest.mark.parametrize(
    ("driver", "how"),
    [
        # The kit's asserts are rewritten by pytest: the reason shows the values compared.
        pytest.param({"store": MANGLES_ONE_OUTPUT}, "failed: *assert *lost*", id="failed"),
        pytest.param(
            {"conftest_extra": SKIPS_ONE_TEST},
            "skipped: forks are not merged on this store yet",
            id="skipped",
        ),
        pytest.param(
            {"suite": overrides('xfail(reason="forks come in 0.2", strict=True)', "assert False")},
            "xfailed: overridden by the driver (forks come in 0.2)",
            id="xfailed-override",
        ),
    ],
)
def test_one_proof_held_back_leaves_its_capability_unproven(
    pytester: pytest.Pytester, driver: dict[str, str], how: str
) -> None:
    project(pytester, **driver)
    assert_held_back(pytester, run(pytester), how)


@pytest.mark.parametrize(
    ("mark", "outcome"),
    [
        ('xfail(False, reason="never on this store")', "passed"),
        ('xfail(reason="flaky here", strict=False)', "xpassed"),
    ],
    ids=["condition-false", "xpass"],
)
def test_an_overridden_proof_that_passes_leaves_its_capability_unproven(
    pytester: pytest.Pytester, mark: str, outcome: str
) -> None:
    # The override runs the kit's code and passes, but it is the driver's test, not the kit's.
    project(pytester, suite=overrides(mark))
    result = run(pytester)
    assert_held_back(pytester, result, f"{outcome}: overridden by the driver*")


def test_a_kit_test_stopped_before_the_store_is_reached_is_named(
    pytester: pytest.Pytester,
) -> None:
    project(
        pytester,
        conftest_extra=f"""
        def pytest_runtest_setup(item):
            if item.name == {HELD_BACK!r}:
                pytest.skip("stopped by the driver's hook")
        """,
    )
    assert_held_back(pytester, run(pytester), "skipped: stopped by the driver's hook")


def test_a_subset_run_turns_the_gate_into_a_warning(pytester: pytest.Pytester) -> None:
    project(pytester)
    result = run(pytester, "-k", "snooze")
    assert result.ret == 0, result.stdout.str()
    result.stdout.fnmatch_lines(
        [
            "*proof gate WARNING (subset run, not a verdict)*result*",
            "*subset run: -k 'snooze'*",
        ]
    )
    data = report(pytester)
    assert data["gate"] == "warning"
    assert data["subset"][0] == "-k 'snooze'"


@pytest.mark.parametrize("xdist", [False, True], ids=["in-process", "xdist"])
def test_a_plugin_that_deselects_kit_tests_makes_a_subset_run(
    pytester: pytest.Pytester, xdist: bool
) -> None:
    if xdist:
        pytest.importorskip("xdist")
    pytester.makepyfile(
        deselector="""
        def pytest_collection_modifyitems(config, items):
            dropped = [i for i in items if "snooze" in i.name]
            items[:] = [i for i in items if i not in dropped]
            config.hook.pytest_deselected(items=dropped)
        """
    )
    project(pytester)
    result = run(pytester, "-p", "deselector", *(["-n", "2"] if xdist else []))
    assert result.ret == 0, result.stdout.str()
    result.stdout.fnmatch_lines(["*proof gate WARNING*snooze*", "*kit test(s) deselected*"])
    assert report(pytester)["gate"] == "warning"


# -- a focused suite (capabilities_under_test) ----------------------------------------------
def run_report_command(pytester: pytest.Pytester) -> tuple[int, str]:
    """``python -m cairnflow_conformance.report report.json``: its exit code and output."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = report_command([str(pytester.path / "report.json")])
    return code, out.getvalue()


@pytest.mark.parametrize("xdist", [False, True], ids=["in-process", "xdist"])
def test_a_focused_suite_runs_and_judges_only_what_it_puts_under_test(
    pytester: pytest.Pytester, xdist: bool
) -> None:
    if xdist:
        pytest.importorskip("xdist")
    project(pytester, suite="capabilities_under_test = frozenset({'snooze'})")
    result = run(pytester, *(["-n", "2"] if xdist else []))
    assert result.ret == 0, result.stdout.str()
    result.stdout.fnmatch_lines(
        [
            "*3 declared, 1 under test (snooze), 1 proven*",
            "*proof gate passed: every kit test of every capability under test passed*",
        ]
    )
    data = report(pytester)
    assert data["subset"] == []  # the tests left out were not deselected: no subset run
    assert (data["under_test"], data["gate"], data["unproven"]) == (["snooze"], "passed", [])
    assert data["declared"] == ["result", "run_query", "snooze"]
    assert list(data["proven"]) == ["snooze"]
    assert data["proven"]["snooze"]
    # Only the focus ran, with the baseline: no test proving, needing or refusing another.
    ran = [t for t in data["tests"] if t["outcome"] != "skipped"]
    assert ran
    for test in ran:
        touched = {*test["proves"], *test["requires"], *test["refuses"]}
        assert touched == {"snooze"} or not (test["proves"] or test["refuses"]), test
    assert any(not (t["proves"] or t["refuses"]) for t in ran)  # the baseline ran too
    assert len(data["tests"]) < len(proving_tests()[Cap.SNOOZE]) + 20
    code, printed = run_report_command(pytester)
    assert code == 0, printed
    assert "under test (1): snooze (focused)" in printed
    assert "declared == proven (of what was under test)" in printed


def test_a_focused_suite_fails_on_a_proof_of_its_focus_held_back(
    pytester: pytest.Pytester,
) -> None:
    body = "capabilities_under_test = {cf.Cap.SNOOZE}\n" + xfail_overrides(Cap.SNOOZE)
    project(pytester, suite="import cairnflow as cf\n" + body)
    result = run(pytester)
    assert result.ret == 1, result.stdout.str()
    result.stdout.fnmatch_lines(["*proof gate FAILED: under test but unproven: snooze*"])
    data = report(pytester)
    assert (data["gate"], data["unproven"]) == ("failed", ["snooze"])
    code, printed = run_report_command(pytester)
    assert code == 1
    assert "NOT ACCEPTED" in printed and "unproven snooze" in printed


def test_a_focus_the_store_does_not_declare_is_unproven(pytester: pytest.Pytester) -> None:
    project(pytester, suite="capabilities_under_test = ['snooze', 'sleep']")
    result = run(pytester)
    assert result.ret == 1, result.stdout.str()
    result.stdout.fnmatch_lines(
        [
            "*UNPROVEN: sleep (under test, but the store does not declare it)*",
            "*proof gate FAILED: under test but unproven: sleep*",
        ]
    )
    data = report(pytester)
    assert data["under_test"] == ["sleep", "snooze"]
    assert (data["unproven"], list(data["proven"])) == (["sleep"], ["snooze"])


def test_a_suite_focused_and_a_whole_suite_on_one_target_judge_every_capability(
    pytester: pytest.Pytester,
) -> None:
    # The whole kit ran on the target too: every declared capability is judged.
    project(pytester, suite="capabilities_under_test = {'snooze'}")
    pytester.makepyfile(
        test_whole="""
        from cairnflow_conformance import ConformanceSuite

        class TestWhole(ConformanceSuite):
            pass
        """
    )
    result = run(pytester)
    assert result.ret == 0, result.stdout.str()
    data = report(pytester)
    assert (data["under_test"], data["unproven"]) == (None, [])
    assert sorted(data["proven"]) == ["result", "run_query", "snooze"]


@pytest.mark.parametrize(
    ("value", "says"),
    [
        ("{'snoze'}", "unknown capability 'snoze' in TestBare.capabilities_under_test"),
        ("frozenset()", "TestBare.capabilities_under_test names no capability"),
        ("'snooze'", "TestBare.capabilities_under_test must be a set of capabilities"),
    ],
    ids=["unknown", "empty", "a-string"],
)
def test_a_bad_focus_is_a_collection_error(
    pytester: pytest.Pytester, value: str, says: str
) -> None:
    project(pytester, suite=f"capabilities_under_test = {value}")
    result = run(pytester)
    assert result.ret == 2, result.stdout.str()
    result.stdout.fnmatch_lines([f"*{says}*"])


def test_a_missing_target_fixture_says_what_to_write(pytester: pytest.Pytester) -> None:
    project(pytester, target=False)
    result = run(pytester, "-k", "plain_run")
    assert result.ret == 1
    result.stdout.fnmatch_lines(["*needs a fixture named cairnflow_target*StoreTarget*"])


# -- capability names -------------------------------------------------------------------------
def test_an_unknown_capability_name_is_a_collection_error(pytester: pytest.Pytester) -> None:
    project(pytester)
    pytester.makepyfile(
        test_typo="""
        from cairnflow_conformance import proves

        @proves("sleeep")
        def test_typo():
            pass
        """
    )
    result = run(pytester)
    assert result.ret == pytest.ExitCode.INTERRUPTED
    result.stdout.fnmatch_lines(
        ["*ERROR collecting test_typo.py*", "*unknown capability 'sleeep'*did you mean 'sleep'*"]
    )


@pytest.mark.parametrize(
    "mark",
    ['pytest.mark.proves("nope")', 'pytest.mark.proves("result", requires=["nope"])'],
    ids=["proves", "requires"],
)
def test_an_unknown_name_in_a_raw_marker_is_a_collection_error(
    pytester: pytest.Pytester, mark: str
) -> None:
    project(pytester)
    pytester.makepyfile(
        test_raw=f"""
        import pytest

        @{mark}
        def test_raw():
            pass
        """
    )
    result = run(pytester)
    assert result.ret == pytest.ExitCode.INTERRUPTED
    result.stdout.fnmatch_lines(["*ERROR collecting test_raw.py*", "*unknown capability 'nope'*"])


# -- what a suite may do to the kit's tests ---------------------------------------------------
def test_overriding_a_kit_test_without_xfail_fails(pytester: pytest.Pytester) -> None:
    project(
        pytester,
        suite="""
        def test_a_plain_run_succeeds(self, cairnflow_kit: Kit) -> None:
            pass  # "passes" without testing anything
        """,
    )
    result = run(pytester)
    assert result.ret == pytest.ExitCode.INTERRUPTED
    result.stdout.fnmatch_lines(
        [
            "*ERROR collecting*",
            "*TestBare.test_a_plain_run_succeeds overrides a kit test without "
            "pytest.mark.xfail(reason=...)*",
        ]
    )


def test_deleting_a_kit_test_fails(pytester: pytest.Pytester) -> None:
    project(pytester, suite="test_a_plain_run_succeeds = None")
    result = run(pytester)
    assert result.ret == pytest.ExitCode.INTERRUPTED
    result.stdout.fnmatch_lines(["*TestBare.test_a_plain_run_succeeds: kit test deleted*"])


def test_an_xfail_without_a_reason_is_not_enough(pytester: pytest.Pytester) -> None:
    project(
        pytester,
        suite="""
        @pytest.mark.xfail
        def test_a_plain_run_succeeds(self, cairnflow_kit: Kit) -> None:
            raise AssertionError
        """,
    )
    result = run(pytester)
    assert result.ret == pytest.ExitCode.INTERRUPTED
    result.stdout.fnmatch_lines(["*overrides a kit test without pytest.mark.xfail(reason=...)*"])


def test_marking_the_kits_own_function_in_place_fails(pytester: pytest.Pytester) -> None:
    project(
        pytester,
        suite="""
        test_a_plain_run_succeeds = pytest.mark.skip(reason="not today")(
            ConformanceSuite.test_a_plain_run_succeeds
        )
        """,
    )
    result = run(pytester)
    assert result.ret == pytest.ExitCode.INTERRUPTED
    result.stdout.fnmatch_lines(["*the kit's own test function was marked pytest.mark.skip*"])
