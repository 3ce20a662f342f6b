"""export-hermes read back by real Hermes 0.19.0 (its own SessionDB and SessionStore, in the Python
of a hermes-agent install: TURNLOG_HERMES_PYTHON, which scripts/test sets up and exports):
for every exported session, Hermes' `get_messages_as_conversation` is turnlog's history for the
agent, `search_messages` finds compacted text and not undone text, and `get_or_create_session` on
every exported routing key returns the exported session.

Two homes: the fixture imported and exported as it is, and the fixture plus sessions born in
turnlog, with /undo and in-place compactions made in turnlog (on a native session and on imported
ones, one of them over Hermes' own compaction)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from harness.hermes_home import REPO, fixture_home
from harness.history_edits import edited_in_turnlog

from turnlog import EngineConfig, ManualClock, SequentialIds, Turnlog

HOME = fixture_home()
LID_DIR = str(HOME / "platforms" / "whatsapp" / "session")
PROBE = REPO / "tests" / "harness" / "hermes_probe.py"
# The gateway builds the agent's history from this conversation leaving out these rows
# (gateway/run.py: "Skip metadata entries" and "Skip system messages").
NOT_FOR_THE_AGENT = {"session_meta", "system"}
FIELDS = ("role", "content", "tool_call_id", "tool_name", "tool_calls", "finish_reason")


def hermes_python() -> str:
    python = os.environ.get("TURNLOG_HERMES_PYTHON")
    if not python:
        pytest.fail("TURNLOG_HERMES_PYTHON is not set: run the tests with scripts/test, which installs "
                    "hermes-agent==0.19.0 into .venv-hermes and exports it"
                    + (" (CI=true: this test never skips)" if os.environ.get("CI") == "true" else ""))
    return python


def probe(home: Path, work: Path, request: dict[str, Any]) -> dict[str, Any]:
    """Ask Hermes about a copy of `home` (get_or_create_session writes to it)."""
    copy = work / "hermes-home"
    shutil.rmtree(copy, ignore_errors=True)
    shutil.copytree(home, copy)
    env = {"PATH": os.environ.get("PATH", ""), "HERMES_HOME": str(copy), "HOME": str(work), "TZ": "UTC"}
    done = subprocess.run([hermes_python(), str(PROBE)], input=json.dumps(request), capture_output=True, text=True,
                          env=env, cwd=work, timeout=300)
    assert done.returncode == 0, done.stderr[-4000:]
    return json.loads(done.stdout)


def engine(path: Path) -> Turnlog:
    return Turnlog(str(path), clock=ManualClock("2026-12-01T00:00:00+00:00"), session_ids=SequentialIds(),
                   config=EngineConfig(whatsapp_aliases=LID_DIR))


@pytest.fixture(scope="module", params=["fixture", "edited in turnlog"])
def exported(request, tmp_path_factory):
    hermes_python()  # before the work: without Hermes, fail at once
    base = tmp_path_factory.mktemp("real-hermes")
    with engine(base / "t.db") as t:
        t.import_hermes(HOME)
        words = edited_in_turnlog(t) if request.param != "fixture" else {"compacted": ["短信服务商"],
                                                                         "undone": ["再短一点"]}
        report = t.export_hermes(base / "home")
        assert report.skipped == []
        sessions = [s.session_id for s in t.sessions()]
        histories = {sid: [as_hermes(m) for m in t.turns.agent_history(sid)] for sid in sessions}
        routes = json.loads((base / "home" / "sessions" / "sessions.json").read_text())
        routes.pop("_README")
        answer = probe(base / "home", base, {"conversations": sessions, "routes": sorted(routes),
                                              "searches": words["compacted"] + words["undone"]})
        yield {"histories": histories, "answer": answer, "words": words, "routes": routes, "home": base / "home"}


def as_hermes(m: Any) -> dict[str, Any]:
    """A turnlog message with the fields Hermes' conversation gives, as it names them (what is unset
    it leaves out), and its time to the millisecond."""
    fields = {"role": m.role, "content": m.content, "tool_call_id": m.tool_call_id, "tool_name": m.name,
              "tool_calls": m.tool_calls, "finish_reason": m.finish_reason if m.role == "assistant" else None}
    return {k: v for k, v in fields.items() if v} | {"at": round(m.timestamp.timestamp(), 3)}


def for_the_agent(conversation: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{k: m[k] for k in FIELDS if m.get(k)} | {"content": m["content"], "at": round(m["timestamp"], 3)}
            for m in conversation if m["role"] not in NOT_FOR_THE_AGENT]


def test_every_sessions_conversation_in_hermes_is_the_agents_history_in_turnlog(exported) -> None:
    conversations = exported["answer"]["conversations"]
    assert set(conversations) == set(exported["histories"])
    for session_id, history in exported["histories"].items():
        assert for_the_agent(conversations[session_id]) == [m | {"content": m.get("content", "")} for m in history], \
            session_id


def test_hermes_search_finds_compacted_text_and_not_undone_text(exported) -> None:
    searches = exported["answer"]["searches"]
    for word in exported["words"]["compacted"]:
        assert searches[word], word
    for word in exported["words"]["undone"]:
        assert searches[word] == [], word


def test_every_exported_routing_key_gets_its_session_from_hermes(exported) -> None:
    routes = exported["answer"]["routes"]
    assert set(routes) == set(exported["routes"]) and routes
    for key, entry in exported["routes"].items():
        got = routes[key]
        assert got["session_key"] == key
        if entry.get("suspended"):
            # /stop: Hermes (as turnlog) starts a new session on the next message
            assert got["session_id"] != entry["session_id"], key
        else:
            assert got["session_id"] == entry["session_id"], key
