"""Acceptance: `verify` finds hand-edited read-model rows; a damaged full-text index is detected
and rebuilt from the log (automatically, and by `doctor`) without the log changing."""

from __future__ import annotations

import hashlib
import sqlite3

import orjson
import pytest
from click.testing import CliRunner

from turnlog import ManualClock, SequentialIds, SessionSource, Turnlog
from turnlog.cli import main

from chat import ALICE, BOB


def converse(t: Turnlog, source: SessionSource, *texts: str) -> str:
    session_id = t.get_or_create_session(source).session_id
    token = t.turns.acquire_lease(session_id, t.routing_key(source), timeout=1)
    for i, text in enumerate(texts):
        if i % 2:
            t.turns.record_reply(token, text, reply_to=source)
        else:
            t.turns.append_message(token, "user", text)
    t.turns.release_lease(token)
    return session_id


@pytest.fixture
def clock():
    return ManualClock("2026-03-01T10:00:00+00:00")


# Not conftest's `db`: a log already holding two conversations, a suspension and caught-up views.
@pytest.fixture
def db(tmp_path, clock):
    path = str(tmp_path / "turnlog.db")
    with Turnlog(path, clock=clock, session_ids=SequentialIds()) as t:
        converse(t, ALICE, "hello kiwi", "hi, what about kiwi?", "数据库迁移 tonight", "ok")
        converse(t, BOB, "deploy the mango release", "done")
        t.suspend(ALICE, "operator")
        t.maintenance.catch_up()
    return path


def sql(db: str, *statements: str) -> None:
    conn = sqlite3.connect(db)
    try:
        for statement in statements:
            conn.execute(statement)
        conn.commit()
    finally:
        conn.close()


def log_checksum(db: str, upto: int | None = None) -> str:
    """A checksum of the log table (its first `upto` rows)."""
    conn = sqlite3.connect(db)
    try:
        h = hashlib.sha256()
        for row in conn.execute("SELECT rowid, originator_id, originator_version, topic, state FROM stored_events"
                                " WHERE rowid <= ? ORDER BY rowid", (upto or 2**62,)):
            h.update(repr(row).encode())
        return h.hexdigest()
    finally:
        conn.close()


def cli(*args: str):
    return CliRunner().invoke(main, list(args))


# -- verify -----------------------------------------------------------------------------------


def test_verify_passes_on_an_untouched_database(db):
    result = cli("--db", db, "verify")
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert {line.split(":")[0] for line in lines} >= {"routes", "sessions", "timeline", "ledger",
                                                      "queue", "leases", "search"}
    assert all(": ok at position" in line for line in lines)


def test_verify_names_a_hand_edited_row_and_exits_1(db, clock):
    with Turnlog(db, clock=clock) as t:
        session_id = t.sessions()[0].session_id
    sql(db, f"UPDATE sessions SET display_name='mallory' WHERE session_id='{session_id}'")

    result = cli("--db", db, "verify")

    assert result.exit_code == 1
    assert "sessions: MISMATCH" in result.output
    assert f"sessions: changed row session_id={session_id}" in result.output
    assert "routes: ok" in result.output and "search: ok" in result.output
    assert "Traceback" not in result.output


def test_verify_names_missing_and_extra_rows_in_json(db):
    sql(db, "DELETE FROM search_messages WHERE id = (SELECT min(id) FROM search_messages)",
        "INSERT INTO timeline_streams (stream, filing, first_position) VALUES ('forged', 1, 999999)")
    result = cli("--db", db, "verify", "--json")
    assert result.exit_code == 1
    report = orjson.loads(result.output)
    bad = {p["name"]: p for p in report["projections"] if not p["ok"]}
    assert set(bad) == {"search", "timeline"}
    timeline = next(t for t in bad["timeline"]["tables"] if t["table"] == "timeline_streams")
    assert (timeline["extra"], timeline["missing"], timeline["changed"]) == (1, 0, 0)
    assert timeline["differences"] == [{"kind": "extra", "key": {"first_position": 999999}}]
    messages = next(t for t in bad["search"]["tables"] if t["table"] == "search_messages")
    assert (messages["missing"], messages["differences"][0]["kind"]) == (1, "missing")
    # the FTS index still holds the deleted row: its own check says so
    assert bad["search"]["problems"]


def test_verify_only_the_named_projections(db):
    sql(db, "UPDATE routes SET bound_reason='forged'")
    assert cli("--db", db, "verify", "sessions", "search").exit_code == 0
    assert cli("--db", db, "verify", "routes").exit_code == 1
    assert cli("--db", db, "verify", "nonsense").exit_code == 2


def test_verify_api_report(db, clock):
    with Turnlog(db, clock=clock) as t:
        report = t.maintenance.verify()
        assert report["ok"] is True
        sql(db, "UPDATE deliveries SET state='delivered'")
        report = t.maintenance.verify(["ledger"])
    assert report["ok"] is False
    assert [p["name"] for p in report["projections"]] == ["ledger"]
    assert report["projections"][0]["tables"][0]["changed"] >= 1


# -- a damaged full-text index ----------------------------------------------------------------

GARBAGE = "x'0102030405060708090a0b0c0d0e0f10'"


def damage_structure(db: str) -> None:
    """Overwrite the FTS5 structure record and every segment: the index cannot even be opened."""
    sql(db, f"UPDATE search_fts_data SET block = {GARBAGE} WHERE id >= 10",
        f"UPDATE search_fts_trigram_data SET block = {GARBAGE} WHERE id >= 10")


def damage_segments(db: str) -> None:
    """Overwrite the index's segment pages only: it opens, and fails when a query reads them."""
    sql(db, f"UPDATE search_fts_data SET block = {GARBAGE} WHERE id > 10")


@pytest.mark.parametrize("damage", [damage_structure, damage_segments])
def test_search_on_a_damaged_index_rebuilds_it_from_the_log_and_answers(db, clock, damage):
    with Turnlog(db, clock=clock) as t:
        expected = t.search("kiwi")
    before = log_checksum(db)
    damage(db)

    with Turnlog(db, clock=clock) as t:
        assert t.search("kiwi") == expected
        assert t.search("数据库") != []
        assert t.maintenance.doctor(repair=False)["findings"] == []

    assert log_checksum(db) == before


def test_a_write_into_a_damaged_index_rebuilds_it_and_goes_on(db, clock):
    with Turnlog(db, clock=clock) as t:
        head = t.maintenance.projection_status()[0].head
    before = log_checksum(db)
    damage_structure(db)
    with Turnlog(db, clock=clock, session_ids=SequentialIds()) as t:
        converse(t, BOB, "a new papaya arrives")
        assert t.maintenance.catch_up() >= 0  # catching the search index up meets the damage, repairs it
        assert [h.snippet for h in t.search("papaya")] == ["a new >>>papaya<<< arrives"]
        assert len(t.search("kiwi")) == 2
        assert t.maintenance.verify()["ok"] is True
    assert log_checksum(db, upto=head) == before  # the new turn was appended; nothing else changed


def test_doctor_reports_then_repairs_a_damaged_index_and_never_touches_the_log(db, clock):
    with Turnlog(db, clock=clock) as t:
        expected = t.search("kiwi")
    before = log_checksum(db)
    damage_structure(db)

    report = cli("--db", db, "doctor", "--dry-run")
    assert report.exit_code == 1
    assert "integrity" in report.output and "search" in report.output and "found" in report.output

    repaired = cli("--db", db, "doctor", "--json")
    assert repaired.exit_code == 0, repaired.output
    findings = orjson.loads(repaired.output)["findings"]
    assert {(f["check"], f["projection"], f["repaired"]) for f in findings} == {("integrity", "search", True)}

    healthy = cli("--db", db, "doctor")
    assert healthy.exit_code == 0
    assert healthy.output.startswith("no problems found")
    with Turnlog(db, clock=clock) as t:
        assert t.search("kiwi") == expected
    assert cli("--db", db, "verify").exit_code == 0
    assert log_checksum(db) == before


def test_doctor_deep_repairs_a_read_model_that_lost_its_rows(db, clock):
    sql(db, "DROP TABLE leases")
    with Turnlog(db, clock=clock) as t:  # opening recreates the table, empty, at the old position
        assert t.maintenance.verify(["leases"])["ok"] is False
        assert t.maintenance.doctor()["findings"] == []  # the quick checks cannot see it ...
        report = t.maintenance.doctor(deep=True)  # ... comparing with a rebuild does
        assert [(f["check"], f["projection"], f["repaired"]) for f in report["findings"]] == [
            ("verify", "leases", True)]
        assert report["ok"] is True
        assert t.maintenance.verify()["ok"] is True


def test_doctor_cli_deep(db):
    sql(db, "UPDATE search_messages SET role='tool'")
    result = cli("--db", db, "doctor", "--deep")
    assert result.exit_code == 0, result.output
    assert "verify" in result.output and "repaired" in result.output
    assert cli("--db", db, "verify").exit_code == 0
