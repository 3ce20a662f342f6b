"""/branch [name]: the conversation copied into a new session the chat's key switches to, titled
from the name or as the next of its lineage; the old session stays resumable (by title too);
refused while a turn runs."""

from __future__ import annotations

from chat import alice, echo


def talk(t, source, text="hello"):
    return t.handle_message(source, text, echo, lambda text: None)[0].session_id


def current(t, source):
    return t.session(source).session_id


def test_branch_copies_the_conversation_and_switches_the_key(t):
    original = talk(t, alice(), "plan the trip")

    result = t.command(alice(), "/branch")

    branch = result.session_id
    assert result.changed and branch != original and current(t, alice()) == branch
    assert [(m["role"], m["content"]) for m in t.transcript(branch)] == \
        [(m["role"], m["content"]) for m in t.transcript(original)] == [("user", "plan the trip"),
                                                                         ("assistant", "re: plan the trip")]
    row = t.session(branch)
    assert row.title == "branch" and row.parent_session_id == original and row.created_reason == "fork"
    assert t.session(original).end_reason == "session_switch"
    assert result.reply.startswith('Branched into "branch" (1 user message copied).')
    assert f"the original ({original}) stays resumable: /resume {original}" in result.reply


def test_the_branch_goes_on_independently(t):
    original = talk(t, alice(), "one")
    branch = t.command(alice(), "/branch").session_id

    talk(t, alice(), "two")

    assert [m["content"] for m in t.transcript(branch)] == ["one", "re: one", "two", "re: two"]
    assert [m["content"] for m in t.transcript(original)] == ["one", "re: one"]


def test_branch_titles_follow_the_lineage(t):
    talk(t, alice())
    t.command(alice(), "/title plan")

    titles = [t.session(t.command(alice(), "/branch").session_id).title for _ in range(3)]

    assert titles == ["plan #2", "plan #3", "plan #4"]


def test_a_branch_name_is_its_title_or_the_next_free_one(t):
    talk(t, alice())

    named = t.command(alice(), "/branch  side  quest").session_id
    again = t.command(alice(), "/branch side quest").session_id

    assert (t.title(named), t.title(again)) == ("side quest", "side quest #2")


def test_branch_then_resume_the_old_one_by_title(t):
    original = talk(t, alice(), "first idea")
    t.command(alice(), "/title plan")
    branch = t.command(alice(), "/branch").session_id
    talk(t, alice(), "second idea")

    back = t.command(alice(), "/resume plan")
    forward = t.command(alice(), "/resume plan #2")

    assert back.changed and back.session_id == original
    assert back.reply == f'Resumed session {original} ("plan").'
    assert forward.session_id == branch and current(t, alice()) == branch
    t.command(alice(), "/resume plan")
    assert current(t, alice()) == original
    assert talk(t, alice(), "back again") == original


def test_branch_with_nothing_to_copy_says_so(t):
    nothing = t.command(alice(), "/branch")

    assert nothing.reply == "No conversation to branch yet: send a message first."
    assert not nothing.changed and nothing.session_id is None
    assert t.sessions() == []


def test_branch_is_refused_while_a_turn_runs(t):
    answers = []

    def agent(history, item):
        answers.append(t.command(alice(), "/branch"))
        return "done"

    original = t.handle_message(alice(), "long job", agent, lambda text: None)[0].session_id

    [refused] = answers
    assert refused.reply == "A turn is still running: /branch can run once it ends (or after /stop)."
    assert not refused.changed and current(t, alice()) == original and len(t.sessions()) == 1


def test_time_travel_before_a_branch_shows_the_old_key_and_diff_names_the_branch(t):
    original = talk(t, alice())
    key = t.routing_key(alice())
    before = t.maintenance.log_head()
    branch = t.command(alice(), "/branch fork one").session_id
    after = t.maintenance.log_head()

    assert [r["session_id"] for r in t.at(before).routes(key)] == [original]
    assert t.at(before).session(branch) is None
    assert t.at(after).session(branch)["title"] == "fork one"
    changes = t.diff(before, after)
    assert changes["keys"][key] == [{"change": "rebound", "from_session": original, "to_session": branch,
                                     "reason": "fork"}]
    assert changes["sessions"][branch]["session"]["to"]["title"] == "fork one"
    assert changes["sessions"][branch]["messages_added"] == 2


def test_a_branch_whose_numbered_title_would_be_too_long_is_refused(t):
    original = talk(t, alice())
    t.command(alice(), "/title " + "x" * 100)

    result = t.command(alice(), "/branch")

    assert result.reply == "⚠️ Title too long (103 chars, max 100)" and not result.changed
    assert current(t, alice()) == original and len(t.sessions()) == 1
