"""``Cap.TRANSACTIONAL_ENQUEUE``: a run enqueued inside the application's own transaction.

The run must commit and roll back with the application's transaction: visible
to nobody before the commit, gone after a rollback, run after a commit (a
``wake()`` admits it at once).
"""

from __future__ import annotations

import pytest

import cairnflow as cf
from cairnflow import Cap

from .._kit import Kit
from .._markers import proves
from ._shared import TIMEOUT

__all__ = ["TransactionalEnqueueTests"]


def _echo() -> cf.Workflow:
    return cf.Workflow("kit-tx", steps=[cf.Step("echo", lambda c, d: {"echo": d})])


class TransactionalEnqueueTests:
    """``Cap.TRANSACTIONAL_ENQUEUE``."""

    @proves(Cap.TRANSACTIONAL_ENQUEUE)
    def test_a_run_enqueued_in_a_rolled_back_transaction_never_existed(
        self, cairnflow_kit: Kit
    ) -> None:
        kit = cairnflow_kit
        worker = kit.client(_echo())
        connection = kit.app_connection()
        ref = worker.enqueue_tx(connection, "kit-tx", {"order": "A-1"})
        connection.rollback()
        worker.wake()
        assert kit.store.get_run(ref.id) is None
        assert kit.run_count() == 0

    @proves(Cap.TRANSACTIONAL_ENQUEUE)
    def test_a_run_commits_with_the_transaction_and_runs_after_it(self, cairnflow_kit: Kit) -> None:
        kit = cairnflow_kit
        worker = kit.client(_echo(), poll_interval=30)  # only the wake-up can admit it soon
        outsider = kit.open_store() if kit.shares_state else kit.store
        connection = kit.app_connection()
        ref = worker.enqueue_tx(connection, "kit-tx", {"order": "A-2"}, key="tx-key")
        # Not committed yet: nobody else sees it, and no worker can run it.
        assert outsider.get_run(ref.id) is None
        connection.commit()
        worker.wake()
        info = worker.wait(ref, timeout=TIMEOUT)
        assert info.status is cf.Status.SUCCEEDED
        assert info.result == {"echo": {"order": "A-2"}}
        assert info.key == "tx-key"

    @proves(Cap.TRANSACTIONAL_ENQUEUE)
    def test_several_runs_in_one_transaction_share_its_fate(self, cairnflow_kit: Kit) -> None:
        kit = cairnflow_kit
        client = kit.client(_echo(), start=False)
        kept = kit.app_connection()
        first = client.enqueue_tx(kept, "kit-tx", 1)
        second = client.enqueue_tx(kept, "kit-tx", 2)
        kept.commit()
        dropped = kit.app_connection()
        gone = client.enqueue_tx(dropped, "kit-tx", 3)
        dropped.rollback()
        assert kit.store.get_run(first.id) is not None
        assert kit.store.get_run(second.id) is not None
        assert kit.store.get_run(gone.id) is None
        assert kit.run_count() == 2

    @proves(Cap.TRANSACTIONAL_ENQUEUE, requires=(Cap.IDEMPOTENCY,))
    def test_a_held_key_is_refused_inside_the_transaction(self, cairnflow_kit: Kit) -> None:
        kit = cairnflow_kit
        client = kit.client(_echo(), start=False)
        held = client.enqueue("kit-tx", 0, key="taken")
        connection = kit.app_connection()
        with pytest.raises(cf.DuplicateRun, match="taken"):
            client.enqueue_tx(connection, "kit-tx", 1, key="taken")
        connection.rollback()
        assert kit.run_count() == 1
        assert kit.store.get_run(held.id) is not None

    @proves(Cap.QUEUE_OVERRIDE, requires=(Cap.TRANSACTIONAL_ENQUEUE, Cap.QUEUE))
    def test_a_run_enqueued_in_a_transaction_goes_on_the_queue_it_names(
        self, cairnflow_kit: Kit
    ) -> None:
        kit = cairnflow_kit
        client = kit.client(_echo(), start=False)
        connection = kit.app_connection()
        ref = client.enqueue_tx(connection, "kit-tx", {"order": "A-3"}, queue="kit-tx-urgent")
        connection.commit()
        assert kit.stored(ref).queue == "kit-tx-urgent"
        urgent = kit.client(_echo(), queues=["kit-tx-urgent"])
        info = urgent.wait(ref, timeout=TIMEOUT)
        assert info.status is cf.Status.SUCCEEDED
