"""Search ranking: BM25 with the index's term statistics kept between queries.

SQLite's own bm25() over the same full-text index is the oracle: every score the API returns must
equal it while the statistics are fresh, and again after the index has grown past the drift that
makes them stale.
"""

from __future__ import annotations

import random
import sqlite3

import pytest

from turnlog import ManualClock, SequentialIds, SessionSource, Turnlog
from turnlog.projections.search_rank import STATS_DRIFT, varints

WORDS = ["latency", "budget", "deployment", "pipeline", "rollback", "plan", "cache", "invalidation",
         "kubernetes", "invoice", "cluster", "gateway", "cached", "planning", "snake_case"]
FILLER = [f"filler{n}" for n in range(80)]  # so that each word above is in a minority of messages
CHINESE = ["数据库迁移", "服务器配置", "流水线失败", "性能优化", "监控告警"]
QUERIES = ["latency", "budget", '"deployment pipeline"', '"rollback plan"', "plan*", "cache OR invoice",
           "kubernetes cluster", "gateway NOT invoice", "数据库", "服务器配", "性能优化"]


def sentence(rng: random.Random) -> str:
    words = [rng.choice(WORDS if rng.random() < 0.2 else FILLER) for _ in range(rng.randint(3, 30))]
    if rng.random() < 0.3:
        words.insert(rng.randrange(len(words)), rng.choice(CHINESE))
    if rng.random() < 0.2:
        words.insert(rng.randrange(len(words)), rng.choice(["deployment pipeline", "rollback plan"]))
    return " ".join(words) + rng.choice([".", "!", "?", ", ok."])


def write(t: Turnlog, clock: ManualClock, rng: random.Random, sessions: int, per_session: int) -> None:
    for n in range(sessions):
        source = SessionSource(platform="telegram", chat_type="dm", chat_id=str(n), user_id=str(n))
        session_id = t.get_or_create_session(source).session_id
        token = t.turns.acquire_lease(session_id, t.routing_key(source), timeout=1)
        for i in range(per_session):
            clock.advance(1)
            t.turns.append_message(token, "user" if i % 2 == 0 else "assistant", sentence(rng))
        t.turns.release_lease(token)


def oracle(db: str, query: str, positions: list[int]) -> dict[int, float]:
    """SQLite's own bm25 of the hits (by log position: one message a position here), through the
    index the API chose for them."""
    from turnlog.domain.fts_query import plan_query

    plan = plan_query(query)
    index, expr = ("search_fts_trigram", plan.trigram_fts()) if plan.cjk else ("search_fts", plan.fts)
    conn = sqlite3.connect(db)
    try:
        marks = ",".join("?" * len(positions))
        position_of = dict(conn.execute(f"SELECT id, position FROM search_messages WHERE position IN ({marks})",
                                        positions).fetchall())
        return {position_of[rowid]: -score for rowid, score in conn.execute(
            f"SELECT rowid, bm25({index}) FROM {index} WHERE {index} MATCH ? AND rowid IN"
            f" ({','.join('?' * len(position_of))})", (expr, *position_of))}
    finally:
        conn.close()


@pytest.fixture
def corpus(tmp_path):
    clock = ManualClock("2026-03-01T10:00:00+00:00")
    db = str(tmp_path / "rank.db")
    t = Turnlog(db, clock=clock, session_ids=SequentialIds())
    write(t, clock, random.Random(7), sessions=12, per_session=40)
    yield t, db, clock
    t.close()


@pytest.mark.parametrize("query", QUERIES)
def test_scores_equal_sqlite_bm25(corpus, query):
    t, db, _ = corpus
    hits = t.search(query, limit=50)
    assert hits, query
    expected = oracle(db, query, [h.position for h in hits])
    for hit in hits:
        assert hit.score == pytest.approx(expected[hit.position], abs=1e-5), (query, hit)
    scores = [h.score for h in hits]
    assert scores == sorted(scores, reverse=True)


def test_term_statistics_are_refreshed_when_the_index_grows_past_the_drift(corpus):
    t, db, clock = corpus
    before = t.search("latency", limit=5)
    assert before[0].score > 0.1  # a word in a minority of messages: its idf is well above zero
    assert before[0].score == pytest.approx(oracle(db, "latency", [before[0].position])[before[0].position],
                                               abs=1e-5)
    # 10% more messages: N and the count of "latency" change; a stale count gives another idf.
    assert STATS_DRIFT < 0.1
    write(t, clock, random.Random(8), sessions=3, per_session=17)
    after = t.search("latency", limit=5)
    expected = oracle(db, "latency", [h.position for h in after])
    assert [h.score for h in after] == pytest.approx([expected[h.position] for h in after], abs=1e-5)


def test_ranking_prefers_more_occurrences_in_a_shorter_message(tmp_path):
    clock = ManualClock("2026-03-01T10:00:00+00:00")
    with Turnlog(str(tmp_path / "r.db"), clock=clock, session_ids=SequentialIds()) as t:
        source = SessionSource(platform="local", chat_type="dm", chat_id="1", user_id="1")
        session_id = t.get_or_create_session(source).session_id
        token = t.turns.acquire_lease(session_id, t.routing_key(source), timeout=1)
        for text in ["kiwi once in a rather long message about many other things entirely", "kiwi kiwi",
                     "kiwis are not kiwi_fruit", "a kiwi"]:
            clock.advance(1)
            t.turns.append_message(token, "user", text)
        t.turns.release_lease(token)
        hits = t.search("kiwi")
    snippets = [h.snippet for h in hits]
    assert snippets[:2] == [">>>kiwi<<< >>>kiwi<<<", "a >>>kiwi<<<"]
    # "kiwis" is another word; "_" separates words as the index's tokenizer does
    assert "kiwis are not >>>kiwi<<<_fruit" in snippets


def test_varints_read_sqlite_big_endian_encoding():
    assert varints(bytes([0x05])) == [5]
    assert varints(bytes([0x81, 0x00])) == [128]
    assert varints(bytes([0x81, 0x80, 0x00, 0x07])) == [16384, 7]
