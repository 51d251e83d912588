"""The kit's inventory and parts: coverage of the vocabulary, targets, databases, reports."""

from __future__ import annotations

import importlib.metadata
import json
import multiprocessing
import os
from pathlib import Path
from typing import Any

import pytest

import cairnflow as cf
from cairnflow import Cap
from cairnflow.store import ENGINE_ONLY, FACETS, StoreContractError, check_store, facet_of
from cairnflow_conformance import (
    NAMESPACE_PATTERN,
    ConformanceSuite,
    StoreTarget,
    Traces,
    UnknownCapability,
    __version__,
    databases,
    kit_tests,
    new_namespace,
    proves,
    proving_tests,
    refusing_tests,
)
from cairnflow_conformance.report import main as report_main
from cairnflow_conformance.suite.refusals import REFUSALS


def implemented_capabilities() -> set[Cap]:
    """Every capability some store implements today (the kit must prove each one)."""
    caps = set(cf.MemoryStore.capabilities) | {Cap.DURABLE, Cap.MULTI_PROCESS}
    try:
        from cairnflow_litestore import LiteStore
    except ImportError:  # the example driver is not installed in this environment
        pass
    else:
        caps |= LiteStore.capabilities
    return caps


def test_every_implemented_capability_has_a_kit_test() -> None:
    proven = set(proving_tests())
    missing = sorted(c.value for c in implemented_capabilities() - proven)
    assert not missing, f"no kit test proves: {missing}"


def test_every_kit_test_says_what_it_proves_or_refuses() -> None:
    for name, function in kit_tests().items():
        marks = {m.name for m in getattr(function, "pytestmark", [])}
        assert marks & {"proves", "parametrize"}, f"{name} carries no proves marker"
        if "proves" not in marks:
            assert name in {n for names in refusing_tests().values() for n in names}, name


def test_every_client_api_of_an_optional_capability_has_a_refusal_check() -> None:
    with_client_api = {
        Cap.IDEMPOTENCY,
        Cap.DELAYED_START,
        Cap.BATCH_ENQUEUE,
        Cap.TRANSACTIONAL_ENQUEUE,
        Cap.CLOSURE,
        Cap.SIGNAL,
        Cap.CANCEL,
        Cap.SLEEP,
        Cap.RETRY,
        Cap.STEP_TIMEOUT,
        Cap.PAYLOAD_LIMIT,
        Cap.RESULT,
        Cap.RUN_QUERY,
        Cap.SNOOZE,
        Cap.HEARTBEAT,
        Cap.PROGRESS,
        Cap.CRON,
        Cap.OVERLAP_SKIP,
        Cap.SCHEDULE_PAUSE,
        Cap.SCHEDULE_TRIGGER,
        Cap.SCHEDULE_WHEN,
        Cap.SCHEDULE_WINDOW,
        Cap.TICK_EVENTS,
        Cap.SCHEDULE_LIST,
        Cap.SCHEDULE_HISTORY,
        Cap.LEADER_ELECTION,
        Cap.QUEUE,
        Cap.QUEUE_OVERRIDE,
        Cap.QUEUE_LIMIT_GLOBAL,
        Cap.PAUSE_QUEUE,
        Cap.PAUSE_WORKFLOW,
        Cap.RETENTION,
        Cap.ARCHIVE,
    }
    assert with_client_api <= set(refusing_tests())
    signal_checks = {r.id for r in REFUSALS if r.cap is Cap.SIGNAL}
    assert signal_checks == {"signal", "wait-step"}


def test_kit_tests_are_methods_of_the_suite_only() -> None:
    names = kit_tests()
    assert len(names) >= 60
    assert all(name.startswith("test_") for name in names)
    assert not any(name.startswith("test") for name in vars(ConformanceSuite))


def test_the_version_matches_the_distribution() -> None:
    assert __version__ == importlib.metadata.version("cairnflow-conformance")


# -- markers --------------------------------------------------------------------------------------
def test_proves_accepts_members_values_and_names() -> None:
    mark = proves(Cap.SLEEP, "signal", "RETRY", requires=["result"]).mark
    assert mark.args == (Cap.SLEEP, Cap.SIGNAL, Cap.RETRY)
    assert mark.kwargs == {"requires": (Cap.RESULT,)}


def test_proves_refuses_an_unknown_name_with_a_hint() -> None:
    with pytest.raises(UnknownCapability, match=r"'heartbeet'.*did you mean 'heartbeat'"):
        proves("heartbeet")
    with pytest.raises(UnknownCapability, match="'nope'"):
        proves(Cap.SLEEP, requires=["nope"])


# -- namespaces and targets -----------------------------------------------------------------------
def test_namespaces_are_short_safe_prefixes_and_unique() -> None:
    made = {new_namespace() for _ in range(5000)}
    assert len(made) == 5000
    assert all(NAMESPACE_PATTERN.fullmatch(ns) for ns in made)


def _made_in_a_child(queue: Any) -> None:
    queue.put(new_namespace())


def test_namespaces_differ_across_processes() -> None:
    # xdist workers and forked processes must not replay one random sequence.
    context = multiprocessing.get_context("fork" if os.name == "posix" else "spawn")
    queue = context.Queue()
    children = [context.Process(target=_made_in_a_child, args=(queue,)) for _ in range(4)]
    for child in children:
        child.start()
    for child in children:
        child.join(30)
    made = {queue.get(timeout=5) for _ in children} | {new_namespace()}
    assert len(made) == 5


def test_a_target_checks_what_it_is_given() -> None:
    with pytest.raises(ValueError, match="module:function"):
        StoreTarget(factory=lambda ns: cf.MemoryStore(), worker_factory="no_colon")
    with pytest.raises(ValueError, match="JSON-serialisable"):
        StoreTarget(factory=lambda ns: cf.MemoryStore(), worker_config={"path": Path("/x")})
    with pytest.raises(TypeError, match="must be callable"):
        StoreTarget(factory="memory://")  # type: ignore[arg-type]
    not_a_store = StoreTarget(factory=lambda ns: object())  # type: ignore[arg-type,return-value]
    with pytest.raises(TypeError, match="does not implement the cairnflow Store SPI"):
        not_a_store.open(new_namespace())
    with pytest.raises(ValueError, match="invalid namespace"):
        StoreTarget(factory=lambda ns: cf.MemoryStore()).open("Bad-Namespace")


def test_a_probe_reads_the_declaration_once() -> None:
    opened: list[str] = []

    def factory(namespace: str) -> cf.MemoryStore:
        opened.append(namespace)
        return cf.MemoryStore()

    target = StoreTarget(factory=factory, label="memory, probed")
    probe = target.probe()
    assert target.probe() is probe
    assert len(opened) == 1
    assert probe.capabilities == cf.MemoryStore.capabilities
    assert (probe.key, probe.spi_version, probe.info.driver) == ("memory, probed", "1.0", "memory")


def test_a_store_declaring_junk_is_refused() -> None:
    class Junk(cf.MemoryStore):
        capabilities = frozenset({"teleport"})  # type: ignore[arg-type]

    with pytest.raises(ValueError, match=r"'teleport', which is not a cairnflow\.Cap member"):
        StoreTarget(factory=lambda ns: Junk()).probe()


# -- traces ---------------------------------------------------------------------------------------
def test_traces_count_and_flag(tmp_path: Path) -> None:
    traces = Traces(tmp_path / "t")
    assert traces.read() == []
    traces.record("exec", run="r1", step="a", attempt=1)
    traces.record("exec", run="r1", step="b", attempt=1)
    traces.record("other", run="r1")
    assert traces.count("exec", run="r1") == 2
    assert [t["step"] for t in traces.read("exec", attempt=1)] == ["a", "b"]
    assert all(t["pid"] == os.getpid() for t in traces.read())
    assert not traces.flagged("go")
    assert not traces.wait_for_flag("go", timeout=0.05)
    traces.flag("go")
    assert traces.wait_for_flag("go", timeout=1)


# -- databases ------------------------------------------------------------------------------------
@pytest.fixture
def no_database(monkeypatch: pytest.MonkeyPatch) -> None:
    """No DSN, no CI, and no Docker engine, whatever this machine has."""
    for name in ("CAIRNFLOW_TEST_POSTGRES_URL", "CAIRNFLOW_TEST_MYSQL_URL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.delenv("CI", raising=False)
    monkeypatch.delenv(databases.REQUIRE_ENV, raising=False)
    monkeypatch.setattr(databases, "_docker_answers", lambda: "no Docker engine answers (test)")
    monkeypatch.setattr(databases, "_required", False)


def test_a_dsn_in_the_environment_is_used_as_is(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CAIRNFLOW_TEST_MARIADB_URL", "mysql://root@127.0.0.1:3306/test")
    with databases.mariadb() as url:
        assert url == "mysql://root@127.0.0.1:3306/test"


@pytest.mark.usefixtures("no_database")
def test_without_a_database_the_tests_skip_saying_why() -> None:
    with (
        pytest.raises(pytest.skip.Exception, match=r"CAIRNFLOW_TEST_POSTGRES_URL is not set"),
        databases.postgres(),
    ):
        pass


@pytest.mark.usefixtures("no_database")
def test_under_ci_a_missing_database_fails(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CI", "true")
    with (
        pytest.raises(pytest.fail.Exception, match=r"a database is required here"),
        databases.mysql(),
    ):
        pass


@pytest.mark.usefixtures("no_database")
def test_ci_may_name_the_servers_it_provides(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CI", "true")
    monkeypatch.setenv(databases.REQUIRE_ENV, "postgres, mariadb")
    with (
        pytest.raises(pytest.skip.Exception, match=r"CAIRNFLOW_TEST_REQUIRE=.* leaves mysql out"),
        databases.mysql(),
    ):
        pass
    with (
        pytest.raises(pytest.fail.Exception, match=r"a database is required"),
        databases.postgres(),
    ):
        pass


@pytest.mark.usefixtures("no_database")
def test_require_db_makes_a_missing_database_fail() -> None:
    databases.require_databases(True)
    with pytest.raises(pytest.fail.Exception, match=r"mysql:8\.4"), databases.mysql():
        pass


def test_the_container_urls_carry_no_driver_name() -> None:
    class Container:
        def get_connection_url(self, **kwargs: Any) -> str:
            return "mysql+pymysql://test:test@localhost:32768/test"

    assert databases._mysql_url(Container()) == "mysql://test:test@localhost:32768/test"


# -- the report CLI -------------------------------------------------------------------------------
def _report(tmp_path: Path, **changes: Any) -> Path:
    body: dict[str, Any] = {
        "target": "cairnflow:memory",
        "driver": {"distribution": "cairnflow", "version": "0.1.0"},
        "spi_version": "1.0",
        "server": None,
        "declared": ["result", "sleep"],
        "proven": {"result": ["t::a"], "sleep": ["t::b"]},
        "refused": {"cancel": ["t::c"]},
        "gate": "passed",
        "subset": [],
        "exit_status": 0,
    }
    body.update(changes)
    path = tmp_path / "report.json"
    path.write_text(json.dumps(body))
    return path


def test_the_report_cli_accepts_declared_equal_to_proven(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert report_main([str(_report(tmp_path))]) == 0
    assert "declared == proven" in capsys.readouterr().out


@pytest.mark.parametrize(
    "changes",
    [
        {"proven": {"result": ["t::a"]}, "gate": "failed", "exit_status": 1},
        {"subset": ["-k 'x'"], "gate": "warning"},
        {"exit_status": 1},
        {"targets": []},
    ],
    ids=["unproven", "subset", "failed-session", "no-target"],
)
def test_the_report_cli_refuses_anything_less(tmp_path: Path, changes: dict[str, Any]) -> None:
    assert report_main([str(_report(tmp_path, **changes))]) == 1


def test_every_capability_is_carried_by_a_facet_and_proven_or_cannot_be_declared() -> None:
    # A capability can be declared only when a facet of the Store SPI (or the engine
    # alone) carries it and the kit has proofs of it; check_store refuses the rest.
    proofs = proving_tests()
    for cap in Cap:
        facet = facet_of(cap)
        carried = facet is not None or cap in ENGINE_ONLY
        where = facet.name if facet is not None else "the engine" if carried else "nothing"
        if carried:
            assert proofs.get(cap), f"{cap.value} is carried by {where} but no kit test proves it"
        else:
            assert cap not in proofs, f"{cap.value} has proofs but no facet carries it"
            declared = type("Declares", (cf.MemoryStore,), {"capabilities": frozenset({cap})})
            with pytest.raises(StoreContractError, match=f"{cap.value} has no store facet"):
                check_store(declared())


def test_every_facet_method_belongs_to_its_protocol() -> None:
    for facet in FACETS:
        for method in facet.methods:
            assert callable(getattr(facet.protocol, method, None)), (facet.name, method)
