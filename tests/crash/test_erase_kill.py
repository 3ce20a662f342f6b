"""`erase_subject` SIGKILLed at each of its points (a real process, tests/harness): what the erase
had not finished is finished by running it again (killed before SubjectErased was recorded: the
keys found gone, it records the erase and rebuilds) or by the next open's catch-up (killed after:
the read models are refilled from the log and their freed pages zeroed). The chain verifies
throughout, and the subject's next message starts a session whose words are kept."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from harness import procs
from sqlite_files import checkpoint
from turnlog import ManualClock, Turnlog

from chat import alice, collect, echo

START = "2026-01-01T00:00:00+00:00"
PHRASE = "medlar carillon 6174"
ERASE = 't.erase_subject("telegram:42", actor="operator", cause="erase request")\nkit.hang()'

POINTS = {
    # the keys destroyed, SubjectErased decided and not saved
    "before-record": """
t = kit.turnlog()
kit.kill_before_save(t, lambda items: any(type(i).__name__ == "SubjectErased" for i in items))
""",
    # SubjectErased inserted, not committed
    "in-transaction": """
t = kit.turnlog()
kit.kill_in_transaction(t, "turnlog:SubjectErased")
""",
    # SubjectErased committed, the read models not yet rebuilt (they still hold the words)
    "recorded": """
t = kit.turnlog()
kit.kill_after_save(t, lambda items: any(type(i).__name__ == "SubjectErased" for i in items))
""",
}


def erasures(t: Turnlog, session_id: str) -> list[str]:
    return [h.event for h in t.history(session_id) if h.event == "SubjectErased"]


def file_bytes(db: Path) -> bytes:
    return b"".join(p.read_bytes() for p in db.parent.glob(db.name + "*") if p.is_file() and not p.name.endswith(".key"))


@pytest.mark.parametrize("point", sorted(POINTS))
def test_an_erase_killed_at_any_point_is_finished_by_running_it_again_or_by_the_next_open(tmp_path, point):
    db = tmp_path / "live.db"
    with Turnlog(db, clock=ManualClock(START)) as t:
        old = t.handle_message(alice("m1"), PHRASE, echo, collect([]))[0].session_id
        assert t.search("medlar")

    procs.crash(db, POINTS[point] + ERASE, at=START, work=tmp_path)

    with Turnlog(db, clock=ManualClock(START)) as t:
        if point == "recorded":
            assert len([e for e in t.events_around(t.maintenance.log_head(), before=50, after=0)
                        if e.event == "SubjectErased"]) == 1
        else:  # not recorded: the operator runs it again, and it records the erase it finds done
            assert not [e for e in t.events_around(t.maintenance.log_head(), before=50, after=0)
                        if e.event == "SubjectErased"]
            report = t.erase_subject("telegram:42", actor="operator", cause="erase request, again")
            assert report.keys == 0 and report.position
        assert [m["content"] for m in t.transcript(old)] == ["[erased]", "[erased]"]
        assert t.search("medlar") == []
        assert not t.maintenance.verify_chain().breaks
        assert t.maintenance.verify()["ok"]
        after = t.handle_message(alice("m2"), "new words", echo, collect([]))[0]
        assert after.session_id != old
        assert [m["content"] for m in t.transcript(after.session_id)] == ["new words", "re: new words"]
    checkpoint(str(db))
    assert PHRASE.encode() not in file_bytes(db)
    assert os.path.exists(db)
