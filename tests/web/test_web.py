"""The web viewer through the ASGI test client: every page and its ?format=json twin, hostile
text, 404 and 400, the access token, and that a full crawl leaves the database untouched."""

from __future__ import annotations

import os
import re
import time
import xml.etree.ElementTree as ET
from urllib.parse import quote

import pytest
from starlette.testclient import TestClient

import web_db
from turnlog.web.app import LOOPBACK_HOSTS, create_app

BASE = "http://127.0.0.1"


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("web") / "log.db")
    ids = web_db.build(path)
    return path, ids


@pytest.fixture(scope="module")
def client(built):
    with TestClient(create_app(built[0]), base_url=BASE) as c:
        yield c


def pages(ids: dict[str, str]) -> list[str]:
    first = ids["first"]
    return ["/", "/sessions", "/sessions?platform=telegram&state=active", f"/sessions?q={quote('東京')}",
            f"/sessions/{first}", f"/sessions/{first}/at/5", "/travel", "/travel?at=%2310",
            f"/travel?at={quote('2026-03-01T10:01:00+00:00')}", "/travel/diff?a=%231&b=%2357", "/integrity",
            "/plot"]


def json_of(client: TestClient, path: str) -> dict:
    r = client.get(path + ("&" if "?" in path else "?") + "format=json")
    assert r.status_code == 200, (path, r.text)
    assert r.headers["content-type"].startswith("application/json")
    return r.json()


def test_every_page_renders_and_has_a_json_twin(client, built):
    for path in pages(built[1]):
        r = client.get(path)
        assert r.status_code == 200, (path, r.text)
        assert r.headers["content-type"].startswith("text/html")
        assert "format=json" in r.text  # the twin is linked from the page
        assert isinstance(json_of(client, path), dict)
    for asset in ("/static/app.js", "/static/style.css", "/static/favicon.svg"):
        assert client.get(asset).status_code == 200
    assert "http" not in re.sub(r'https?://(127\.0\.0\.1|www\.w3\.org)[^"]*', "",
                                client.get("/sessions").text.split("<main>")[0])  # no CDN in the head


def test_hostile_text_is_escaped_and_shown(client, built):
    first = built[1]["first"]
    html = client.get(f"/sessions/{first}").text
    assert "<script>alert" not in html and "</details><script>" not in html
    assert "&lt;script&gt;alert(&#x27;x&#x27;)&lt;/script&gt;" in html
    assert "\x07" not in html and "\x1b" not in html
    assert '<span class="ctl" title="control character">\\x07</span>' in html
    assert '\\x1b</span>[31m' in html
    assert web_db.CJK in html and "tool said 你好" in html
    data = json_of(client, f"/sessions/{first}")
    assert data["messages"][0]["content"] == web_db.HOSTILE  # the JSON keeps the exact text
    listing = client.get("/sessions").text
    assert "<b>alice</b>" not in listing


def test_search_finds_cjk_and_filters(client, built):
    ids = built[1]
    found = json_of(client, f"/sessions?q={quote('東京')}")
    assert [s["session_id"] for s in found["sessions"]] == [ids["first"]]
    assert "<mark>" in client.get(f"/sessions?q={quote('東京')}").text
    assert json_of(client, f"/sessions?q={quote('さようなら')}")["sessions"][0]["session_id"] == ids["second"]
    discord = json_of(client, "/sessions?platform=discord")["sessions"]
    assert [s["session_id"] for s in discord] == [ids["bob"]]
    ended = json_of(client, "/sessions?state=ended")["sessions"]
    assert [s["session_id"] for s in ended] == [ids["second"]]
    assert json_of(client, "/sessions?state=suspended")["sessions"] == []
    keyed = json_of(client, "/sessions?key=discord")["sessions"]
    assert keyed and all(any("discord" in k for k in s["routing_keys"]) for s in keyed)


def test_session_page_transcript_usage_lineage_timeline(client, built):
    ids = built[1]
    first, second = ids["first"], ids["second"]
    data = json_of(client, f"/sessions/{first}")
    assert [m["role"] for m in data["messages"]][:4] == ["user", "assistant", "assistant", "tool"]
    assert data["token_usage"]["tool_calls"] == 1 and data["token_usage"]["by_role"]["tool"] == 5
    assert data["token_usage"]["total"] >= 17
    causes = {e["cause"] for e in data["lineage"]["route_changes"]}
    assert "command:/resume" in causes
    assert [d["session_id"] for d in data["lineage"]["descendants"]] == [second]
    assert all(e["actor"] and e["cause"] for e in data["timeline"])
    html = client.get(f"/sessions/{first}").text
    assert '<details class="tool-calls"><summary>1 tool call(s)</summary>' in html
    assert '<details class="tool-result">' in html
    assert f'href="/sessions/{first}/at/{data["timeline"][0]["position"]}"' in html
    assert json_of(client, f"/sessions/{second}")["lineage"]["ancestors"][0]["session_id"] == first


def test_event_shows_session_lease_and_ledger_as_of_its_position(client, built):
    first = built[1]["first"]
    timeline = json_of(client, f"/sessions/{first}")["timeline"]
    acquired = [e for e in timeline if e["event"] == "LeaseAcquired"]
    released = [e for e in timeline if e["event"] == "LeaseReleased"]
    during = json_of(client, f"/sessions/{first}/at/{acquired[0]['position']}")
    assert during["lease"]["owner"] == "gw-1" and during["lease"]["epoch"] == 1
    after = json_of(client, f"/sessions/{first}/at/{released[0]['position']}")
    assert after["lease"]["owner"] is None
    suspended = next(e for e in timeline if e["event"] == "SessionSuspended")
    assert json_of(client, f"/sessions/{first}/at/{suspended['position']}")["session"]["suspended"] is True
    assert json_of(client, f"/sessions/{first}/at/{suspended['position'] - 1}")["session"]["suspended"] is False
    last = json_of(client, f"/sessions/{first}/at/{built[1]['head']}")
    assert last["ledger"] and all(d["state"] == "delivered" for d in last["ledger"])
    html = client.get(f"/sessions/{first}/at/{suspended['position']}").text
    assert f'href="/travel?at=%23{suspended["position"]}"' in html


def test_time_travel_and_diff(client, built):
    ids = built[1]
    head = int(ids["head"])
    early = json_of(client, "/travel?at=%232")
    assert early["position"] == 2 and len(early["routes"]) <= 1
    now = json_of(client, "/travel")
    assert now["position"] == head
    keys = {r["session_key"]: r["session_id"] for r in now["routes"]}
    assert ids["first"] in keys.values() and ids["bob"] in keys.values()
    assert ids["bob"] in {s["session_id"] for s in now["sessions"]}  # the last events are bob's turn
    alice_key = next(k for k, sid in keys.items() if sid == ids["first"])
    alice = json_of(client, f"/travel?key={quote(alice_key)}")
    assert [s["session_id"] for s in alice["sessions"]] == [ids["first"]]
    assert alice["leases"][0]["owner"] is None and alice["ledger"]
    resume = next(e for e in json_of(client, f"/sessions/{ids['first']}")["lineage"]["route_changes"]
                  if e["cause"] == "command:/resume" and e["event"] == "RouteBound")["position"]
    before_resume = json_of(client, f"/travel?key={quote(alice_key)}&at=%23{resume - 1}")
    assert before_resume["routes"][0]["session_id"] == ids["second"]
    assert json_of(client, f"/travel?key={quote(alice_key)}&at=%23{resume}")["routes"][0]["session_id"] == ids["first"]
    assert json_of(client, "/travel?at=10")["position"] == 10
    by_time = json_of(client, f"/travel?at={quote('2026-03-01T10:00:00+00:00')}")
    assert 1 <= by_time["position"] < head
    d = json_of(client, f"/travel/diff?a=%231&b=%23{head}")
    changes = [c for cs in d["keys"].values() for c in cs]
    assert {c["change"] for c in changes} >= {"registered"}
    assert ids["second"] in d["sessions"]
    html = client.get("/travel?at=%2310").text
    assert 'id="slider"' in html and 'value="10"' in html and f'max="{head}"' in html


@pytest.mark.parametrize("path", ["/travel?at=abc", "/travel?at=%23999999", "/travel?at=%23-3", "/travel?at=%231.5",
                                  "/travel?at=2026-03-01T10:00:00", "/travel/diff?a=zz&b=%231",
                                  "/sessions?state=sleeping", "/sessions?page=0", "/travel?page=x"])
def test_bad_position_or_filter_is_400(client, path):
    r = client.get(path)
    assert r.status_code == 400 and 'class="error"' in r.text
    j = client.get(path + "&format=json")
    assert j.status_code == 400 and j.json()["error"]


def test_bad_position_on_an_event_is_400(client, built):
    first = built[1]["first"]
    for bad in ("0", "x1", "99999"):
        r = client.get(f"/sessions/{first}/at/{bad}?format=json")
        assert r.status_code == 400, bad
        assert "position" in r.json()["error"]


def test_unknown_session_is_404(client):
    for path in ("/sessions/20990101_000000_nope", "/sessions/nope/at/3", "/integrity/checks/nope"):
        assert client.get(path).status_code == 404
        r = client.get(path + "?format=json")
        assert r.status_code == 404 and "nope" in r.json()["error"]
    assert "&lt;x&gt;" in client.get("/sessions/%3Cx%3E").text


def run_check(client: TestClient, check: str) -> dict:
    started = client.post(f"/integrity/run?check={check}")
    assert started.status_code == 202
    job_id = started.json()["id"]
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        job = client.get(f"/integrity/checks/{job_id}").json()
        if job["state"] != "running":
            return job
        time.sleep(0.1)
    raise AssertionError(f"{check} did not finish")


def test_integrity_checks_run_on_demand_with_progress(client, built):
    verify = run_check(client, "verify")
    assert verify["state"] == "done" and verify["done"] == verify["total"] > 1
    assert all(step["ok"] for step in verify["result"].values())
    chain = run_check(client, "chain")
    assert chain["state"] == "done" and chain["result"]["chain"]["breaks"] == []
    page = json_of(client, "/integrity")
    assert page["head"] == int(built[1]["head"])
    assert {p["name"] for p in page["projections_in_file"]} >= {"routes", "sessions", "timeline"}
    assert {c["id"] for c in page["checks"]} >= {verify["id"], chain["id"]}
    assert client.post("/integrity/run?check=nonsense").status_code == 400


def test_plot_counts_turns_and_renders_svg(client):
    data = json_of(client, "/plot")
    assert data["turns"] == 4  # three handled messages and one manual lease
    assert all(p["p99_ms"] >= p["p50_ms"] >= 0 for p in data["minutes"])
    svg = client.get("/plot.svg")
    assert svg.headers["content-type"].startswith("image/svg+xml")
    root = ET.fromstring(svg.text)
    assert root.tag.endswith("svg") and root.findall(".//{http://www.w3.org/2000/svg}polyline")


def test_token_required_when_set(built):
    app = create_app(built[0], token="s3cret")
    with TestClient(app, base_url=BASE) as c:
        for path in ("/", "/sessions?format=json", "/static/app.js"):
            assert c.get(path).status_code == 401
        assert c.get("/", params={"token": "wrong"}).status_code == 401
        assert c.get("/", headers={"Authorization": "Bearer wrong"}).status_code == 401
        assert c.get("/sessions", headers={"Authorization": "Bearer s3cret"}).status_code == 200
        r = c.get("/", params={"token": "s3cret"})
        assert r.status_code == 200 and "turnlog_token" in r.headers["set-cookie"]
        assert c.get("/sessions").status_code == 200  # the cookie carries it on


def test_loopback_viewer_refuses_foreign_host_headers(built):
    with TestClient(create_app(built[0], allowed_hosts=LOOPBACK_HOSTS), base_url=BASE) as c:
        assert c.get("/").status_code == 200
        assert c.get("/", headers={"host": "evil.example"}).status_code == 400


def snapshot_dir(folder: str) -> dict[str, bytes]:
    out = {}
    for name in sorted(os.listdir(folder)):
        with open(os.path.join(folder, name), "rb") as f:
            out[name] = f.read()
    return out


def test_a_full_crawl_never_writes_the_database(tmp_path):
    path = str(tmp_path / "crawl.db")
    ids = web_db.build(path)
    before = snapshot_dir(str(tmp_path))
    assert list(before) == ["crawl.db", "crawl.db.key"]  # the database and its master key file
    mtime = os.stat(path).st_mtime_ns
    with TestClient(create_app(path), base_url=BASE) as c:
        seen: set[str] = set()
        todo = ["/"] + pages(ids)
        while todo and len(seen) < 300:
            url = todo.pop()
            if url in seen:
                continue
            seen.add(url)
            r = c.get(url)
            assert r.status_code == 200, (url, r.text[:300])
            json_of(c, url)
            todo += [u.replace("&amp;", "&") for u in re.findall(r'href="(/[^"]*)"', r.text)
                     if not u.startswith("/static") and "format=json" not in u]
        assert len(seen) > 30
        run_check(c, "verify")
        run_check(c, "chain")
        assert c.post("/reload", follow_redirects=False).status_code == 303
        assert c.get("/sessions").status_code == 200
    assert snapshot_dir(str(tmp_path)) == before  # same bytes, and no -wal, -shm or other file
    assert os.stat(path).st_mtime_ns == mtime


def test_gateway_now_shows_boots_running_turns_and_owed_replies(tmp_path):
    path = str(tmp_path / "live.db")
    web_db.build(path)
    with TestClient(create_app(path), base_url=BASE) as c:
        calm = json_of(c, "/")
    assert [b["ended"] for b in calm["gateways"][0]["boots"]] == ["clean stop"]
    assert calm["active_turns"] == [] and calm["owed_replies"] == []
    from turnlog import ManualClock, Turnlog
    with Turnlog(path, clock=ManualClock("2026-03-01T11:00:00+00:00"), owner="gw-2") as t:
        t.start_gateway("main")
        src = web_db.alice()
        session_id = t.get_or_create_session(src).session_id
        token = t.turns.acquire_lease(session_id, t.routing_key(src))
        t.turns.record_reply(token, "owed <i>reply</i>", reply_to=src)
        t.accept(src, "waiting in line")
    with TestClient(create_app(path), base_url=BASE) as c:
        busy = json_of(c, "/")
        html = c.get("/").text
    boots = busy["gateways"][0]["boots"]
    assert [b["alive"] for b in boots] == [False, True] and boots[1]["boot_id"] == "gw-2"
    # gw-2 took its lease on its own (manual) clock, long expired by the viewer's: none is running.
    assert busy["active_turns"] == []
    assert [(a["session_id"], a["owner"], a["epoch"]) for a in busy["expired_leases"]] == [(session_id, "gw-2", 3)]
    assert [(d["session_id"], d["state"]) for d in busy["owed_replies"]] == [(session_id, "pending")]
    assert busy["queue_depths"][0]["pending"] == 1
    assert "gw-2" in html and "not ended (or died unrecovered)" in html
