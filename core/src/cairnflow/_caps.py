"""The capability vocabulary: what a store can promise.

A store declares a ``frozenset`` of :class:`Cap`. The client checks every
registered workflow and every API call against that set and refuses what the
store did not declare with :class:`cairnflow.Unsupported`; nothing silently does
nothing. The conformance kit accepts a declared capability only once one of its
tests proved it on the store.
"""

from __future__ import annotations

from enum import StrEnum

__all__ = ["Cap"]


class Cap(StrEnum):
    """A capability a store may declare; the vocabulary is closed.

    Every member carries a one-line description in :attr:`doc`.
    """

    doc: str

    def __new__(cls, value: str, doc: str = "") -> Cap:
        member = str.__new__(cls, value)
        member._value_ = value
        member.doc = doc
        return member

    # -- what the engine implies -------------------------------------------------
    DURABLE = "durable", "Runs, step outcomes and schedules survive a restart of every process."
    MULTI_PROCESS = "multi_process", "Several processes (or machines) can work one store at once."
    LEASE = "lease", "A step whose worker died is retaken by another client after its lease."
    CRON = "cron", "Workflows fire on cron schedules, once per tick across every client."
    SLEEP = "sleep", "Durable sleep steps that hold no worker while they wait."
    SIGNAL = "signal", "Wait steps resolved by a named signal sent to the run, held by no worker."
    RETRY = "retry", "Failed steps are retried by their RetryPolicy with backoff."
    STEP_TIMEOUT = (
        "step_timeout",
        "A step attempt that runs past its timeout fails with StepTimeout.",
    )
    CANCEL = "cancel", "A run can be cancelled; its running steps see the cancellation."
    IDEMPOTENCY = "idempotency", "An idempotency key is held by at most one unfinished run."
    DELAYED_START = "delayed_start", "A run can be enqueued to start after a delay."
    BATCH_ENQUEUE = "batch_enqueue", "Several runs are enqueued in one transaction, all or none."
    TRANSACTIONAL_ENQUEUE = (
        "transactional_enqueue",
        "A run is enqueued inside the application's own database transaction.",
    )
    NOTIFY = "notify", "Idle clients on other processes are woken at once when work becomes due."
    CONCURRENCY_KEY = "concurrency_key", "At most N attempts per concurrency key run at once."
    RATE_LIMIT = "rate_limit", "Attempts are admitted at most N per window, across clients."
    JOURNAL = "journal", "Memoised results inside a step survive a crash and a retry."
    LOCKS = "locks", "Named locks with a time to live, across every client."
    LEADER_ELECTION = "leader_election", "One elected client fires schedules and does housekeeping."
    ARCHIVE = "archive", "Finished runs are moved to cold tables instead of deleted."
    RETENTION = (
        "retention",
        "Finished runs older than a setting are deleted in chunks, by one node at a time.",
    )
    DATABASE_CLOCK = (
        "database_clock",
        "The database server's clock is the one 'now' for every node.",
    )
    PROGRESS = "progress", "A step reports progress that any client can read while it runs."
    LIFECYCLE = "lifecycle", "Callbacks observe run and step lifecycle events across clients."
    CANCEL_STEP = "cancel_step", "One step of a run can be cancelled without cancelling the run."
    RESCHEDULE = "reschedule", "A queued or delayed run can be moved to another start time."
    PAYLOAD_LIMIT = "payload_limit", "Payloads over a configured size are refused before any write."
    # -- from the reference vocabulary --------------------------------------------
    CLOSURE = (
        "closure",
        "An unregistered Python callable can be submitted and run (in-process only).",
    )
    TENANT = "tenant", "Runs carry a tenant that filters queries and limits."
    RESULT = "result", "A succeeded run's result can be read back from the store."
    NODE_IDENTITY = "node_identity", "Each attempt records the node that ran it."
    SNOOZE = "snooze", "A step can put itself back for later without counting a failure."
    HEARTBEAT = "heartbeat", "A step can heartbeat: renew its lease now and learn if it lost it."
    RUN_TIMEOUT = "run_timeout", "A whole run fails once it runs past its deadline."
    KEY_FIFO = "key_fifo", "Runs sharing a key are started in enqueue order."
    DUE_QUERY = "due_query", "The store can report when the next piece of work falls due."
    QUEUE = "queue", "Named queues, each served by the clients configured for it."
    QUEUE_OVERRIDE = "queue_override", "A run can be enqueued on another queue than its workflow's."
    QUEUE_LIMIT_GLOBAL = (
        "queue_limit_global",
        "A queue's concurrency limit holds across all clients.",
    )
    JOB_RETRY = "job_retry", "A failed step of a finished run can be retried on demand."
    RETRY_UNTIL = "retry_until", "Retries stop at a deadline as well as a count."
    RETRY_MAX_ERRORS = "retry_max_errors", "Retries stop after N errors of any attempt of a run."
    DISCARD = "discard", "A run out of retries can end discarded instead of failed."
    RUN_QUERY = "run_query", "Runs can be listed and filtered by workflow, status and labels."
    RETRY_RUN = "retry_run", "A failed run can be retried from the step that failed."
    DELETE_RUN = "delete_run", "Finished runs can be deleted."
    CANCEL_ALL = "cancel_all", "Every unfinished run matching a filter can be cancelled at once."
    PAUSE_WORKFLOW = "pause_workflow", "A workflow can be paused across every client."
    PAUSE_QUEUE = "pause_queue", "A queue can be paused across every client."
    SCHEDULE_PAUSE = "schedule_pause", "A schedule can be paused and resumed across every client."
    SCHEDULE_WHEN = "schedule_when", "A predicate decides at each tick whether a schedule fires."
    SCHEDULE_WINDOW = "schedule_window", "Schedules fire only inside configured time windows."
    TICK_EVENTS = "tick_events", "Every fired, skipped and misfired tick is reported once."
    SCHEDULE_LIST = "schedule_list", "Schedules can be listed with their next fire time."
    DRAIN = "drain", "A client stops claiming, lets running attempts finish, then stops."
    OVERLAP_SKIP = "overlap_skip", "A schedule skips a tick while its previous run is unfinished."
    SCHEDULE_TRIGGER = "schedule_trigger", "A schedule can be fired now, outside its cron."
    SCHEDULE_HISTORY = "schedule_history", "A schedule's last fires can be read back."
    ENQUEUE_ONLY = "enqueue_only", "A client can enqueue and read without ever running steps."
    ERROR_HISTORY = "error_history", "A run keeps the errors of its failed attempts."
    STEP_HISTORY = (
        "step_history",
        "A run keeps every transition of its steps (claimed, retried, reclaimed...), bounded.",
    )
    SHUTDOWN_REQUEUE = "shutdown_requeue", "A stopping client reports the attempts it handed back."
    FORCE_RUN = "force_run", "A delayed or paused run can be started now."
    LABEL_PREFIX = "label_prefix", "Runs can be searched by label, exactly and by prefix."
    HEADERS = (
        "headers",
        "Runs carry string headers from enqueue to every step's context and to show().",
    )
    SERVERS = (
        "servers",
        "Every started client keeps a heartbeat row; live and lately dead servers are listed.",
    )
    WAIT_BRANCH = (
        "wait_branch",
        "A wait whose timeout passes continues its run down a named branch instead of failing.",
    )
    COMPENSATION = (
        "compensation",
        "A failed run runs the compensations of its succeeded steps, in reverse order (a saga).",
    )
    STATS = (
        "stats",
        "Run, step and queue counts and throughput per minute are read from the store's indexes.",
    )
