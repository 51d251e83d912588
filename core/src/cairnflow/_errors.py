"""The exceptions cairnflow raises (all subclasses of :class:`CairnError`), and
:class:`ErrorInfo`, the record of a failure that a store keeps.

This module imports nothing of cairnflow at run time (the other modules import
it), so it can never be part of an import cycle.
"""

from __future__ import annotations

import json
import traceback
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ._caps import Cap
    from ._models import RunInfo

__all__ = [
    "Abandoned",
    "CairnError",
    "Cancelled",
    "DriverError",
    "DuplicateRun",
    "ErrorInfo",
    "InvalidName",
    "InvalidQuery",
    "LeaseLost",
    "OutcomeRefused",
    "OutcomeUnknown",
    "PayloadTooLarge",
    "Permanent",
    "RunFailed",
    "RunNotFound",
    "RunTimeout",
    "SchemaNotReady",
    "SchemaTooNew",
    "Snooze",
    "StepNotFound",
    "StepTimeout",
    "StoreOpenError",
    "Unavailable",
    "UnknownWorkflow",
    "Unsupported",
    "ValueRefused",
    "WaitTimeout",
]


class CairnError(Exception):
    """The base of every exception cairnflow raises."""


class Permanent(CairnError):
    """A failure that must not be retried.

    Raise it from a step, or wrap another exception in it, to fail the step at
    once whatever its retry policy says::

        raise cf.Permanent(ValueError("card declined"))
        raise cf.Permanent("card declined")
    """

    def __init__(self, error: BaseException | str) -> None:
        self.error: BaseException | None = error if isinstance(error, BaseException) else None
        super().__init__(str(error))
        if self.error is not None:
            self.__cause__ = self.error


class DuplicateRun(CairnError):
    """An unfinished run of the workflow already holds the idempotency key."""

    def __init__(self, workflow: str, key: str, run_id: str | None = None) -> None:
        self.workflow = workflow
        self.key = key
        self.run_id = run_id
        held = f" (run {run_id})" if run_id else ""
        super().__init__(
            f"an unfinished run of workflow {workflow!r} already holds key {key!r}{held}"
        )


class Unsupported(CairnError):
    """The store did not declare the capability an operation needs."""

    def __init__(self, capability: Cap, what: str, store: str = "this store") -> None:
        self.capability = capability
        self.what = what
        super().__init__(
            f"{what} needs capability {capability.name} ({capability.doc}), "
            f"which {store} does not declare"
        )


class Abandoned(CairnError):
    """An attempt was taken over more often than ``max_reclaims`` allows.

    A step that kills every worker it lands on would otherwise travel the
    cluster forever; once abandoned it fails and its retry policy applies.
    """

    def __init__(self, step: str, reclaims: int) -> None:
        self.step = step
        self.reclaims = reclaims
        super().__init__(
            f"step {step!r} was abandoned by {reclaims} worker(s) whose leases expired"
        )


class LeaseLost(CairnError):
    """The attempt's lease is gone: another worker may hold the step now.

    The attempt's outcome is not written.
    """


class Unavailable(CairnError):
    """The store cannot be reached (connection refused, reset, server shutting down)."""


class OutcomeUnknown(Unavailable):
    """Runs were being written when the store became unavailable, and it stayed so.

    Whether they were written is unknown: the client sent the write again
    under the same run ids for ``enqueue_timeout`` seconds (a write that had
    landed is found, not repeated) and never got an answer. ``run_ids`` names
    them: look them up (``client.info(run_id)`` raises
    :class:`RunNotFound` for one never written) before enqueueing again.
    """

    def __init__(self, run_ids: tuple[str, ...], waited: float, error: BaseException) -> None:
        self.run_ids = run_ids
        more = len(run_ids) - 10
        shown = ", ".join(run_ids[:10]) + (f" and {more} more" if more > 0 else "")
        super().__init__(
            f"the store stayed unavailable for {waited:.1f}s while writing run(s) {shown}: "
            f"whether they were written is unknown; look them up by id before enqueueing "
            f"again ({error})"
        )


class StoreOpenError(CairnError):
    """A store cannot be opened: its file, directory or database is missing or unusable.

    The message names the location and what is wrong; the driver's own error is
    chained on it. (A server that cannot be reached is :class:`Unavailable`.)
    """


class SchemaNotReady(CairnError):
    """The database was never migrated, or lacks a table this release needs."""


class SchemaTooNew(SchemaNotReady):
    """The database was migrated by a newer release than this one."""


class ValueRefused(CairnError, ValueError):
    """A value was refused for what it is: nothing of the operation was written.

    The database (or its driver) cannot store it: too large for one statement,
    out of a column's range, text it cannot encode. Writing the same value again
    cannot help, so an attempt whose outcome is refused fails for good
    (:class:`~cairnflow.Permanent`), whatever its retry policy says. The message
    carries the database's own reason.
    """


class PayloadTooLarge(ValueRefused):
    """An encoded value is larger than a limit; nothing was written.

    The limit is the client's ``payload_limit``, or one the store's server sets
    (``limit_name`` says which: MariaDB's ``max_allowed_packet``, for one).
    """

    def __init__(
        self, size: int, limit: int, what: str = "payload", *, limit_name: str = "the limit"
    ) -> None:
        self.size = size
        self.limit = limit
        self.limit_name = limit_name
        super().__init__(f"{what} is {size} bytes encoded, over {limit_name} of {limit} bytes")


class OutcomeRefused(CairnError):
    """The store did not write an attempt's outcome (it refused it, or stayed unavailable
    past the outage bound); the attempt failed with this error instead."""


class StepTimeout(CairnError, TimeoutError):
    """A step attempt ran past its timeout, or a wait step past its deadline."""


class RunTimeout(CairnError, TimeoutError):
    """A run ran past its workflow's ``run_timeout`` (``Cap.RUN_TIMEOUT``): it failed with
    this error type, and its unfinished steps were cancelled."""


class Cancelled(CairnError):
    """The run (or the step) was cancelled while the attempt ran."""


class Snooze(CairnError):
    """Raise from a step to run it again later without counting a failure.

    ``raise cf.Snooze(30)`` puts the step back as ready in 30 seconds.
    """

    def __init__(self, seconds: float) -> None:
        if seconds < 0:
            raise ValueError(f"Snooze needs seconds >= 0, got {seconds!r}")
        self.seconds = float(seconds)
        super().__init__(f"snoozed for {self.seconds:g}s")


class UnknownWorkflow(CairnError, LookupError):
    """No workflow of that name is registered on this client."""

    def __init__(self, name: str, registered: list[str]) -> None:
        self.name = name
        known = ", ".join(sorted(registered)) or "none"
        super().__init__(
            f"workflow {name!r} is not registered on this client (registered: {known})"
        )


class RunNotFound(CairnError, LookupError):
    """No run with that id exists in the store."""

    def __init__(self, run_id: str) -> None:
        self.run_id = run_id
        super().__init__(f"no run with id {run_id!r}")


class StepNotFound(CairnError, LookupError):
    """The run has no step of that name (``Client.retry_step``, ``Client.cancel_step``)."""

    def __init__(self, run_id: str, step: str) -> None:
        self.run_id = run_id
        self.step = step
        super().__init__(f"run {run_id!r} has no step {step!r}")


class RunFailed(CairnError):
    """``Client.result`` was asked for the result of a run that did not succeed."""

    def __init__(self, info: RunInfo) -> None:
        self.info = info
        why = f": {info.error}" if info.error is not None else ""
        super().__init__(f"run {info.id} of workflow {info.workflow!r} ended {info.status}{why}")


class InvalidName(CairnError, ValueError):
    """A name or identifier breaks its rule; the message names the rule."""


class InvalidQuery(CairnError, ValueError):
    """A run filter (:class:`cairnflow.store.RunQuery`) is malformed; the message names it."""


class DriverError(CairnError):
    """A store driver could not be found, loaded or accepted."""


class WaitTimeout(CairnError, TimeoutError):
    """``Client.wait`` gave up before the run finished (the run goes on)."""


@dataclass(frozen=True, slots=True)
class ErrorInfo:
    """A recorded failure: exception type, message, traceback and context."""

    type: str
    message: str
    traceback: str | None = None
    step: str | None = None
    attempt: int | None = None

    @classmethod
    def from_exception(
        cls, error: BaseException, *, step: str | None = None, attempt: int | None = None
    ) -> ErrorInfo:
        """Record ``error`` (a :class:`~cairnflow.Permanent` records what it wraps)."""
        shown = error.error if isinstance(error, Permanent) and error.error else error
        tb = "".join(traceback.format_exception(shown)) if shown.__traceback__ else None
        return cls(
            type=type(shown).__qualname__,
            message=str(shown),
            traceback=tb,
            step=step,
            attempt=attempt,
        )

    def to_json(self) -> str:
        """Serialise for a store: JSON text that every database can store.

        Characters are kept as they are, unless the text holds one that UTF-8
        cannot encode (a lone surrogate, from a message made of undecodable
        bytes): no database stores that, and the failure would be lost with it.
        Then every character outside ASCII is escaped (``\\udc80``), which
        :meth:`from_json` reads back as it was.
        """
        fields = {
            "type": self.type,
            "message": self.message,
            "traceback": self.traceback,
            "step": self.step,
            "attempt": self.attempt,
        }
        text = json.dumps(fields, ensure_ascii=False)
        if not text.isascii():
            try:
                text.encode("utf-8")
            except UnicodeEncodeError:
                return json.dumps(fields)
        return text

    @classmethod
    def from_json(cls, text: str | bytes) -> ErrorInfo:
        """Read back what :meth:`to_json` wrote."""
        data = json.loads(text)
        return cls(
            type=str(data.get("type", "Error")),
            message=str(data.get("message", "")),
            traceback=data.get("traceback"),
            step=data.get("step"),
            attempt=data.get("attempt"),
        )

    def __str__(self) -> str:
        where = f" in step {self.step!r}" if self.step else ""
        return f"{self.type}{where}: {self.message}"
