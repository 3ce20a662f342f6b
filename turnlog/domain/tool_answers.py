"""Tool calls a model API expects answered: the shape of the history handed to an agent.

OpenAI-compatible and Anthropic APIs refuse a history in which a tool call of an assistant
message is not answered by a tool message (its `tool_call_id`) before the next message that is
not a tool result. A turn cut off between a call and its result (a crash, a Hermes session
imported as it was interrupted mid tool-call) leaves exactly that shape behind. These rules say
which calls are unanswered and what their answer says; commands record the answers as tool
messages of the transcript, so the log holds what the agent is shown.

`session_meta` rows never reach a model (Hermes skips them before the call), so they are
transparent here: a call followed by one is still the tail of the transcript.

Messages are anything with `role`, `tool_calls`, `tool_call_id` (MessageAppended events) or
mappings with those keys (the public API's transcript rows): the rules read both.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Sequence

# What a cut-off call's answer says: the call may have had effects, but it has no result.
INTERRUPTED_RESULT = "interrupted by a gateway restart; not run to completion"
# By how the cut-off turn ended (a lease's release outcome or revocation reason); a Hermes session
# imported mid tool-call (no turn of this log) was cut off by a restart of Hermes.
_CUT_OFF_BY = {
    None: INTERRUPTED_RESULT,
    "restart_recovery": INTERRUPTED_RESULT,
    "failed": "interrupted: the turn failed before the tool's result was recorded; not run to completion",
    "taken_over": "interrupted: the turn stalled and lost its lease before the tool's result; not run to completion",
    "stop": "interrupted by /stop; not run to completion",
}
# The finish_reason of such an answer: what tells it from a result the tool itself gave.
INTERRUPTED = "interrupted"
TRANSPARENT_ROLES = frozenset({"session_meta"})


@dataclass(frozen=True)
class UnansweredCall:
    index: int  # position, in the messages read, of the assistant message that made the call
    call_id: str
    name: str | None

    def answer(self, cut_off_by: str | None = None) -> dict[str, Any]:
        """The fields of the tool message that answers it (MessageAppended's names)."""
        return {"role": "tool", "content": interrupted_result(cut_off_by), "tool_call_id": self.call_id,
                "name": self.name, "finish_reason": INTERRUPTED}


def interrupted_result(cut_off_by: str | None) -> str:
    """The answer's text, by what ended the turn the call was made in."""
    return _CUT_OFF_BY.get(cut_off_by) or f"interrupted ({cut_off_by}); not run to completion"


def _field(message: Any, name: str) -> Any:
    return message.get(name) if isinstance(message, Mapping) else getattr(message, name, None)


def call_name(call: Mapping[str, Any]) -> str | None:
    """The function name of an OpenAI-style call ({"function": {"name": ...}}), or a flat "name"."""
    function = call.get("function")
    name = function.get("name") if isinstance(function, Mapping) else None
    return name if isinstance(name, str) else call.get("name") if isinstance(call.get("name"), str) else None


def _calls_of(index: int, message: Any) -> list[UnansweredCall]:
    return [UnansweredCall(index, str(call.get("id")), call_name(call))
            for call in _field(message, "tool_calls") or () if isinstance(call, Mapping) and call.get("id")]


def unanswered_calls(messages: Sequence[Any]) -> list[UnansweredCall]:
    """Every tool call not answered before the next message that is not a tool result, in order."""
    unanswered: list[UnansweredCall] = []
    waiting: list[UnansweredCall] = []
    for index, message in enumerate(messages):
        role = _field(message, "role")
        if role in TRANSPARENT_ROLES:
            continue
        if role == "tool":
            answered = _field(message, "tool_call_id")
            waiting = [c for c in waiting if c.call_id != answered]
            continue
        unanswered += waiting
        waiting = _calls_of(index, message) if role == "assistant" else []
    return unanswered + waiting


def unanswered_at_end(messages: Sequence[Any]) -> list[UnansweredCall]:
    """The unanswered calls nothing but tool results (or transparent rows) follow: the ones an
    answer appended now still answers in place."""
    last = max((i for i, m in enumerate(messages)
                if _field(m, "role") not in TRANSPARENT_ROLES and _field(m, "role") != "tool"), default=-1)
    return [c for c in unanswered_calls(messages) if c.index == last]


def is_interrupted_answer(message: Any) -> bool:
    """An answer recorded for a cut-off call (not a result the tool gave)."""
    return bool(_field(message, "role") == "tool" and _field(message, "finish_reason") == INTERRUPTED)


def shape_problems(messages: Sequence[Any]) -> list[str]:
    """What a model API would refuse in this history (empty: it has the accepted shape): a tool
    call not answered before the next non-tool message, a call without an id, a tool result that
    answers no call waiting for one."""
    problems: list[str] = []
    waiting: dict[str, int] = {}
    for index, message in enumerate(messages):
        role = _field(message, "role")
        if role in TRANSPARENT_ROLES:
            continue
        if role == "tool":
            answered = _field(message, "tool_call_id")
            if waiting.pop(answered, None) is None:
                problems.append(f"message {index}: tool result {answered!r} answers no tool call waiting for one")
            continue
        problems += [f"message {at}: tool call {call_id!r} is not answered before message {index} ({role})"
                     for call_id, at in waiting.items()]
        waiting = {}
        if role == "assistant":
            for call in _field(message, "tool_calls") or ():
                if not isinstance(call, Mapping) or not call.get("id"):
                    problems.append(f"message {index}: a tool call without an id")
                else:
                    waiting[str(call["id"])] = index
    problems += [f"message {at}: tool call {call_id!r} is not answered (end of history)"
                 for call_id, at in waiting.items()]
    return problems
