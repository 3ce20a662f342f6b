"""Acceptance: turns across real OS processes on one SQLite file (docs/behaviour.md §5, real clock).

Each test runs worker code in child processes of the interpreter running the tests, with this
checkout on PYTHONPATH.
"""

import json
import subprocess
import sys
import time
from collections import Counter
from datetime import datetime

import pytest

from harness import procs
from turnlog import EngineConfig, LeaseTimeout, SessionSource, Turnlog

pytestmark = pytest.mark.takes_seconds(25)

PROCESSES = 4
TURNS_PER_PROCESS = 200
KEYS = 3


def _source(k):
    return SessionSource(platform="telegram", chat_id=f"chat-{k}", user_id=f"user-{k}")


# -- many processes, many turns, few keys -------------------------------------------------------

WORKER = r"""
import json, sys
from turnlog import SessionSource, Turnlog

db, worker, turns, keys, out, mode = (sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), sys.argv[5],
                                      sys.argv[6])
sources = [SessionSource(platform="telegram", chat_id=f"chat-{k}", user_id=f"user-{k}") for k in range(keys)]
problems = []

def responder(history, item):
    # The agent must see a transcript that ends with exactly this turn's user message.
    if not history or history[-1].role != "user" or history[-1].content != item.text:
        problems.append(f"turn for {item.text!r} saw {history[-1].role if history else None!r} last")
    if len(history) % 2 != 1:
        problems.append(f"turn for {item.text!r} saw {len(history)} messages")
    return "answer to <" + item.text + ">"

def sender(text):
    pass

outcomes = []
with Turnlog(db) as t:
    for i in range(turns):
        source = sources[(worker + i) % keys]
        text = f"w{worker}-m{i}"
        if mode == "human":  # what a gateway does with a chat message
            done = t.handle_message(source, text, responder, sender)
        else:  # a /queue item: never merged, exactly one turn each
            t.accept(source, text, kind="queued")
            done = []
            while (o := t.run_next(source, responder, sender)) is not None:
                done.append(o)
        for o in done:
            outcomes.append({"session_id": o.session_id, "epoch": o.epoch, "turn_id": o.turn_id,
                             "user_seq": o.user_seq, "reply_seq": o.reply_seq, "delivery": o.delivery_state})
with open(out, "w") as f:
    json.dump({"outcomes": outcomes, "problems": problems}, f)
"""


@pytest.mark.parametrize("mode", ["human", "queued"])
def test_concurrent_processes_never_interleave_turns(tmp_path, mode):
    """4 processes x 200 messages on 3 keys against one file.

    "human": each message goes through handle_message; a message that arrives while an earlier
    one for the key is still pending merges into it (docs/behaviour.md §8), so there are fewer turns than
    messages. "queued": each message is a /queue item, so every message is exactly one turn.
    """
    db = str(tmp_path / "turnlog.db")
    script = tmp_path / "worker.py"
    script.write_text(WORKER)
    Turnlog(db).close()  # create the schema once, before the race
    outs = [tmp_path / f"out-{w}.json" for w in range(PROCESSES)]
    started = time.monotonic()
    workers = [subprocess.Popen([sys.executable, str(script), db, str(w), str(TURNS_PER_PROCESS), str(KEYS),
                                 str(outs[w]), mode], env=procs.child_env(), stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE)
               for w in range(PROCESSES)]
    errors = []
    for p in workers:
        _, err = p.communicate(timeout=600)
        if p.returncode != 0:
            errors.append(err.decode())
    elapsed = time.monotonic() - started
    assert not errors, errors[0]

    results = [json.loads(o.read_text()) for o in outs]
    assert [r["problems"] for r in results] == [[]] * PROCESSES
    outcomes = [o for r in results for o in r["outcomes"]]
    sent = {f"w{w}-m{i}" for w in range(PROCESSES) for i in range(TURNS_PER_PROCESS)}

    with Turnlog(db) as t:
        sessions = [s.session_id for s in t.sessions()]
        assert len(sessions) == KEYS  # one session per key: nobody reset or forked a conversation
        seen = Counter()
        turns = 0
        for sid in sessions:
            order = []
            messages = t.transcript(sid)
            assert len(messages) % 2 == 0, f"{sid} ends with an unanswered message"
            assert [m["seq"] for m in messages] == list(range(1, len(messages) + 1))
            previous_epoch = 0
            for user, reply in zip(messages[0::2], messages[1::2]):
                assert (user["role"], reply["role"]) == ("user", "assistant"), (sid, user["seq"])
                assert reply["content"] == f"answer to <{user['content']}>", (sid, user["seq"])
                assert user["epoch"] == reply["epoch"], (sid, user["seq"])
                assert user["turn_id"] == reply["turn_id"], (sid, user["seq"])
                assert user["epoch"] > previous_epoch, (sid, user["seq"], user["epoch"], previous_epoch)
                previous_epoch = user["epoch"]
                parts = user["content"].split("\n")  # a burst on one key may merge into one turn
                if mode == "queued":
                    assert len(parts) == 1, (sid, user["seq"], parts)
                seen.update(parts)
                order.extend(parts)
                turns += 1
            # FIFO: each worker's messages to this key were answered in the order it sent them
            for w in range(PROCESSES):
                mine = [int(text.split("-m")[1]) for text in order if text.startswith(f"w{w}-")]
                assert mine == sorted(mine), (sid, w)
            epochs = [m["epoch"] for m in messages]
            assert epochs == sorted(epochs)
            assert len(set(m["turn_id"] for m in messages)) == len(messages) // 2
        # every message answered exactly once, none lost, none invented
        assert set(seen) == sent
        if mode == "queued":
            assert turns == PROCESSES * TURNS_PER_PROCESS
        assert max(seen.values()) == 1
        # what the workers report agrees with the log
        assert len(outcomes) == turns
        assert len({(o["session_id"], o["epoch"]) for o in outcomes}) == turns
        assert {o["delivery"] for o in outcomes} == {"delivered"}
        ledger = t.ledger()
        assert len(ledger) == turns
        assert {r.state for r in ledger} == {"delivered"}
        print(f"\n{PROCESSES} processes x {TURNS_PER_PROCESS} messages on {KEYS} keys: {turns} turns"
              f" ({len(sent) - turns} messages merged into a pending burst) in {elapsed:.1f}s")
        for sid in sessions:
            assert t.turns.holder(sid) is None
            assert t.queue(t.session(sid).session_key) == []


# -- a holder killed with SIGKILL: its lease expires and is taken over --------------------------

# The killed holder's lease TTL. The test first sees the lease still held, which needs the child's
# start, kill and the next acquire attempt to fit in it: 5 s (it was 1 s) holds with both cores busy.
HOLDER_TTL_S = 5.0

HOLDER = """
from turnlog import EngineConfig, SessionSource
source = SessionSource(platform="telegram", chat_id="chat-0", user_id="user-0")
t = kit.turnlog(config=EngineConfig(lease_ttl_s=HOLDER_TTL_S))
r = t.get_or_create_session(source)
token = t.turns.acquire_lease(r.session_id, r.session_key, timeout=5)
kit.ready(owner=t.owner, session_id=r.session_id, session_key=r.session_key, epoch=token.epoch,
          expires_at=token.expires_at.isoformat())
kit.hang()
"""


def test_lease_of_a_killed_holder_is_taken_over_after_its_ttl(tmp_path):
    db = str(tmp_path / "turnlog.db")
    config = EngineConfig(lease_ttl_s=HOLDER_TTL_S)
    with Turnlog(db, config=config) as survivor:  # opened first, so it is ready to try at once
        holder = HOLDER.replace("HOLDER_TTL_S", repr(HOLDER_TTL_S))
        dead = procs.crash(db, holder, work=tmp_path).data  # SIGKILLed while it holds the lease
        sid, key = dead["session_id"], dead["session_key"]
        assert dead["owner"] != survivor.owner

        # before the TTL: the dead process still holds it, and the error names it
        with pytest.raises(LeaseTimeout) as err:
            survivor.turns.acquire_lease(sid, key, timeout=0.05)
        assert dead["owner"] in str(err.value)
        assert survivor.turns.holder(sid).owner == dead["owner"]

        # after the TTL: taken over
        token = survivor.turns.acquire_lease(sid, key, timeout=30 * HOLDER_TTL_S)
        assert token.epoch == dead["epoch"] + 1
        assert token.owner == survivor.owner
        acquired = [h for h in survivor.history(sid) if h.event == "LeaseAcquired"]
        assert [(h.data["epoch"], h.data["owner"]) for h in acquired] == [
            (dead["epoch"], dead["owner"]), (token.epoch, survivor.owner)]
        assert acquired[0].data["taken_over_from"] is None
        assert acquired[-1].data["taken_over_from"] == dead["owner"]
        # not before the dead holder's lease had expired
        assert datetime.fromisoformat(acquired[-1].at) >= datetime.fromisoformat(dead["expires_at"])
        assert survivor.turns.holder(sid).owner == survivor.owner
        survivor.turns.append_message(token, "user", "after the crash")
        assert survivor.turns.release_lease(token) is True
