"""A /compress killed with SIGKILL midway leaves all or nothing of it in the log (real processes).

The child gateway runs /compress and is killed: while its summariser thinks, after the compaction
is decided but before it is saved, inside the save's SQLite transaction before the commit, and
right after the commit. Then a fresh process reads the log: either no trace of the compaction
(and the session's lease free at once, with no expiry to wait for) or all of it (the summary
standing, the lease's instant hold acquired and released).
"""

from __future__ import annotations

import pytest

from harness import procs
from turnlog import ManualClock, SequentialIds, Turnlog

from chat import alice, echo

AT = "2026-03-01T09:00:00+00:00"

COMPRESS = """
from turnlog import EngineConfig, SessionSource
src = SessionSource(platform="telegram", chat_type="dm", chat_id="42", user_id="42")
def summariser(messages, focus):
    if KILL == "summariser":
        kit.ready()  # the parent kills while the summary is being written
        kit.hang()
    return "the summary of %d messages" % len(messages)
t = kit.turnlog(config=EngineConfig(summariser=summariser))
compacting = lambda items: any(type(e).__name__ == "TranscriptCompacted" for i in items
                               for e in getattr(i, "pending_events", ()))
if KILL == "before_save":
    kit.kill_before_save(t, compacting)
elif KILL == "in_transaction":
    kit.kill_in_transaction(t, "turnlog:TranscriptCompacted")
elif KILL == "after_save":  # saved: the session holds the edit (its pending events are gone)
    kit.kill_after_save(t, lambda items: any(getattr(i, "edit_records", None) for i in items))
t.command(src, "/compress")
"""


def chatted(db: str) -> tuple[str, int, list[str]]:
    with Turnlog(db, clock=ManualClock(AT), session_ids=SequentialIds()) as t:
        for i in range(3):
            t.handle_message(alice(f"m{i}"), f"question {i}", echo, lambda text: None)
        session_id = t.session(alice()).session_id
        return session_id, t.maintenance.log_head(), [m.content for m in t.turns.agent_history(session_id)]


@pytest.mark.parametrize("kill", ["summariser", "before_save", "in_transaction"])
def test_a_compaction_killed_before_its_commit_leaves_nothing(tmp_path, kill):
    db = str(tmp_path / "t.db")
    session_id, head, history = chatted(db)

    procs.crash(db, f"KILL = {kill!r}\n" + COMPRESS, at=AT)

    with Turnlog(db, clock=ManualClock(AT)) as t:
        assert t.maintenance.log_head() == head
        assert not [e for e in t.history(session_id) if e.event == "TranscriptCompacted"]
        assert [m.content for m in t.turns.agent_history(session_id)] == history
        assert t.turns.holder(session_id) is None  # nothing held: no lease expiry to wait for
        again = t.command(alice(), "/compress")  # at the same instant
        assert again.changed, again.reply
        assert [m.content for m in t.turns.agent_history(session_id)][0].startswith("[CONTEXT COMPACTION")
        assert t.maintenance.verify_chain().breaks == []


def test_a_compaction_killed_after_its_commit_is_there_whole(tmp_path):
    db = str(tmp_path / "t.db")
    session_id, head, history = chatted(db)

    procs.crash(db, "KILL = 'after_save'\n" + COMPRESS, at=AT)

    with Turnlog(db, clock=ManualClock(AT)) as t:
        added = [e for e in t.history(session_id) if e.position > head]
        assert [e.event for e in added] == ["LeaseAcquired", "LeaseReleased", "TranscriptCompacted"]
        assert len({e.position for e in added}) == 3 and t.maintenance.log_head() == head + 3
        assert [m.content for m in t.turns.agent_history(session_id)] == ["the summary of 6 messages"]
        assert t.turns.holder(session_id) is None
        assert t.maintenance.verify_chain().breaks == []
