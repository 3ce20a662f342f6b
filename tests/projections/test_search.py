"""Acceptance: full-text search of transcripts (docs/behaviour.md §10) through the API and the CLI.

One test per query-sanitising rule (every example of docs/behaviour.md §10, plus NEAR, column filters, `^`,
control characters and the 2048-character cap), Chinese / Japanese / Korean queries of 1, 2, 3
and 8 characters, filters, ranking and snippets.
"""

from __future__ import annotations

import sqlite3

import orjson
import pytest
from click.testing import CliRunner

from turnlog import InvalidRequest, ManualClock, SequentialIds, SessionSource, Turnlog
from turnlog.cli import main
from turnlog.domain.fts_query import MAX_QUERY_CHARS, QueryTooLong, plan_query, sanitize_fts5_query
from turnlog.domain.transcript import transcript_id
from turnlog.projections.search import unpack_hex
from turnlog.projections.views import message_row

from chat import ALICE

SLACK = SessionSource(platform="slack", chat_type="channel", chat_id="C1", user_id="U1", scope_id="T1")
DISCORD = SessionSource(platform="discord", chat_type="thread", chat_id="5", thread_id="8", user_id="9",
                        scope_id="G1")

ZH = "我们讨论了大别山项目的进度"
ZH_OTHER = "服务器配置已经完成"
JA = "カタカナとひらがなのテストです"
KO = "데이터베이스마이그레이션 계획을 세웠습니다"

TELEGRAM_MESSAGES = [
    ("user", "please run chat-send now"),
    ("assistant", "release P2.2 is out today"),
    ("user", "TODO fix the flaky test"),
    ("assistant", "foo is a placeholder word"),
    ("user", "the bar is open"),
    ("assistant", "deployment finished without errors"),
    ("user", "plan a or plan b"),
    ("assistant", "snake_case_name is a variable"),
    ("user", "an unbalanced sentence with a quote"),
    ("assistant", "alpha and omega are far apart in this long sentence"),
    ("user", "this content is about kiwi"),
    ("assistant", "start here and go on"),
    ("user", ZH),
    ("assistant", JA),
]
SLACK_MESSAGES = [("user", KO), ("assistant", ZH_OTHER), ("user", "kiwi kiwi kiwi")]


def converse(t: Turnlog, source: SessionSource, messages: list[tuple[str, str]], clock: ManualClock,
             **fields) -> str:
    session_id = t.get_or_create_session(source).session_id
    token = t.turns.acquire_lease(session_id, t.routing_key(source), timeout=1)
    for role, text in messages:
        clock.advance(60)
        t.turns.append_message(token, role, text, **fields)
    t.turns.release_lease(token)
    return session_id


@pytest.fixture
def clock():
    return ManualClock("2026-03-01T10:00:00+00:00")


# Not conftest's `db`: a log already holding the Telegram and Slack conversations searched below.
@pytest.fixture
def db(tmp_path, clock):
    path = str(tmp_path / "turnlog.db")
    with Turnlog(path, clock=clock, session_ids=SequentialIds()) as t:
        converse(t, ALICE, TELEGRAM_MESSAGES, clock)
        converse(t, SLACK, SLACK_MESSAGES, clock)
    return path


@pytest.fixture
def t(make_turnlog):
    return make_turnlog()  # on this module's filled `db`


def texts(hits) -> list[str]:
    return [hit.snippet.replace(">>>", "").replace("<<<", "").strip("…") for hit in hits]


def found(t: Turnlog, query: str, **filters) -> set[str]:
    """The full contents of the messages a search finds (by session and seq from the transcripts)."""
    out = set()
    for hit in t.search(query, limit=100, **filters):
        transcript = t.transcript(hit.session_id)
        out.add(next(m["content"] for m in transcript if m["seq"] == hit.seq))
    return out


# -- sanitising: every example of docs/behaviour.md §10 ----------------------------------------------------

SPEC_EXAMPLES = [
    ("chat-send", '"chat-send"', {"please run chat-send now"}),
    ("P2.2", '"P2.2"', {"release P2.2 is out today"}),
    ("TODO: fix", "TODO  fix", {"TODO fix the flaky test"}),
    ("foo AND", "foo", {"foo is a placeholder word"}),
    ("OR bar", "bar", {"the bar is open"}),
    ("***deploy*", "deploy*", {"deployment finished without errors"}),
    ("(a+b)", "a b", {"plan a or plan b"}),
    ("snake_case_name", '"snake_case_name"', {"snake_case_name is a variable"}),
    ('unbalanced "quote', "unbalanced  quote", {"an unbalanced sentence with a quote"}),
]


@pytest.mark.parametrize("query, expected, _", SPEC_EXAMPLES, ids=[q for q, _, _ in SPEC_EXAMPLES])
def test_spec_example_sanitises_exactly(query, expected, _):
    assert sanitize_fts5_query(query) == expected


@pytest.mark.parametrize("query, _, contents", SPEC_EXAMPLES, ids=[q for q, _, _ in SPEC_EXAMPLES])
def test_spec_example_query_finds_its_message(t, query, _, contents):
    assert found(t, query) == contents


def test_balanced_quoted_phrase_is_kept_and_matches_adjacent_words_only(t):
    assert sanitize_fts5_query('"plan b" now') == '"plan b" now'
    assert found(t, '"plan b"') == {"plan a or plan b"}
    assert found(t, '"plan a b"') == set()


def test_near_group_becomes_its_terms(t):
    assert sanitize_fts5_query("NEAR(alpha omega, 2)") == "alpha omega"
    assert sanitize_fts5_query('NEAR("plan b" alpha)') == '"plan b" alpha'
    assert found(t, "NEAR(alpha omega, 2)") == {"alpha and omega are far apart in this long sentence"}


def test_column_filter_is_not_a_column_filter(t):
    assert sanitize_fts5_query("content:kiwi") == "content kiwi"
    assert sanitize_fts5_query("nosuchcolumn:kiwi") == "nosuchcolumn kiwi"
    assert found(t, "content:kiwi") == {"this content is about kiwi"}
    assert found(t, "{text}: kiwi") == set()  # "text" is a word here, and no message has it


def test_caret_initial_token_marker_is_dropped(t):
    assert sanitize_fts5_query("^start") == "start"
    assert found(t, "^start here") == {"start here and go on"}


def test_control_characters_become_spaces(t):
    assert sanitize_fts5_query("kiwi\x00\x07\x1b[0m") == 'kiwi   "[0m"'
    assert found(t, "kiwi\x00\r\n\t") == {"this content is about kiwi", "kiwi kiwi kiwi"}


def test_operators_between_terms_are_kept_and_runs_collapse(t):
    assert sanitize_fts5_query("kiwi OR bar") == "kiwi OR bar"
    assert sanitize_fts5_query("kiwi AND OR NOT bar") == "kiwi AND   bar"
    assert sanitize_fts5_query("NOT kiwi") == "kiwi"
    assert found(t, "kiwi OR bar") == {"this content is about kiwi", "kiwi kiwi kiwi", "the bar is open"}
    assert found(t, "kiwi NOT content") == {"kiwi kiwi kiwi"}
    assert found(t, "AND OR NOT") == set()


def test_punctuation_that_fts5_rejects_is_quoted_or_dropped(t):
    assert sanitize_fts5_query("what's up? , - !") == '"what\'s" "up?"'
    for query in ("what's up?", "a,b", "x = y", "#tag @user", "50%", "~/.bashrc", "foo-", "- bar", '"""', "*"):
        t.search(query)  # never an FTS5 syntax error


def test_query_of_2048_characters_is_accepted_and_one_more_is_refused(t):
    assert len(sanitize_fts5_query("kiwi " * (MAX_QUERY_CHARS // 5))) > 0
    t.search(("kiwi " * 410)[:MAX_QUERY_CHARS])
    with pytest.raises(QueryTooLong):
        plan_query("k" * (MAX_QUERY_CHARS + 1))
    with pytest.raises(InvalidRequest, match="2049 characters; the limit is 2048"):
        t.search("k" * (MAX_QUERY_CHARS + 1))


def test_cli_refuses_an_over_long_query_with_one_line_and_exit_2(db):
    result = CliRunner().invoke(main, ["--db", db, "search", "k" * 3000])
    assert result.exit_code == 2
    assert "the search query has 3000 characters; the limit is 2048" in result.output
    assert "Traceback" not in result.output


# -- Chinese, Japanese and Korean ------------------------------------------------------------

CJK_CASES = [
    ("zh", "山", {ZH}), ("zh", "大别", {ZH}), ("zh", "大别山", {ZH}), ("zh", "大别山项目的进度", {ZH}),
    ("zh", "配置", {ZH_OTHER}), ("zh", "已经完成", {ZH_OTHER}),
    ("ja", "ナ", {JA}), ("ja", "カタ", {JA}), ("ja", "ひらが", {JA}), ("ja", "カタカナとひらが", {JA}),
    ("ko", "계", {KO}), ("ko", "계획", {KO}), ("ko", "데이터", {KO}), ("ko", "데이터베이스마이그", {KO}),
]


@pytest.mark.parametrize("lang, query, contents", CJK_CASES, ids=[f"{c[0]}-{len(c[1])}-{c[1]}" for c in CJK_CASES])
def test_cjk_query_finds_the_right_messages(t, lang, query, contents):
    assert found(t, query) == contents


def test_cjk_query_of_three_or_more_characters_uses_the_trigram_index(t):
    assert {h.match for h in t.search("大别山")} == {"substring"}
    assert all(h.score is not None for h in t.search("大别山"))  # ranked: the trigram index
    assert all(h.score is None for h in t.search("大别"))  # the LIKE fallback, newest first


def test_cjk_substring_not_present_finds_nothing(t):
    assert found(t, "大山") == set()
    assert found(t, "北京大学") == set()


def test_cjk_terms_combine_like_words(t):
    assert found(t, "大别 OR 配置") == {ZH, ZH_OTHER}
    assert found(t, "大别 配置") == set()  # both must occur
    assert found(t, "服务器 NOT 大别山") == {ZH_OTHER}
    assert found(t, "大别山？") == {ZH}  # punctuation at the end of a term is not searched for


def test_cjk_snippet_marks_the_match(t):
    assert [h.snippet for h in t.search("大别")] == ["我们讨论了>>>大别<<<山项目的进度"]
    assert ">>>大别山<<<" in t.search("大别山")[0].snippet


# -- filters, ranking, snippets ---------------------------------------------------------------


def test_word_search_is_ranked_by_bm25_with_a_highlighted_snippet(t):
    hits = t.search("kiwi")
    assert texts(hits) == ["kiwi kiwi kiwi", "this content is about kiwi"]
    assert hits[0].snippet == ">>>kiwi<<< >>>kiwi<<< >>>kiwi<<<"
    assert hits[0].score > hits[1].score
    assert hits[0].match == "words"


def test_each_hit_names_its_session_key_platform_role_and_time(t):
    hit = t.search("kiwi", role="user", platform="slack")[0]
    assert hit.session_key == t.routing_key(SLACK)
    assert hit.platform == "slack"
    assert hit.role == "user"
    assert hit.seq == 3
    assert hit.at == "2026-03-01T10:17:00.000000+00:00"


def test_filters_by_session_key_platform_and_role(t):
    alice = t.get_or_create_session(ALICE, touch_activity=False).session_id
    assert found(t, "kiwi", session=alice) == {"this content is about kiwi"}
    assert found(t, "kiwi", key=t.routing_key(SLACK)) == {"kiwi kiwi kiwi"}
    assert found(t, "kiwi", platform="telegram") == {"this content is about kiwi"}
    assert found(t, "kiwi", platform="discord") == set()
    assert found(t, "kiwi", role="assistant") == set()
    assert found(t, "大别", key=t.routing_key(SLACK)) == set()
    assert found(t, "服务器", platform="slack") == {ZH_OTHER}


def test_filters_by_time_range(t):
    # Messages are one minute apart from 10:01; the slack ones are at 10:15, 10:16, 10:17.
    assert found(t, "kiwi", since="2026-03-01T10:17:00+00:00") == {"kiwi kiwi kiwi"}
    assert found(t, "kiwi", until="2026-03-01T10:17:00Z") == {"this content is about kiwi"}
    assert found(t, "kiwi", since="2026-03-01T11:17:00+01:00", until="2026-03-01T10:18:00+00:00") == \
        {"kiwi kiwi kiwi"}
    assert found(t, "kiwi", since="2026-03-02") == set()
    with pytest.raises(InvalidRequest, match="no time zone"):
        t.search("kiwi", since="2026-03-01T10:00:00")
    with pytest.raises(InvalidRequest, match="not an ISO date"):
        t.search("kiwi", until="yesterday")


def test_limit(t):
    assert len(t.search("a", limit=1)) == 1
    with pytest.raises(InvalidRequest):
        t.search("kiwi", limit=0)


def test_tool_name_and_tool_calls_are_searchable(t, clock):
    calls = [{"id": "c1", "type": "function", "function": {"name": "web_search", "arguments": "weather in paris"}}]
    converse(t, DISCORD, [("assistant", "let me look that up")], clock, tool_calls=calls)
    converse(t, DISCORD, [("tool", "sunny, 21 degrees")], clock, name="web_search", tool_call_id="c1")
    assert found(t, "paris") == {"let me look that up"}
    assert found(t, "web_search") == {"let me look that up", "sunny, 21 degrees"}


def test_search_sees_messages_appended_by_another_instance(db, clock, t):
    with Turnlog(db, clock=clock, session_ids=SequentialIds()) as other:
        converse(other, DISCORD, [("user", "a brand new papaya")], clock)
    assert found(t, "papaya") == {"a brand new papaya"}


def test_search_rebuilds_from_its_own_events_without_other_read_models(db, clock):
    conn = sqlite3.connect(db)
    conn.execute("DROP TABLE sessions")
    conn.execute("DROP TABLE routes")
    conn.commit()
    conn.close()
    with Turnlog(db, clock=clock) as t:
        t.maintenance.rebuild(["search"])
        assert found(t, "kiwi", key=t.routing_key(SLACK), platform="slack") == {"kiwi kiwi kiwi"}


def test_a_session_reopened_under_another_key_files_later_messages_under_it(t, clock):
    first = converse(t, DISCORD, [("user", "mango before the switch")], clock)
    t.switch_session(ALICE, first, force=True)  # a session of another key
    token = t.turns.acquire_lease(first, t.routing_key(ALICE), timeout=1)
    t.turns.append_message(token, "user", "mango after the switch")
    t.turns.release_lease(token)
    assert found(t, "mango", key=t.routing_key(DISCORD)) == {"mango before the switch"}
    assert found(t, "mango", key=t.routing_key(ALICE)) == {"mango after the switch"}


# -- CLI ----------------------------------------------------------------------------------------


def test_cli_search_table_and_json(db):
    runner = CliRunner()
    table = runner.invoke(main, ["--db", db, "search", "大别山"])
    assert table.exit_code == 0, table.output
    assert table.output.splitlines()[0].split() == ["session_id", "seq", "role", "at", "session_key", "snippet"]
    assert ">>>大别山<<<" in table.output
    as_json = runner.invoke(main, ["--db", db, "search", "kiwi", "--platform", "slack", "--role", "user",
                                   "--since", "2026-03-01", "--limit", "5", "--json"])
    assert as_json.exit_code == 0, as_json.output
    hits = orjson.loads(as_json.output)
    assert [(h["platform"], h["role"], h["snippet"]) for h in hits] == [
        ("slack", "user", ">>>kiwi<<< >>>kiwi<<< >>>kiwi<<<")]


def test_cli_search_usage_errors_exit_2(db):
    runner = CliRunner()
    for args in (["search"], ["search", "kiwi", "--limit", "0"], ["search", "kiwi", "--since", "soon"]):
        result = runner.invoke(main, ["--db", db, *args])
        assert result.exit_code == 2, (args, result.output)
        assert "Traceback" not in result.output


def test_cli_search_with_no_hits_says_so(db):
    result = CliRunner().invoke(main, ["--db", db, "search", "nothing-like-this"])
    assert result.exit_code == 0
    assert result.output.strip() == "(none)"


def test_the_search_table_holds_every_field_of_each_transcript_message(tmp_path, clock):
    db = str(tmp_path / "fields.db")
    with Turnlog(db, clock=clock, session_ids=SequentialIds()) as t:
        session_id = t.get_or_create_session(ALICE).session_id
        token = t.turns.acquire_lease(session_id, t.routing_key(ALICE), timeout=1)
        t.turns.append_message(token, "user", "what is the weather", platform_message_id="m7")
        t.turns.append_message(token, "assistant", "checking", tool_calls=[{"id": "c1", "name": "weather"}],
                         token_count=12, finish_reason="tool_calls")
        t.turns.append_message(token, "tool", "sunny", tool_call_id="c1", name="weather")
        t.turns.release_lease(token)
        # The messages as their events in the log hold them.
        logged = [message_row(e) for e in t._app.events.get(transcript_id(session_id))]
        t.maintenance.catch_up()
    conn = sqlite3.connect(db)
    conn.row_factory = sqlite3.Row
    rows = [dict(r) for r in conn.execute(
        "SELECT seq, role, coalesce(content, text) AS content, tool_calls, tool_call_id, name, token_count,"
        " finish_reason, platform_message_id, coalesce(stamp, at) AS timestamp, epoch, turn_id, actor, cause"
        " FROM search_messages m JOIN search_filings f ON f.id = m.filing WHERE f.session_id=? ORDER BY seq",
        (session_id,))]
    conn.close()
    assert [r["content"] for r in rows] == ["what is the weather", "checking", "sunny"]
    assert len(rows) == len(logged)
    for row, message in zip(rows, logged):
        row["tool_calls"] = orjson.loads(row["tool_calls"]) if row["tool_calls"] else None
        row["turn_id"] = unpack_hex(row["turn_id"])  # stored as its 16 bytes
        assert row == {k: message[k] for k in row}, (row, message)