"""Issue 19 item 6: Hermes' owed replies (delivery_obligations pending, attempting, failed) are imported
as owed ledger rows: `ledger` lists them, `status` counts them, the next sweep redelivers them with the
recovered-reply prefix; delivered rows stay history. Built on copies of the fixture home."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

from harness.cli import ok
from harness.hermes_home import copy_home

from turnlog import ManualClock, SequentialIds, Turnlog
from turnlog.domain.delivery import RECOVERED_PREFIX

EMAIL_2 = "20261121_100501_65f050a7"  # its reply's ledger row is `failed` (FIXTURE.md scenario 9)
WEIXIN = "20261118_190001_079d16b1"


def owed_home(tmp_path: Path) -> Path:
    """The fixture with two of weixin's delivered rows put back to pending and attempting."""
    home = copy_home(tmp_path / "home")
    db = sqlite3.connect(home / "state.db")
    with db:
        ids = [r[0] for r in db.execute("SELECT obligation_id FROM delivery_obligations WHERE session_key LIKE"
                                        " '%weixin%' ORDER BY created_at")]
        db.execute("UPDATE delivery_obligations SET state='pending' WHERE obligation_id=?", (ids[0],))
        db.execute("UPDATE delivery_obligations SET state='attempting', attempts=1 WHERE obligation_id=?", (ids[2],))
    db.close()
    return home


def reply_text(home: Path, state: str) -> set[str]:
    db = sqlite3.connect(home / "state.db")
    try:
        return {r[0] for r in db.execute("SELECT content FROM delivery_obligations WHERE state=?", (state,))}
    finally:
        db.close()


def test_owed_rows_are_in_the_ledger_and_counted_by_status(tmp_path) -> None:
    home = owed_home(tmp_path)
    db = str(tmp_path / "t.db")
    report = json.loads(ok("--db", db, "import-hermes", str(home), "--json").stdout)
    assert (report["ledger_rows"], report["owed_replies"]) == (6, 3)
    ledger = json.loads(ok("--db", db, "ledger", "--json").stdout)
    assert sorted(r["session_id"] for r in ledger) == sorted([EMAIL_2, WEIXIN, WEIXIN])
    assert {r["state"] for r in ledger} == {"unknown"}  # unsure: the old gateway may have sent them
    assert {r["content"] for r in ledger} == reply_text(home, "failed") | reply_text(home, "pending") \
        | reply_text(home, "attempting")
    status = json.loads(ok("--db", db, "status", "--json").stdout)
    assert len(status["pending_deliveries"]) == 3
    # delivered rows stay history: not owed, and a re-run adds nothing
    again = json.loads(ok("--db", db, "import-hermes", str(home), "--json").stdout)
    assert again["owed_replies"] == 0
    assert len(json.loads(ok("--db", db, "ledger", "--json").stdout)) == 3


def test_the_next_sweep_redelivers_them_with_the_recovered_prefix(tmp_path) -> None:
    home = owed_home(tmp_path)
    clock = ManualClock("2026-12-01T00:00:00+00:00")
    with Turnlog(str(tmp_path / "t.db"), clock=clock, session_ids=SequentialIds(), owner="new-boot") as t:
        t.import_hermes(home)
        sent: list[tuple[str, str, str]] = []
        swept = t.sweep_deliveries(lambda target, text: sent.append((target["session_id"], target["chat_id"], text)))
        assert len(swept.delivered) == 3 and not swept.failed
        owed = reply_text(home, "failed") | reply_text(home, "pending") | reply_text(home, "attempting")
        assert {text for _, _, text in sent} == {RECOVERED_PREFIX + content for content in owed}
        assert ("20261121_100501_65f050a7", "dana.whitfield@example.org") in {(s, c) for s, c, _ in sent}
        assert t.sweep_deliveries(lambda target, text: sent.append(("again", "", text))).delivered == []
        # recorded as events: the import's, with its cause, then the sweep's
        [row] = [r for r in t.ledger() if r.session_id == EMAIL_2]
        assert row.state == "delivered"
        events = [e for e in t.history(EMAIL_2) if e.event.startswith("Delivery")]
        assert [e.event for e in events] == ["DeliveryRecorded", "DeliveryMarkedUnsure", "DeliveryAttempting",
                                             "DeliveryDelivered"]
        assert events[0].actor == "import:hermes" and events[0].cause.startswith(f"hermes:{home.resolve()}#{EMAIL_2}")
