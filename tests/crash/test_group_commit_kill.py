"""SIGKILL during group commit: a gateway running several keys concurrently (the asyncio API, its
saves grouped into shared transactions) is killed at the k-th group commit, inside the group's
transaction or right after its commit (before any member's thread has sent or acknowledged what
it saved), then restarted on the same log to finish its work.

The kill point is chosen by the environment (KILL_AFTER_GROUP, KILL_POINT; or KILL_AT_WRITE, the
n-th write transaction of any kind), so each case is deterministic: while the keys run, each lone
commit waits for two saves to queue behind it, so group commits come for certain, not by the
chance of overlapping saves. The kill -9 harness's checker judges the result from the log and
the fake platform's send file: no accepted message lost (each answered once), no reply sent twice or
sent at all without the delivery ledger recording its attempt, nothing owed or held at the end.
"""

from __future__ import annotations

import os

import pytest

from harness import procs
from harness.checker import check
from turnlog import Turnlog

KEYS = 8
MESSAGES = 6  # 48 turns of 3 saves, lone commits each followed by a group: at least 144 / 9 = 16 groups

GATEWAY = """
import asyncio, itertools, os
from harness.adapter import FakeAdapter
from harness.log import events
from turnlog import EngineConfig, SessionSource
from turnlog.aio import AsyncTurnlog

KEYS, MESSAGES = {keys}, {messages}
adapter = FakeAdapter(kit.work / "sent.jsonl", boot=os.getpid())
t = kit.turnlog(config=EngineConfig(freshness_window_s=3600, lease_ttl_s=2.0), owner=f"gw-{{os.getpid()}}")
if os.environ.get("KILL_AFTER_GROUP"):
    kit.kill_in_group(t, int(os.environ["KILL_AFTER_GROUP"]), os.environ["KILL_POINT"])
if os.environ.get("KILL_AT_WRITE"):
    kit.kill_at_write(t, int(os.environ["KILL_AT_WRITE"]))
replies = itertools.count()

def source(key, n=None):
    return SessionSource(platform="telegram", chat_type="dm", chat_id=str(100 + key), user_id=str(100 + key),
                         message_id=None if n is None else f"k{{key}}m{{n}}")

async def agent(history, item):
    await asyncio.sleep(0)
    return f"re[{{','.join(m for m in item.message_ids if m)}}|{{os.getpid()}}|{{next(replies)}}]"

def sender(src, via="turn"):
    send = adapter.sender(src, via=via)
    async def asend(text):
        send(text)
    return asend

async def sweep_send(target, text):
    adapter.sweep_send(target, text)

async def lane(at, key, accepted):
    for n in range(MESSAGES):
        if f"k{{key}}m{{n}}" not in accepted:
            await at.handle_message(source(key, n), f"message {{n}} of key {{key}}", agent, sender(source(key)))

async def main():
    at = AsyncTurnlog(t, store_threads=4, threads=KEYS)
    await at.start_gateway("main")
    await at.sweep_deliveries(sweep_send)
    await at.resume_interrupted(agent, sender(None, via="resume"))
    for src in t.pending_inbound():
        await at.run_pending(src, agent, sender(src))
    accepted = {{e.message_id for e in events(t, "InboundAccepted", "InboundRejected")}}
    if os.environ.get("KILL_AFTER_GROUP"):
        kit.line_up_groups(t)
    await asyncio.gather(*(lane(at, key, accepted) for key in range(KEYS)))
    clean = await at.drain("shutdown", 5.0)
    print("clean" if clean else "drain timed out", flush=True)
    os._exit(0)

asyncio.run(main())
"""


def gateway() -> str:
    return GATEWAY.format(keys=KEYS, messages=MESSAGES)


@pytest.mark.parametrize("point", ["in_transaction", "after_commit"])
@pytest.mark.parametrize("k", [1, 4, 12])
def test_a_kill_at_a_group_commit_loses_nothing_accepted(tmp_path, monkeypatch, point, k):
    db = tmp_path / "gateway.db"
    monkeypatch.setenv("KILL_AFTER_GROUP", str(k))
    monkeypatch.setenv("KILL_POINT", point)
    procs.crash(db, gateway())  # raises unless the child died of SIGKILL (its k-th group was reached)
    monkeypatch.delenv("KILL_AFTER_GROUP")
    monkeypatch.delenv("KILL_POINT")
    with Turnlog(str(db)) as t:
        killed_accepted = len(t.pending_inbound())  # read before the restart, for the message below
    assert procs.run(db, gateway()).strip() == "clean"

    report = check(str(db), str(tmp_path / "sent.jsonl"))
    assert report.violations == [], "\n".join(report.violations[:20])
    assert report.stats["accepted"] == KEYS * MESSAGES, report.stats
    assert report.stats["left_queued"] == 0, (killed_accepted, report.stats)
    assert report.stats["unclean_boots"] == 1
    sent = [line for line in (tmp_path / "sent.jsonl").read_text().splitlines() if line]
    assert len(sent) >= KEYS * MESSAGES  # every message answered (a recovered reply may be sent twice)
    assert os.path.exists(db)


@pytest.mark.parametrize("n", [2, 3, 4, 10, 40])
def test_a_kill_at_any_write_of_the_concurrent_run_loses_nothing_accepted(tmp_path, monkeypatch, n):
    """Killed inside its n-th write (an accept that starts its turn in the same transaction, a
    reply with its attempting delivery, a settlement, alone or in a group), then restarted."""
    db = tmp_path / "gateway.db"
    monkeypatch.setenv("KILL_AT_WRITE", str(n))
    procs.crash(db, gateway())
    monkeypatch.delenv("KILL_AT_WRITE")
    assert procs.run(db, gateway()).strip() == "clean"

    report = check(str(db), str(tmp_path / "sent.jsonl"))
    assert report.violations == [], "\n".join(report.violations[:20])
    assert report.stats["accepted"] == KEYS * MESSAGES, report.stats
    assert report.stats["left_queued"] == 0, report.stats
    assert report.stats["unclean_boots"] == 1
