"""`turnlog ingest` on generated JSONL (issue 19, acceptance): good records mixed with random bytes,
wrong types, missing fields, huge values and odd ids. Whatever the mix: no traceback, every good
record imported, every bad one named by its line with a reason of its own (not a leaked exception)."""

import json
import re
import tempfile
from pathlib import Path

from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings, strategies as st

from turnlog import Turnlog
from turnlog.cli import main

# Platforms without text dedup (weixin judges repeated text), so every good message is its own.
PLATFORMS = ("telegram", "discord", "whatsapp")
TEXT = st.text(st.characters(blacklist_categories=("Cs",)), max_size=40)  # orjson refuses lone surrogates
ODD_ID = st.sampled_from(["x", "ü:1", "a:b:c", "../../etc/passwd", "<script>", "  padded  ", "#1", "%41", "7" * 1024])


@st.composite
def sources(draw):
    return {"platform": draw(st.sampled_from(PLATFORMS)), "chat_type": "dm",
            "chat_id": draw(st.one_of(ODD_ID, st.integers(1, 2**53))), "user_id": draw(ODD_ID)}


@st.composite
def good_record(draw, n):
    """Good line number n: a message with a reply (so it runs a turn) whose text names n, or a /new."""
    record = {"source": draw(sources())}
    if draw(st.integers(0, 5)) == 0:
        record.update(op="command", text="/new")
    else:
        record.update(op="message", text=f"good {n}: {draw(TEXT)}", reply=draw(TEXT))
    choice = draw(st.integers(0, 3))
    if choice == 1:
        record["message_id"] = f"m{n}:{draw(ODD_ID)}"[:1024]
    elif choice == 2:
        record["message_id"] = 10**9 + n  # platforms with numeric ids
    if draw(st.booleans()):
        record["at"] = draw(st.datetimes(min_value=__import__("datetime").datetime(2000, 1, 1),
                                         max_value=__import__("datetime").datetime(2100, 1, 1))
                            ).isoformat() + draw(st.sampled_from(["Z", "+00:00", "+05:30", "-08:00"]))
    return record


# Finite: NaN and infinity are not JSON, so a record cannot carry them (the encoder refuses them).
FLOAT = st.floats(allow_nan=False, allow_infinity=False)
WRONG = st.one_of(st.integers(), FLOAT, st.booleans(), st.lists(st.integers(), max_size=2),
                  st.dictionaries(st.text(max_size=3), st.integers(), max_size=2))
BREAKS = {
    "op": [st.just(None), st.sampled_from(["msg", "", "MESSAGE"]), WRONG],
    "source": [st.just(None), st.text(max_size=5), WRONG.filter(lambda v: not isinstance(v, dict))],
    "text": [st.just(None), WRONG],
    "reply": [WRONG.filter(lambda v: v is not None)],
    "at": [st.sampled_from(["yesterday", "2026-11-01T10:00:00", "9999-12-31T23:59:59Z", "0001-01-01T00:00:00Z",
                            "", "2026-13-01T00:00:00Z"]), st.integers(), WRONG.filter(lambda v: not isinstance(v, int))],
    "message_id": [st.sampled_from(["", "   ", "a\x00b", "esc\x1b[31m", "x" * 5000, "tab\there"]),
                   st.booleans(), FLOAT, st.lists(st.text(max_size=2), max_size=2)],
    "platform": [st.sampled_from(["nope", "", "tele gram"]), WRONG],
    "chat_id": [st.just("\x07bell"), st.just("y" * 2000), st.just("   "), st.booleans(), FLOAT,
                st.lists(st.integers(), max_size=2), st.dictionaries(st.text(max_size=2), st.integers(), max_size=2)],
}


@st.composite
def bad_line(draw, n):
    """Bad line number n: bytes no parser can take, or a good record with exactly one field broken."""
    kind = draw(st.sampled_from(["bytes", "json", "missing", "huge", *BREAKS]))
    if kind == "bytes":
        raw = draw(st.binary(min_size=1, max_size=60).filter(lambda b: b"\n" not in b and b"\r" not in b)
                   .filter(_not_blank))
        return raw
    if kind == "json":
        return json.dumps(draw(st.one_of(st.integers(-10**15, 10**15), st.text(max_size=10), st.lists(st.integers()),
                                         st.none()))).encode()
    record = draw(good_record(n))
    if kind == "missing":
        del record[draw(st.sampled_from(["op", "source", "text"]))]
    elif kind == "huge":
        return (json.dumps(record)[:-1] + ', "message_id": ' + "9" * 400 + "}").encode()  # beyond any integer type
    elif kind in ("platform", "chat_id"):
        record["source"][kind] = draw(draw(st.sampled_from(BREAKS[kind])))
    else:
        if kind == "reply":
            record["op"], record["text"] = "message", f"bad {n}"
        record[kind] = draw(draw(st.sampled_from(BREAKS[kind])))
    if record.get("op") == "command" and kind != "text":
        record["text"] = "/dance"  # a command that is not one: bad for its own reason too
    return json.dumps(record, allow_nan=False).encode()


def _not_blank(raw):
    try:
        return bool(raw.decode("utf-8").strip())
    except UnicodeDecodeError:
        return True


@st.composite
def traffic(draw):
    lines, good, bad = [], [], []
    for n in range(1, draw(st.integers(1, 10)) + 1):
        if draw(st.booleans()):
            record = draw(good_record(n))
            good.append(record)
            lines.append(json.dumps(record).encode())
        else:
            bad.append(n)
            lines.append(draw(bad_line(n)))
    return lines, good, bad


# A leaked exception shows up as "SomeError: ..." (ingest's last-resort description of a failure).
LEAKED = re.compile(r"^[A-Z][A-Za-z]*(Error|Exception|Warning)\b")


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(traffic())
def test_ingest_imports_every_good_record_and_names_every_bad_one(generated):
    lines, good, bad = generated
    with tempfile.TemporaryDirectory() as tmp:
        db, path = str(Path(tmp) / "i.db"), Path(tmp) / "t.jsonl"
        path.write_bytes(b"\n".join(lines) + b"\n")

        result = CliRunner().invoke(main, ["--db", db, "ingest", str(path), "--json"])

        assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
        assert "Traceback" not in result.output
        assert result.exit_code == (1 if bad else 0), result.output
        report = json.loads(result.stdout)
        assert [e["line"] for e in report["errors"]] == bad, report["errors"]
        for error in report["errors"]:
            assert error["error"] and "\n" not in error["error"] and not LEAKED.match(error["error"]), error
            assert f"line {error['line']}: " in result.stderr
        assert (report["applied"], report["duplicates"], report["replies_not_recorded"]) == (len(good), 0, [])
        messages = [r for r in good if r["op"] == "message"]
        assert report["commands"] == len(good) - len(messages)
        with Turnlog(db) as t:
            users = [m["content"] for s in t.sessions() for m in t.transcript(s.session_id) if m["role"] == "user"]
        assert sorted(users) == sorted(r["text"] for r in messages)
