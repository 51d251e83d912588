"""Migrating a namespace, and refusing to start on one that is not migrated right.

Migrations run on a connection of their own, outside the transaction runner:
the dialect serialises migrators across processes (:meth:`Dialect.migration_lock`),
DDL may commit implicitly (MySQL), and each file is applied and recorded in the
ledger in one transaction where the engine allows it. The ledger is read after
the lock is taken, so each version is applied exactly once, and the checksum
recorded with it refuses an applied file that was edited afterwards.

:meth:`Schema.check` is what a client runs before it starts: a schema that is
missing, behind, or newer than this release is refused with the command that
fixes it, rather than failing later on the first statement that meets it.
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Collection

from .._errors import CairnError, SchemaNotReady, SchemaTooNew, Unavailable
from ._migrations import Migration
from ._parts import Part
from ._rows import to_text
from ._tables import TABLES, TABLES_OF_CAPABILITY
from ._transactions import close_quietly, rollback_quietly, unavailable

__all__ = ["Schema"]

log = logging.getLogger("cairnflow.sql")


class Schema(Part):
    """``migrate``, ``check_schema``, ``migration_scripts``, ``drop_tables``, ``table_names``."""

    def migrate(self) -> list[str]:
        """Apply every migration not yet in the ledger; return their labels.

        A migrator that loses a lock race (a busy database, a deadlock) starts
        again: it re-reads the ledger and skips what the winner applied.
        """
        applied: list[str] = []
        attempts = self._tx.attempts
        for attempt in range(1, attempts + 1):
            try:
                self._migrate_once(applied)
                return applied
            except Exception as error:
                if isinstance(error, CairnError) or attempt == attempts:
                    raise
                if not self._tx.classify(error).retryable:
                    raise
                time.sleep(random.uniform(0.01, 0.05) * attempt)
        return applied

    def _migrate_once(self, applied: list[str]) -> None:
        q, dialect, tables = self._q, self._dialect, self.context.tables
        channel = self.context.channel
        with self._tx.connections.connection() as conn:
            cursor = conn.cursor()
            try:
                with dialect.migration_lock(cursor, channel):
                    dialect.begin_migration(cursor)
                    dialect.prepare_namespace(cursor, tables)
                    self._execute(cursor, q.ledger_ddl)
                    conn.commit()
                    for migration in self.context.migrations:
                        dialect.begin_migration(cursor)
                        rows = self._execute(cursor, q.ledger).fetchall()
                        ledger = {version: checksum for version, _name, checksum in rows}
                        if migration.version in ledger:
                            self._check_checksum(migration, to_text(ledger[migration.version]))
                            conn.commit()
                            continue
                        for statement in migration.statements(tables):
                            dialect.migration_statement(cursor, statement)
                        self._execute(
                            cursor,
                            q.record_migration,
                            (migration.version, migration.name, migration.checksum, time.time_ns()),
                        )
                        conn.commit()
                        applied.append(migration.label)
                        log.info("applied migration %s to %s", migration.label, channel)
            except Exception as error:
                rollback_quietly(conn)
                if isinstance(error, CairnError):
                    raise
                if self._tx.classify(error).unavailable:
                    raise unavailable(self._tx.driver, error) from error
                raise
            finally:
                close_quietly(cursor)

    def _check_checksum(self, migration: Migration, recorded: str) -> None:
        if recorded != migration.checksum:
            raise CairnError(
                f"migration {migration.label} was applied to "
                f"{self.context.tables.unqualified('')}* with checksum {recorded[:12]}..., but "
                f"this release's file has {migration.checksum[:12]}...: an applied migration "
                f"must never change"
            )

    def migration_scripts(self) -> list[tuple[str, str]]:
        """Every migration as SQL a DBA can apply by hand, ledger rows included."""
        tables = self.context.tables
        scripts = [("000_ledger", self._q.ledger_ddl + ";")]
        for migration in self.context.migrations:
            body = ";\n".join(migration.statements(tables))
            record = (
                f"INSERT INTO {tables.migrations} (version, name, checksum, applied_at) "
                f"VALUES ({migration.version}, '{migration.name}', '{migration.checksum}', 0)"
            )
            scripts.append((migration.label, f"{body};\n{record};"))
        return scripts

    def check(self, capabilities: Collection[str] = ()) -> None:
        """Refuse to start on a schema that is missing, behind, or newer than this release.

        ``capabilities``: what the store declares; a table only an undeclared capability
        uses (:data:`TABLES_OF_CAPABILITY`) is not probed.
        """
        tables, migrations, info = self.context.tables, self.context.migrations, self.context.info
        try:
            rows = self._tx.fetch(self._q.ledger)
        except Unavailable:
            raise
        except Exception as error:
            raise SchemaNotReady(
                f"table {tables.unqualified('migrations')} is not readable ({error}): the "
                f"database was never migrated; run store.migrate() or `cairn migrate URL` first"
            ) from error
        applied = {int(version) for version, _name, _checksum in rows}
        known = len(migrations)
        newest = max(applied, default=0)
        if newest > known:
            raise SchemaTooNew(
                f"the tables {tables.unqualified('')}* were migrated to schema version "
                f"{newest} by a newer release; this {info.distribution} "
                f"{info.version} knows versions up to {known}: upgrade it"
            )
        missing = [m.label for m in migrations if m.version not in applied]
        if missing:
            raise SchemaNotReady(
                f"migration(s) {', '.join(missing)} are not applied to "
                f"{tables.unqualified('')}*: run store.migrate() or `cairn migrate URL` first"
            )
        for table, probe in self._q.probe.items():
            needs = TABLES_OF_CAPABILITY.get(table)
            if needs is not None and needs not in capabilities:
                continue
            try:
                self._tx.fetch(probe)
            except Unavailable:
                raise
            except Exception as error:
                raise SchemaNotReady(
                    f"table {tables.unqualified(table)} is not readable ({error}); run "
                    f"store.migrate() or `cairn migrate URL` first"
                ) from error

    def drop_tables(self) -> None:
        """Drop every table of this namespace, the ledger included, and the functions its
        migrations made (:attr:`Dialect.namespace_routines`). Irreversible."""
        tables = self.context.tables
        with self._tx.connections.connection() as conn:
            cursor = conn.cursor()
            try:
                # Every table of TABLES (none forgotten when one is added), the newest
                # first, and the ledger last.
                for table in [t for t in reversed(TABLES) if t != "migrations"] + ["migrations"]:
                    self._dialect.begin_migration(cursor)
                    cursor.execute(f"DROP TABLE IF EXISTS {getattr(tables, table)}")
                    conn.commit()
                # Then the trigger functions, which outlive their tables (left behind, the
                # namespace's first migration would meet them again, and refuse).
                for routine in self._dialect.namespace_routines:
                    name = tables.qualifier + self._dialect.quote(tables.prefix + routine)
                    self._dialect.begin_migration(cursor)
                    cursor.execute(f"DROP FUNCTION IF EXISTS {name}()")
                    conn.commit()
            except Exception:
                rollback_quietly(conn)
                raise
            finally:
                close_quietly(cursor)

    def table_names(self) -> list[str]:
        """The bare names of this namespace's tables."""
        return [self.context.tables.unqualified(t) for t in TABLES]
