"""Table names: a validated prefix (and schema), quoted by the dialect.

Identifiers from configuration are never trusted: the prefix must match
``^[a-z_][a-z0-9_]{0,47}$`` and a schema ``^[a-z_][a-z0-9_]{0,62}$``, and both
are quoted as well. Two prefixes share nothing.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from .._names import check_sql_identifier

__all__ = ["PREFIX_PATTERN", "SCHEMA_PATTERN", "TABLES", "Tables"]

PREFIX_PATTERN = r"[a-z_][a-z0-9_]{0,47}"
SCHEMA_PATTERN = r"[a-z_][a-z0-9_]{0,62}"
TABLES = (
    "runs",
    "steps",
    "signals",
    "schedules",
    "ticks",
    "leaders",
    "pauses",
    "limits",
    "journal",
    "locks",
    "errors",
    "run_labels",
    "servers",
    "runs_archive",
    "steps_archive",
    "step_history",
    "lifecycle",
    "lifecycle_subs",
    "migrations",
)
"""Every table of the schema, without prefix."""

TABLES_OF_CAPABILITY = {"lifecycle": "lifecycle", "lifecycle_subs": "lifecycle"}
"""Tables only a capability's statements read or write, by table: the capability's value.
A store that does not declare it need not have them (the reference schema leaves the
lifecycle outbox out: its rows are written by each driver's own triggers), so the schema
check probes them only where it is declared."""


@dataclass(frozen=True, slots=True)
class Tables:
    """The quoted, qualified names of one namespace's tables."""

    prefix: str
    schema: str | None
    runs: str
    steps: str
    signals: str
    schedules: str
    ticks: str
    leaders: str
    pauses: str
    limits: str
    journal: str
    locks: str
    errors: str
    run_labels: str
    """One row per label of a run (``Cap.LABEL_PREFIX``: the label index)."""
    servers: str
    """One heartbeat row per client node (``Cap.SERVERS``)."""
    runs_archive: str
    """Archived runs (``Cap.ARCHIVE``): cold rows no claim ever reads."""
    steps_archive: str
    """The steps of archived runs, outputs included (``Cap.ARCHIVE``)."""
    step_history: str
    """One row per transition of a step, written by the database (``Cap.STEP_HISTORY``)."""
    lifecycle: str
    """The outbox of run and step events, written by the database (``Cap.LIFECYCLE``)."""
    lifecycle_subs: str
    """Which channels want the events of which workflows (``Cap.LIFECYCLE``)."""
    migrations: str
    qualifier: str
    """The quoted schema and a dot, or nothing: what precedes a table name."""

    @classmethod
    def build(cls, prefix: str, schema: str | None, quote: Callable[[str], str]) -> Tables:
        """Validate ``prefix`` and ``schema`` and quote every table name with ``quote``."""
        check_sql_identifier("table prefix", prefix, PREFIX_PATTERN, 48)
        if schema is not None:
            check_sql_identifier("schema", schema, SCHEMA_PATTERN, 63)
        qualifier = f"{quote(schema)}." if schema is not None else ""

        def name(table: str) -> str:
            return f"{qualifier}{quote(prefix + table)}"

        return cls(
            prefix=prefix,
            schema=schema,
            runs=name("runs"),
            steps=name("steps"),
            signals=name("signals"),
            schedules=name("schedules"),
            ticks=name("ticks"),
            leaders=name("leaders"),
            pauses=name("pauses"),
            limits=name("limits"),
            journal=name("journal"),
            locks=name("locks"),
            errors=name("errors"),
            run_labels=name("run_labels"),
            servers=name("servers"),
            runs_archive=name("runs_archive"),
            steps_archive=name("steps_archive"),
            step_history=name("step_history"),
            lifecycle=name("lifecycle"),
            lifecycle_subs=name("lifecycle_subs"),
            migrations=name("migrations"),
            qualifier=qualifier,
        )

    def template(self) -> dict[str, str]:
        """The placeholders of query and migration templates.

        ``{runs}``, ``{steps}``, ``{signals}``, ``{schedules}``, ``{ticks}``,
        ``{leaders}``, ``{pauses}``, ``{limits}``, ``{journal}``, ``{locks}``, ``{errors}``,
        ``{run_labels}``, ``{servers}``, ``{runs_archive}``, ``{steps_archive}``,
        ``{step_history}``, ``{lifecycle}``, ``{lifecycle_subs}``, ``{migrations}``:
        qualified, quoted table names;
        ``{p}``: the raw (validated) prefix, for index names; ``{schema}``: the quoted
        schema and a dot, or nothing.
        """
        return {
            "runs": self.runs,
            "steps": self.steps,
            "signals": self.signals,
            "schedules": self.schedules,
            "ticks": self.ticks,
            "leaders": self.leaders,
            "pauses": self.pauses,
            "limits": self.limits,
            "journal": self.journal,
            "locks": self.locks,
            "errors": self.errors,
            "run_labels": self.run_labels,
            "servers": self.servers,
            "runs_archive": self.runs_archive,
            "steps_archive": self.steps_archive,
            "step_history": self.step_history,
            "lifecycle": self.lifecycle,
            "lifecycle_subs": self.lifecycle_subs,
            "migrations": self.migrations,
            "p": self.prefix,
            "schema": self.qualifier,
        }

    def unqualified(self, table: str) -> str:
        """The bare name of ``table`` in this namespace (``cf_runs``), for catalog lookups."""
        return self.prefix + table
