"""turnlog's PostgreSQL event recorder: a save is one round trip to the server.

The library's recorder sends a save as a pipeline (lock the table, notify, insert, sync, commit:
two or three waits on the server) unless its database functions are enabled, and its function
inserts without taking the table lock, so two concurrent saves could commit out of position
order and a reader tailing the log could pass over an event committed late. This recorder,
selected through the library's `APPLICATION_RECORDER_TOPIC`, installs a function of its own that
takes the same lock the library's pipeline takes and inserts in the one statement: one call in
autocommit is one transaction, the lock is held to its commit, so positions are still given in
commit order. A save with recorder options falls back to the library's path.
"""

from __future__ import annotations

from typing import Any, Sequence

from eventsourcing.persistence import IntegrityError, InterfaceError, OperationalError, StoredEvent
from eventsourcing.postgres import PostgresApplicationRecorder, PostgresDatastore
from eventsourcing.utils import retry
from psycopg.sql import SQL, Identifier, Literal

from .erased_keys import ERASED, KeyErased, sealing_keys
from .keys import DATA_KEYS


class OneTripRecorder(PostgresApplicationRecorder):
    def __init__(self, datastore: PostgresDatastore, events_table_name: str = "stored_events") -> None:
        super().__init__(datastore, events_table_name=events_table_name)
        function = Identifier(f"turnlog_insert_events_{datastore.originator_id_type}")
        schema, table = Identifier(datastore.schema), Identifier(self.events_table_name)
        self.sql_create_statements.append(SQL(
            "CREATE OR REPLACE FUNCTION {schema}.{function}(events {schema}.{event}[]) RETURNS SETOF bigint"
            " LANGUAGE plpgsql AS $BODY$ BEGIN"
            " SET LOCAL lock_timeout = '{lock_timeout}s';"
            " LOCK TABLE {schema}.{table} IN EXCLUSIVE MODE;"
            " NOTIFY {channel};"
            " RETURN QUERY INSERT INTO {schema}.{table} AS t (originator_id, originator_version, topic, state)"
            " SELECT originator_id, originator_version, topic, state FROM unnest(events)"
            " RETURNING notification_id;"
            " END; $BODY$"
        ).format(schema=schema, function=function, event=Identifier(self.stored_event_type_name),
                 lock_timeout=datastore.lock_timeout, table=table, channel=Identifier(self.channel_name)))
        self.insert_in_one_trip = SQL("SELECT * FROM {schema}.{function}((%s))").format(schema=schema,
                                                                                      function=function)
        self.returned_column = f"turnlog_insert_events_{datastore.originator_id_type}"
        # The same for events with sealed fields, refused if a key that sealed them is erased
        # (erased_keys.py). The check runs under the table lock, which an erase's destruction of
        # keys takes too (keys.py), so the two are ordered without locking the key rows. The key
        # table is named as the key store names it (the connection's search_path); it exists
        # whenever a key has sealed anything.
        sealed = Identifier(f"turnlog_insert_sealed_events_{datastore.originator_id_type}")
        self.sql_create_statements.append(SQL(
            "CREATE OR REPLACE FUNCTION {schema}.{function}(events {schema}.{event}[], key_ids text[])"
            " RETURNS SETOF bigint LANGUAGE plpgsql AS $BODY$ BEGIN"
            " SET LOCAL lock_timeout = '{lock_timeout}s';"
            " LOCK TABLE {schema}.{table} IN EXCLUSIVE MODE;"
            " IF EXISTS (SELECT 1 FROM {keys} WHERE key_id = ANY(key_ids) AND wrapped IS NULL) THEN"
            " RAISE EXCEPTION USING ERRCODE = 'check_violation', MESSAGE = {erased}; END IF;"
            " RETURN QUERY SELECT * FROM {schema}.{plain}(events);"
            " END; $BODY$"
        ).format(schema=schema, function=sealed, event=Identifier(self.stored_event_type_name),
                 lock_timeout=datastore.lock_timeout, table=table, keys=Identifier(DATA_KEYS), erased=Literal(ERASED),
                 plain=function))
        self.insert_sealed_in_one_trip = SQL("SELECT * FROM {schema}.{function}((%s), (%s))").format(
            schema=schema, function=sealed)
        self.returned_sealed_column = f"turnlog_insert_sealed_events_{datastore.originator_id_type}"

    @retry((InterfaceError, OperationalError), max_attempts=10, wait=0.2)  # as the library's own insert
    def insert_events(self, stored_events: Sequence[StoredEvent], **kwargs: Any) -> Sequence[int] | None:
        if kwargs or not stored_events:
            return super().insert_events(stored_events, **kwargs)
        rows = [self.construct_pg_stored_event(originator_id=e.originator_id, originator_version=e.originator_version,
                                               topic=e.topic, state=e.state) for e in stored_events]
        key_ids = sealing_keys(stored_events)
        try:
            with self.datastore.get_connection() as conn, conn.cursor() as curs:
                if key_ids:
                    curs.execute(self.insert_sealed_in_one_trip, (rows, key_ids), prepare=True)
                    return [row[self.returned_sealed_column] for row in curs.fetchall()]
                curs.execute(self.insert_in_one_trip, (rows,), prepare=True)
                return [row[self.returned_column] for row in curs.fetchall()]
        except IntegrityError as e:
            if ERASED in str(e):
                raise KeyErased(f"{e}: nothing was written") from e
            raise
