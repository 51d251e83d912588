"""Workflow definitions: names, parents, cycles, handles and what they require."""

from __future__ import annotations

from typing import Any

import pytest

import cairnflow as cf


def noop(ctx: cf.StepContext, data: Any) -> Any:
    return data


def test_decorated_steps_keep_their_functions_and_order() -> None:
    wf = cf.Workflow("orders")

    @wf.step
    def charge(ctx: cf.StepContext, order: dict[str, Any]) -> dict[str, Any]:
        return order

    @wf.step(after=[charge], timeout=30)
    def ship(ctx: cf.StepContext, charged: dict[str, Any]) -> str:
        return "ok"

    assert charge({}, {"a": 1}) == {"a": 1}  # type: ignore[arg-type]  # unchanged function
    assert list(wf.steps) == ["charge", "ship"]
    assert wf["ship"].parents == ("charge",)
    assert wf["ship"].timeout == 30.0
    assert wf.children("charge") == ("ship",)
    assert wf.sinks == ("ship",)


def test_after_takes_names_functions_and_handles() -> None:
    wf = cf.Workflow("mixed")
    wf.step(noop, name="a")
    nap = wf.sleep("nap", seconds=5, after=["a"])
    gate = wf.wait("gate", signal="go", after=[nap])
    wf.add(cf.Step("b", noop, after=[gate, "a"]))
    assert wf["nap"].parents == ("a",)
    assert wf["gate"].parents == ("nap",)
    assert wf["b"].parents == ("gate", "a")
    assert wf.sinks == ("b",)


def test_steps_list_in_any_order_is_sorted_parents_first() -> None:
    def first(ctx: cf.StepContext, data: Any) -> Any:
        return data

    later = cf.Step("later", noop, after=[first])
    wf = cf.Workflow("listed", steps=[later, cf.Step("first", first)])
    assert list(wf.steps) == ["first", "later"]


def test_unknown_parent_is_refused_at_definition() -> None:
    wf = cf.Workflow("orders")
    with pytest.raises(ValueError, match=r"unknown step 'ghost'"):
        wf.step(noop, name="ship", after=["ghost"])
    with pytest.raises(ValueError, match="not a step of this workflow"):
        wf.step(noop, name="ship2", after=[lambda ctx, data: None])


def test_cycles_are_refused_at_definition() -> None:
    with pytest.raises(ValueError, match=r"cycle among steps \['a', 'b', 'c'\]"):
        cf.Workflow(
            "loop",
            steps=[
                cf.Step("a", noop, after=["c"]),
                cf.Step("b", noop, after=["a"]),
                cf.Step("c", noop, after=["b"]),
            ],
        )
    with pytest.raises(ValueError, match="cannot be after itself"):
        cf.Workflow("self", steps=[cf.Step("a", noop, after=["a"])])


def test_step_from_another_workflow_is_refused() -> None:
    one = cf.Workflow("one")
    handle = one.sleep("nap", seconds=1)
    two = cf.Workflow("two")
    two.sleep("nap", seconds=1)
    with pytest.raises(ValueError, match="not part of this workflow"):
        two.step(noop, name="x", after=[handle])


def test_duplicate_step_names_are_refused() -> None:
    wf = cf.Workflow("dup")
    wf.step(noop, name="a")
    with pytest.raises(ValueError, match="already has a step named 'a'"):
        wf.step(noop, name="a")


@pytest.mark.parametrize(
    ("kind", "make"),
    [
        ("workflow", lambda bad: cf.Workflow(bad)),
        ("queue", lambda bad: cf.Workflow("ok", queue=bad)),
        ("step", lambda bad: cf.Workflow("ok").step(noop, name=bad)),
        ("signal", lambda bad: cf.Workflow("ok").wait("w", signal=bad)),
    ],
)
@pytest.mark.parametrize("bad", ["", " spaced", "-lead", "x" * 129, "semi;colon", "quote'", "ünï"])
def test_invalid_names_are_refused_naming_the_rule(kind: str, make: Any, bad: str) -> None:
    with pytest.raises(cf.InvalidName, match=rf"invalid {kind} name .*a {kind} name is 1 to 128"):
        make(bad)


def test_valid_names() -> None:
    wf = cf.Workflow("process-order.v2:eu", queue="mail_1")
    wf.step(noop, name="Charge_Card")
    assert "Charge_Card" in wf


def test_step_function_signature_is_checked() -> None:
    wf = cf.Workflow("sig")

    def no_args() -> None:
        return None

    with pytest.raises(TypeError, match=r"must accept two positional arguments \(ctx, data\)"):
        wf.step(no_args)
    with pytest.raises(TypeError, match="needs a callable"):
        cf.Step("x", None)


@pytest.mark.parametrize("seconds", [-1, float("nan"), float("inf"), "5", True])
def test_bad_durations_are_refused(seconds: Any) -> None:
    with pytest.raises(ValueError, match="seconds"):
        cf.Workflow("d").sleep("nap", seconds=seconds)


def test_required_capabilities_name_their_reason() -> None:
    wf = cf.Workflow("caps")
    wf.step(noop, name="plain")
    assert wf.required_capabilities() == {}
    wf.step(noop, name="retried", retry=cf.RetryPolicy(max_attempts=3))
    wf.step(noop, name="timed", timeout=5)
    wf.sleep("nap", seconds=1)
    wf.wait("gate", signal="go")
    needs = wf.required_capabilities()
    assert needs == {
        cf.Cap.RETRY: "the retry policy of step 'retried'",
        cf.Cap.STEP_TIMEOUT: "the timeout of step 'timed'",
        cf.Cap.SLEEP: "sleep step 'nap'",
        cf.Cap.SIGNAL: "wait step 'gate'",
    }


def test_workflow_defaults_apply_to_steps() -> None:
    policy = cf.RetryPolicy(max_attempts=4)
    wf = cf.Workflow("defaults", retry=policy, timeout=9)
    step = wf.add(cf.Step("a", noop))
    own = wf.add(cf.Step("b", noop, retry=cf.NO_RETRY, timeout=1))
    assert wf.retry_for(step) is policy
    assert wf.timeout_for(step) == 9
    assert wf.retry_for(own) is cf.NO_RETRY
    assert wf.timeout_for(own) == 1


def test_empty_workflow_cannot_be_registered() -> None:
    client = cf.Client(cf.MemoryStore())
    with pytest.raises(ValueError, match="has no steps"):
        client.register(cf.Workflow("empty"))


def _branching() -> cf.Workflow:
    wf = cf.Workflow("branching")
    wf.step(noop, name="prepare")
    wf.wait("approve", signal="ok", timeout=60, after=["prepare"], on_timeout="refund")
    wf.step(noop, name="ship", after=["approve"])
    wf.step(noop, name="refund", branch=True)
    wf.step(noop, name="tell", after=["refund"])
    return wf


def test_a_branch_hangs_off_its_wait_in_the_store_but_is_not_its_child() -> None:
    wf = _branching()
    wf.validate()
    assert isinstance(wf["refund"], cf.Branch)
    assert wf["refund"].kind is cf.StepKind.BRANCH
    assert wf.stored_parents("refund") == ("approve",)
    assert wf.children("approve") == ("ship",)
    assert wf.children("refund") == ("tell",)
    assert set(wf.sinks) == {"ship", "tell"}
    needs = wf.required_capabilities()
    assert cf.Cap.WAIT_BRANCH in needs
    assert next(iter(needs)) is cf.Cap.WAIT_BRANCH  # named before SIGNAL: the specific one first
    assert "approve" in needs[cf.Cap.WAIT_BRANCH]


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (lambda wf: wf.wait("w", signal="s", timeout=5, on_timeout="nope"), "not a step"),
        (
            lambda wf: (
                wf.step(noop, name="plain"),
                wf.wait("w", signal="s", timeout=5, on_timeout="plain"),
            ),
            "not a branch step",
        ),
        (lambda wf: wf.step(noop, name="orphan", branch=True), "named by no wait"),
        (
            lambda wf: (
                wf.wait("w1", signal="s", timeout=5, on_timeout="b"),
                wf.wait("w2", signal="s", timeout=5, on_timeout="b"),
                wf.step(noop, name="b", branch=True),
            ),
            "named by two waits",
        ),
        (
            lambda wf: (
                wf.step(noop, name="b", branch=True),
                wf.wait("w", signal="s", timeout=5, after=["b"], on_timeout="b"),
            ),
            "cycle",
        ),
    ],
)
def test_a_broken_branch_is_refused_when_the_workflow_is_validated(
    build: Any, message: str
) -> None:
    wf = cf.Workflow("broken")
    build(wf)
    with pytest.raises(ValueError, match=message):
        wf.validate()


def test_a_branch_needs_a_timeout_and_no_after() -> None:
    wf = cf.Workflow("w")
    with pytest.raises(ValueError, match="needs a timeout"):
        wf.wait("w", signal="s", on_timeout="b")
    wf.step(noop, name="a")
    with pytest.raises(ValueError, match="cannot have after"):
        wf.step(noop, name="b", branch=True, after=["a"])


def test_a_compensation_takes_the_output_of_its_step_and_is_never_a_sink() -> None:
    wf = cf.Workflow("saga")
    wf.step(noop, name="charge")

    @wf.compensation(for_="charge")
    def refund(ctx: cf.StepContext, charged: Any) -> None: ...

    assert isinstance(wf["refund"], cf.Compensation)
    assert wf.stored_parents("refund") == ("charge",)
    assert wf.children("charge") == ()
    assert wf.sinks == ("charge",)
    assert wf.compensations == {"charge": "refund"}
    assert cf.Cap.COMPENSATION in wf.required_capabilities()


def test_a_compensation_is_checked_when_it_is_declared() -> None:
    wf = cf.Workflow("saga")
    wf.step(noop, name="charge")
    wf.sleep("nap", seconds=1)
    with pytest.raises(ValueError, match="unknown step"):
        wf.compensation(for_="nope", name="x")(noop)
    with pytest.raises(ValueError, match="only steps that run code"):
        wf.compensation(for_="nap", name="x")(noop)
    wf.compensation(for_="charge", name="refund")(noop)
    with pytest.raises(ValueError, match="already has a compensation"):
        wf.compensation(for_="charge", name="refund2")(noop)
    with pytest.raises(ValueError, match="cannot be after compensation"):
        wf.step(noop, name="after-refund", after=["refund"])
