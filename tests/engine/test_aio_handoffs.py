"""What a turn through the asyncio API costs in hand-offs between the event loop and the store
threads (AsyncTurnlog.handoffs), and that it is still the sync path's transactions: on an idle key
the accept, the routing and the turn's start commit together, then the reply with its attempting
delivery before the send, then the settlement. A count, so that a regression shows on any machine."""

from __future__ import annotations

import asyncio
import dataclasses

from grouping import Transactions, source
from turnlog.aio import AsyncTurnlog

KEYS = 4
TURNS = 3


def test_a_turn_on_an_idle_key_is_two_store_calls_and_its_send_one_loop_call(make_turnlog):
    t = make_turnlog()
    at = AsyncTurnlog(t)
    sent: list[str] = []

    async def agent(history, item):
        assert [m.content for m in history][-1] == item.text  # the history, read in the start's call
        await asyncio.sleep(0)
        return f"re: {item.text}"

    async def send(text: str) -> None:
        sent.append(text)

    async def main() -> list[list[str]]:
        await at.start_gateway("main")
        before = at.handoffs
        tx = Transactions(t)
        for turn in range(TURNS):
            for key in range(KEYS):  # one at a time: no group commit joins two turns' saves
                message = dataclasses.replace(source(key), message_id=f"k{key}t{turn}")
                outcomes = await at.handle_message(message, f"{key}.{turn}", agent, send)
                assert len(outcomes) == 1
        after = at.handoffs
        assert (after.store_calls - before.store_calls, after.loop_calls - before.loop_calls) == \
            (2 * KEYS * TURNS, KEYS * TURNS)
        return tx.written

    written = asyncio.run(main())
    t.close()
    assert sent == [f"re: {key}.{turn}" for turn in range(TURNS) for key in range(KEYS)]
    assert len(written) == 3 * KEYS * TURNS
    for n in range(0, len(written), 3):
        start, reply, settle = written[n:n + 3]
        # leased, then accepted with its start (one inbox event) and its user message, in one transaction
        assert start.index("LeaseAcquired") < start.index("InboundAccepted") < start.index("MessageAppended"), start
        assert "InboundStarted" not in start, start
        assert reply[-1] == "DeliveryRecorded", reply  # recorded already attempting: durable before the send
        assert settle[0] == "DeliveryDelivered" and "LeaseReleased" in settle, settle
